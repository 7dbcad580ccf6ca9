package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import workqueue.v1.Workqueue;

/**
 * One key to reconcile, with what the sidecar knows about it.
 *
 * @param queue the queue's name
 * @param key the key, by convention "namespace/name" or "name"
 * @param priority the key's priority when it was handed out
 * @param failures failures since it was last forgotten
 * @param lastError the error text of its last failed attempt; empty when none
 * @param reasons why it was queued, merged over every add since it was last handed out
 * @param enqueuedAt when it entered the ready queue for this round; null if the sidecar sent none
 * @param object the cached object of the queue's primary informer, when asked for with {@link
 *     RunOptions#includeObject()}
 * @param signal the lease's cancellation signal, also passed to the reconciler; gives the deadline
 * @param lease the lease this request came with: pass it to {@link ObjectWrites#underLease} so the
 *     reconcile's writes are fenced by it
 * @param deleting the key's object is being deleted (it has a deletionTimestamp and finalizers
 *     hold it); on a queue that declares a finalizer, a success removes it
 * @param deletionTimestamp when deleting, the object's metadata.deletionTimestamp
 */
public record Request(
    String queue,
    String key,
    int priority,
    int failures,
    String lastError,
    List<Reason> reasons,
    Instant enqueuedAt,
    Optional<CachedObject> object,
    CancellationSignal signal,
    LeaseRef lease,
    boolean deleting,
    Optional<Instant> deletionTimestamp) {

  /** The key's namespace: the part before the first '/', empty for a cluster-scoped key. */
  public String namespace() {
    int slash = key.indexOf('/');
    return slash < 0 ? "" : key.substring(0, slash);
  }

  /** The key's name: the part after the first '/', or the whole key. */
  public String name() {
    int slash = key.indexOf('/');
    return slash < 0 ? key : key.substring(slash + 1);
  }

  /** The lease's current deadline (moved by each extend). */
  public Instant deadline() {
    return signal.deadline();
  }

  /** True if one of the reasons is of this kind (e.g. {@code has(ReasonKind.DELETED)}). */
  public boolean has(ReasonKind kind) {
    return reasons.stream().anyMatch(r -> r.kind() == kind);
  }

  static Request of(String queue, Workqueue.Lease l, CancellationSignal signal, ObjectMapper mapper) {
    return new Request(
        queue,
        l.getKey(),
        l.getPriority(),
        l.getFailures(),
        l.getLastError(),
        Reason.of(l.getReasonsList()),
        Protos.instant(l.hasEnqueuedAt(), l.getEnqueuedAt()),
        l.hasObject() ? Optional.of(new CachedObject(l.getObject(), mapper)) : Optional.empty(),
        signal,
        new LeaseRef(queue, l.getKey(), l.getToken()),
        l.getDeleting(),
        Optional.ofNullable(Protos.instant(l.hasDeletionTimestamp(), l.getDeletionTimestamp())));
  }
}
