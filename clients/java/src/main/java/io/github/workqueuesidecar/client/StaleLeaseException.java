package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** FAILED_PRECONDITION: the lease's token is stale or unknown (it already ended); nothing changed. Also what a standalone sidecar answers to an ObjectService write. */
public class StaleLeaseException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public StaleLeaseException(String message) {
    this(message, null, null);
  }

  public StaleLeaseException(String message, String reason, Throwable cause) {
    super(Status.Code.FAILED_PRECONDITION, message, reason, cause);
  }
}
