package io.github.workqueuesidecar.client;

import java.time.Instant;
import java.util.List;
import java.util.Optional;
import workqueue.v1.Workqueue;

/**
 * Where one key is in its queue (KeyState).
 *
 * @param state absent, queued, waiting for a delay, held by a worker, or settling after writes
 * @param priority the priority it is queued, waiting or was handed out at
 * @param failures failures since it was last forgotten
 * @param lastError the error text of its last failed attempt; empty when none
 * @param reasons why it is queued or waiting (while held, the reasons of its lease)
 * @param queuedSince QUEUED: when it became ready; else null
 * @param waitingUntil WAITING: when it becomes ready; else null
 * @param heldUntil HELD: the lease's deadline; else null
 * @param holder HELD: the lease's holder; else empty
 * @param dirty HELD (or SETTLING): added again while held, queued again when the lease ends
 * @param settlingUntil SETTLING: the latest instant it waits for the caches to see its lease's
 *     writes; else null
 * @param shard where the key belongs among the replicas of a shard group; empty unless the queue
 *     is sharded ({@code shard_by} in the sidecar's config)
 */
public record KeyStatus(
    State state,
    int priority,
    int failures,
    String lastError,
    List<Reason> reasons,
    Instant queuedSince,
    Instant waitingUntil,
    Instant heldUntil,
    String holder,
    boolean dirty,
    Instant settlingUntil,
    Optional<ShardPlace> shard) {

  /** Where a key is. */
  public enum State {
    /** The queue does not know the key (its failure count may still be kept). */
    ABSENT,
    /** Ready, waiting for a worker. */
    QUEUED,
    /** Waiting for a delay to pass before it is ready. */
    WAITING,
    /** Held by a worker under a lease. */
    HELD,
    /**
     * Its last lease ended after writes through the sidecar under that lease: not handed out again
     * until the caches have seen them, or until {@link #settlingUntil()}.
     */
    SETTLING
  }

  /** The time the key becomes ready, for a WAITING key. */
  public Optional<Instant> readyAt() {
    return Optional.ofNullable(waitingUntil);
  }

  static KeyStatus of(Workqueue.KeyStateResponse r) {
    State state = switch (r.getState()) {
      case KEY_STATE_QUEUED -> State.QUEUED;
      case KEY_STATE_WAITING -> State.WAITING;
      case KEY_STATE_HELD -> State.HELD;
      case KEY_STATE_SETTLING -> State.SETTLING;
      default -> State.ABSENT;
    };
    return new KeyStatus(
        state,
        r.getPriority(),
        r.getFailures(),
        r.getLastError(),
        Reason.of(r.getReasonsList()),
        Protos.instant(r.hasQueuedSince(), r.getQueuedSince()),
        Protos.instant(r.hasWaitingUntil(), r.getWaitingUntil()),
        Protos.instant(r.hasHeldUntil(), r.getHeldUntil()),
        r.getHolder(),
        r.getDirty(),
        Protos.instant(r.hasSettlingUntil(), r.getSettlingUntil()),
        r.hasShard() ? Optional.of(ShardPlace.of(r.getShard())) : Optional.empty());
  }
}
