package io.github.workqueuesidecar.client;

import java.util.Objects;

/**
 * A kind of object as the API server knows it, e.g. {@code new ResourceType("v1", "Namespace")}.
 *
 * @param apiVersion "v1" for the core group, "group/version" otherwise
 * @param kind the kind, e.g. "ConfigMap"
 */
public record ResourceType(String apiVersion, String kind) {
  public ResourceType {
    Objects.requireNonNull(apiVersion, "apiVersion");
    Objects.requireNonNull(kind, "kind");
  }

  workqueue.v1.Object.ResourceType proto() {
    return workqueue.v1.Object.ResourceType.newBuilder().setApiVersion(apiVersion).setKind(kind).build();
  }
}
