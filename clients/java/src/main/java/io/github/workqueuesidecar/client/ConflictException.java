package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** ABORTED: a write conflicted: the object exists, or a UID or resourceVersion precondition failed. */
public class ConflictException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public ConflictException(String message) {
    this(message, null, null);
  }

  public ConflictException(String message, String reason, Throwable cause) {
    super(Status.Code.ABORTED, message, reason, cause);
  }
}
