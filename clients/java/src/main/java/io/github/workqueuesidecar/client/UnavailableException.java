package io.github.workqueuesidecar.client;

import io.grpc.Status;

/**
 * UNAVAILABLE: the sidecar cannot serve the call now: the queue is shut down, this sidecar is not the leader, an
 * informer has not synced, or the sidecar cannot be reached; for a write, the API server is unreachable or answered
 * 429, 500 or 503, or too many writes to it are still unanswered (reason {@code TOO_MANY_WRITES_OUT}: nothing was
 * sent). Retrying later may succeed.
 */
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
