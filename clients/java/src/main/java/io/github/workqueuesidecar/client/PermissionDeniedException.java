package io.github.workqueuesidecar.client;

import io.grpc.Status;

/**
 * PERMISSION_DENIED: the API server refused the sidecar's write (its 403, reason {@code
 * Forbidden}): grant the sidecar's service account the verb.
 */
public class PermissionDeniedException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public PermissionDeniedException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.PERMISSION_DENIED, message, details, cause);
  }
}
