package io.github.workqueuesidecar.client;

import io.grpc.Status;
import java.util.Optional;

/**
 * A call to the sidecar failed. Unchecked, and it carries the gRPC status code ({@link #code()}):
 * catch a subclass for the failures a caller handles ({@link NotFoundException}, {@link
 * InvalidArgumentException}, {@link StaleLeaseException}, {@link UnavailableException}, {@link
 * ConflictException}, {@link ResourceExhaustedException}) and this class for the rest.
 */
public class WorkqueueException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final String reason;

  public WorkqueueException(Status.Code code, String message) {
    this(code, message, null, null);
  }

  public WorkqueueException(Status.Code code, String message, String reason, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.reason = reason;
  }

  /** The gRPC status code the sidecar (or the channel) answered. */
  public Status.Code code() {
    return code;
  }

  /**
   * The Kubernetes API server's reason ({@code Conflict}, {@code AlreadyExists}, {@code Invalid},
   * ...) for an ObjectService write it refused, from the status's {@code google.rpc.ErrorInfo}.
   */
  public Optional<String> reason() {
    return Optional.ofNullable(reason);
  }
}
