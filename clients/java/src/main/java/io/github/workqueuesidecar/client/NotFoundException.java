package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** NOT_FOUND: no such queue, informer, index or object kind (or the API server's 404). */
public class NotFoundException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public NotFoundException(String message) {
    this(message, (String) null, null);
  }

  public NotFoundException(String message, String reason, Throwable cause) {
    super(Status.Code.NOT_FOUND, message, reason, cause);
  }

  public NotFoundException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.NOT_FOUND, message, details, cause);
  }
}
