package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** UNAVAILABLE: the sidecar cannot serve the call now: the queue is shut down, this sidecar is not the leader, an informer has not synced, or the sidecar cannot be reached. Retrying later may succeed. */
public class UnavailableException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public UnavailableException(String message) {
    this(message, (String) null, null);
  }

  public UnavailableException(String message, String reason, Throwable cause) {
    super(Status.Code.UNAVAILABLE, message, reason, cause);
  }

  public UnavailableException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.UNAVAILABLE, message, details, cause);
  }
}
