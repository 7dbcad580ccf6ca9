package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.ScheduledFuture;

/**
 * One lease a worker holds and the deadline rules, decided from instants passed in (so unit tests
 * need no clock):
 *
 * <ul>
 *   <li>the deadline is the earlier of the sidecar's deadline and arrival (or the last Extended's)
 *       plus the TTL it gave, so a worker whose clock disagrees never runs on past the lease;
 *   <li>a lease past its deadline when a thread frees is never started;
 *   <li>a result returned at or after the deadline is discarded.
 * </ul>
 *
 * <p>Confined to the worker's stream thread except {@link #deadline()}, which any thread reads.
 */
final class HeldLease {
  final String key;
  final long token;
  final Session session;
  final CancellationSignal signal;

  private volatile Instant deadline;
  /** The lease ended without this worker (expired, revoked, the stream broke); its result is discarded. */
  private volatile boolean lost;
  /** The reconcile has begun on a pool thread. */
  boolean started;

  ScheduledFuture<?> expiry;
  ScheduledFuture<?> extender;

  HeldLease(String key, long token, Session session, Instant received, Instant sidecarDeadline, Duration ttl) {
    this.key = key;
    this.token = token;
    this.session = session;
    this.deadline = deadlineOf(received, sidecarDeadline, ttl);
    this.signal = new CancellationSignal(this::deadline);
  }

  /** The earlier of the sidecar's deadline (when given) and {@code now + ttl} (when given). */
  static Instant deadlineOf(Instant now, Instant sidecarDeadline, Duration ttl) {
    Instant local = ttl == null || ttl.isZero() || ttl.isNegative() ? null : now.plus(ttl);
    if (sidecarDeadline == null) {
      return local == null ? now : local;
    }
    return local == null || sidecarDeadline.isBefore(local) ? sidecarDeadline : local;
  }

  Instant deadline() {
    return deadline;
  }

  /** An Extended moved the deadline. */
  void extended(Instant now, Instant sidecarDeadline, Duration ttl) {
    deadline = deadlineOf(now, sidecarDeadline, ttl);
  }

  boolean expired(Instant now) {
    return !now.isBefore(deadline);
  }

  /** Whether a thread that frees at {@code now} may start this lease's reconcile. */
  boolean mayStart(Instant now) {
    return !lost && !expired(now);
  }

  /** Whether a result returned at {@code now} is sent to the sidecar (else it is discarded). */
  boolean resultCounts(Instant now) {
    return !lost && !expired(now);
  }

  boolean lost() {
    return lost;
  }

  /** Marks the lease lost and fires its signal; a lease waiting for its key (see Worker.claimKey) gives up. */
  void lose(String why) {
    lost = true;
    signal.cancel(CancellationSignal.Cause.LEASE_LOST, why);
    if (session != null) {
      session.leaseLost();
    }
  }

  void cancelTimers() {
    if (expiry != null) {
      expiry.cancel(false);
    }
    if (extender != null) {
      extender.cancel(false);
    }
  }
}
