package io.github.workqueuesidecar.client;

import workqueue.v1.Workqueue;

/** Why a key was queued (the proto's {@code ReasonKind}). */
public enum ReasonKind {
  /** A kind this client does not know (a newer sidecar). */
  UNKNOWN,
  /** Added through Add by a person, a script or another program. */
  MANUAL,
  /** The object was in the primary informer's initial list. */
  INITIAL_LIST,
  /** The primary informer's periodic resync. */
  RESYNC,
  /** The primary informer saw the object created. */
  ADDED,
  /** The primary informer saw the object updated. */
  UPDATED,
  /** The primary informer saw the object deleted. */
  DELETED,
  /** A failed attempt is retried after a backoff. */
  RETRY,
  /** A delayed add came due (addAfter, or {@link Result#requeueAfter}). */
  REQUEUE_AFTER,
  /** The previous lease reached its deadline without a Finish. */
  LEASE_EXPIRED,
  /** The previous lease's holder went away (its stream broke or closed). */
  LEASE_RELEASED,
  /** Another informer's object maps to this key. */
  TRIGGER,
  /** Handed back without counting a failure (end of a drain, leadership lost). */
  SHUTDOWN_RETURNED;

  static ReasonKind of(Workqueue.ReasonKind kind) {
    return switch (kind) {
      case REASON_KIND_MANUAL -> MANUAL;
      case REASON_KIND_INITIAL_LIST -> INITIAL_LIST;
      case REASON_KIND_RESYNC -> RESYNC;
      case REASON_KIND_ADDED -> ADDED;
      case REASON_KIND_UPDATED -> UPDATED;
      case REASON_KIND_DELETED -> DELETED;
      case REASON_KIND_RETRY -> RETRY;
      case REASON_KIND_REQUEUE_AFTER -> REQUEUE_AFTER;
      case REASON_KIND_LEASE_EXPIRED -> LEASE_EXPIRED;
      case REASON_KIND_LEASE_RELEASED -> LEASE_RELEASED;
      case REASON_KIND_TRIGGER -> TRIGGER;
      case REASON_KIND_SHUTDOWN_RETURNED -> SHUTDOWN_RETURNED;
      default -> UNKNOWN;
    };
  }
}
