package io.github.workqueuesidecar.client;

import io.grpc.Status;

/**
 * FAILED_PRECONDITION: the lease's token is stale or unknown (it already ended); nothing changed.
 * For Done, Finish and Extend, and for an ObjectService write made under a lease ({@link
 * ObjectWrites#underLease}) after it ended: the write was not made ({@link #reason()} {@code
 * STALE_LEASE}). A standalone sidecar's refusal of a write is {@link NoKubernetesException}
 * instead.
 */
public class StaleLeaseException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public StaleLeaseException(String message) {
    this(message, (String) null, null);
  }

  public StaleLeaseException(String message, String reason, Throwable cause) {
    super(Status.Code.FAILED_PRECONDITION, message, reason, cause);
  }

  public StaleLeaseException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.FAILED_PRECONDITION, message, details, cause);
  }
}
