package io.github.workqueuesidecar.client;

import io.grpc.Status;

/** INVALID_ARGUMENT: the sidecar refused a field of the request: an empty key, a negative delay, a malformed selector or object; OUT_OF_RANGE: a message past the size limit. */
public class InvalidArgumentException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public InvalidArgumentException(String message) {
    this(message, (String) null, null);
  }

  public InvalidArgumentException(String message, String reason, Throwable cause) {
    super(Status.Code.INVALID_ARGUMENT, message, reason, cause);
  }

  public InvalidArgumentException(String message, ErrorDetails details, Throwable cause) {
    this(Status.Code.INVALID_ARGUMENT, message, details, cause);
  }

  /** A refusal of the request itself under another code: OUT_OF_RANGE for a message past the size limit. */
  InvalidArgumentException(Status.Code code, String message, ErrorDetails details, Throwable cause) {
    super(code, message, details, cause);
  }
}
