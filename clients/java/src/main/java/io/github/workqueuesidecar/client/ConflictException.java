package io.github.workqueuesidecar.client;

import io.grpc.Status;

/**
 * ABORTED: a write conflicted: the object exists (the subclass {@link AlreadyExistsException},
 * {@link #reason()} {@code AlreadyExists}), or a UID or resourceVersion precondition failed
 * ({@code Conflict}). A write whose lease ended before the API server answered it is the subclass
 * {@link LeaseEndedDuringWriteException}.
 */
public class ConflictException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public ConflictException(String message) {
    this(message, (String) null, null);
  }

  public ConflictException(String message, String reason, Throwable cause) {
    super(Status.Code.ABORTED, message, reason, cause);
  }

  public ConflictException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.ABORTED, message, details, cause);
  }
}
