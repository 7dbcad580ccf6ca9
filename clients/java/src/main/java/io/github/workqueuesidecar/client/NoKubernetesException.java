package io.github.workqueuesidecar.client;

import io.grpc.Status;

/**
 * FAILED_PRECONDITION with reason {@code NO_KUBERNETES}: an ObjectService write asked of a standalone
 * sidecar (one whose config names no informers, so it does not talk to Kubernetes). Nothing was
 * written; retrying does not help. Not a {@link StaleLeaseException}: no lease is involved.
 */
public class NoKubernetesException extends WorkqueueException {
  private static final long serialVersionUID = 1L;

  public NoKubernetesException(String message) {
    this(message, new ErrorDetails(ErrorDetails.NO_KUBERNETES, ErrorDetails.DOMAIN_SIDECAR, java.util.Map.of(), java.util.List.of()), null);
  }

  public NoKubernetesException(String message, ErrorDetails details, Throwable cause) {
    super(Status.Code.FAILED_PRECONDITION, message, details, cause);
  }
}
