package io.github.workqueuesidecar.client;

import io.grpc.Status;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A call to the sidecar failed. Unchecked, and it carries the gRPC status code ({@link #code()})
 * and, when the status had a {@code google.rpc.ErrorInfo}, its reason and domain ({@link
 * #reason()}, {@link #domain()}): catch a subclass for the failures a caller handles ({@link
 * NotFoundException}, {@link InvalidArgumentException}, {@link StaleLeaseException}, {@link
 * NoKubernetesException}, {@link UnavailableException}, {@link ConflictException} (and its {@link
 * LeaseEndedDuringWriteException}), {@link ResourceExhaustedException}, {@link
 * DeadlineExceededException}) and this class for the rest.
 */
public class WorkqueueException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final transient ErrorDetails details;

  public WorkqueueException(Status.Code code, String message) {
    this(code, message, ErrorDetails.NONE, null);
  }

  public WorkqueueException(Status.Code code, String message, String reason, Throwable cause) {
    this(code, message, ErrorDetails.ofReason(reason), cause);
  }

  public WorkqueueException(Status.Code code, String message, ErrorDetails details, Throwable cause) {
    super(message, cause);
    this.code = code;
    this.details = Objects.requireNonNullElse(details, ErrorDetails.NONE);
  }

  /** The gRPC status code the sidecar (or the channel) answered. */
  public Status.Code code() {
    return code;
  }

  /**
   * The reason of the status's {@code google.rpc.ErrorInfo}: the Kubernetes API server's ({@code
   * Conflict}, {@code AlreadyExists}, {@code Invalid}, ..., domain {@code k8s.io}) for a write it
   * refused, or the sidecar's ({@code STALE_LEASE}, {@code NO_KUBERNETES}, {@code
   * LEASE_ENDED_DURING_WRITE}, domain {@code workqueue-sidecar}); empty when the status had none.
   */
  public Optional<String> reason() {
    return details().reason().isEmpty() ? Optional.empty() : Optional.of(details().reason());
  }

  /** The domain of the status's {@code google.rpc.ErrorInfo} ({@code k8s.io}, {@code workqueue-sidecar}); empty when none. */
  public Optional<String> domain() {
    return details().domain().isEmpty() ? Optional.empty() : Optional.of(details().domain());
  }

  /** The ErrorInfo's metadata, e.g. {@code http_status} for the API server's refusals; empty when none. */
  public Map<String, String> metadata() {
    return details().metadata();
  }

  /** The API server's causes of an Invalid refusal (the status's {@code google.rpc.BadRequest}); empty when none. */
  public List<ErrorDetails.FieldViolation> causes() {
    return details().causes();
  }

  /** Everything the status carried besides its code and message. */
  public ErrorDetails details() {
    return details == null ? ErrorDetails.NONE : details;
  }
}
