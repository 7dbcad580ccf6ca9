package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** RESOURCE_EXHAUSTED: over a server limit: a batch too large, a queue full. */
public class ResourceExhaustedException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public ResourceExhaustedException(String message) {
    this(message, (String) null, null);
  }

  public ResourceExhaustedException(String message, String reason, Throwable cause) {
    super(Status.Code.RESOURCE_EXHAUSTED, message, reason, cause);
  }

  public ResourceExhaustedException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.RESOURCE_EXHAUSTED, message, details, cause);
  }
}
