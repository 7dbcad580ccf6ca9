package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** DEADLINE_EXCEEDED: the call's deadline passed, or the cache did not reach the minimum resourceVersion within the wait. */
public class DeadlineExceededException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public DeadlineExceededException(String message) {
    this(message, (String) null, null);
  }

  public DeadlineExceededException(String message, String reason, Throwable cause) {
    super(Status.Code.DEADLINE_EXCEEDED, message, reason, cause);
  }

  public DeadlineExceededException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.DEADLINE_EXCEEDED, message, details, cause);
  }
}
