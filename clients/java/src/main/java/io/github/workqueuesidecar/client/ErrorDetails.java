package io.github.workqueuesidecar.client;

import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * What a failed call's status carried besides its code and message: the {@code
 * google.rpc.ErrorInfo} detail (reason, domain, metadata) and the {@code google.rpc.BadRequest}
 * field violations. Read through {@link WorkqueueException#reason()}, {@link
 * WorkqueueException#domain()}, {@link WorkqueueException#metadata()} and {@link
 * WorkqueueException#causes()}.
 *
 * @param reason the ErrorInfo's reason: the API server's ({@code Conflict}, {@code AlreadyExists},
 *     {@code Invalid}, ...) or the sidecar's ({@code STALE_LEASE}, {@code NO_KUBERNETES},
 *     {@code LEASE_ENDED_DURING_WRITE}, {@code TOO_MANY_WRITES_OUT}); empty without one
 * @param domain the ErrorInfo's domain: {@code k8s.io} or {@code workqueue-sidecar}; empty without
 *     one
 * @param metadata the ErrorInfo's metadata, e.g. {@code http_status} for the API server's
 *     refusals
 * @param causes the API server's causes of an Invalid (422) refusal, one per field violation
 */
public record ErrorDetails(String reason, String domain, Map<String, String> metadata, List<FieldViolation> causes) {
  /** No ErrorInfo and no BadRequest: a status with only its code and message. */
  public static final ErrorDetails NONE = new ErrorDetails("", "", Map.of(), List.of());

  /** A domain of the ErrorInfo: the sidecar's own refusals. */
  public static final String DOMAIN_SIDECAR = "workqueue-sidecar";

  /** A domain of the ErrorInfo: the Kubernetes API server's refusals. */
  public static final String DOMAIN_KUBERNETES = "k8s.io";

  /** The sidecar's reason for a write or Done/Finish/Extend under a lease that already ended. */
  public static final String STALE_LEASE = "STALE_LEASE";

  /** The sidecar's reason for a write asked of a standalone sidecar (no Kubernetes). */
  public static final String NO_KUBERNETES = "NO_KUBERNETES";

  /**
   * The sidecar's reason (ABORTED) for a write under a lease that was made, but whose lease ended
   * before the API server answered it: another worker may hold the key by now.
   */
  public static final String LEASE_ENDED_DURING_WRITE = "LEASE_ENDED_DURING_WRITE";

  /**
   * The sidecar's reason (UNAVAILABLE) for a write not sent because too many writes to the API
   * server are still unanswered: retry later.
   */
  public static final String TOO_MANY_WRITES_OUT = "TOO_MANY_WRITES_OUT";

  /** The API server's reason for a create of a name that is taken (ABORTED). */
  public static final String ALREADY_EXISTS = "AlreadyExists";

  /**
   * One cause of a refusal: a field the API server found invalid, and why.
   *
   * @param field the field's path, e.g. {@code metadata.name}
   * @param description what is wrong with it
   */
  public record FieldViolation(String field, String description) {}

  public ErrorDetails {
    reason = Objects.requireNonNullElse(reason, "");
    domain = Objects.requireNonNullElse(domain, "");
    metadata = Map.copyOf(Objects.requireNonNullElse(metadata, Map.of()));
    causes = List.copyOf(Objects.requireNonNullElse(causes, List.of()));
  }

  /** Only a reason, no domain. */
  static ErrorDetails ofReason(String reason) {
    return reason == null || reason.isEmpty() ? NONE : new ErrorDetails(reason, "", Map.of(), List.of());
  }
}
