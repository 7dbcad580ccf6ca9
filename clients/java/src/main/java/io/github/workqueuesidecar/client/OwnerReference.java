package io.github.workqueuesidecar.client;

import java.util.Objects;

/**
 * An entry of an object's {@code metadata.ownerReferences}, as Jackson encodes and decodes it (a
 * field the API server leaves out decodes as false). {@link CachedObject#controllerRef()} makes the
 * one a child carries to say its owner controls it.
 *
 * @param apiVersion the owner's apiVersion
 * @param kind the owner's kind
 * @param name the owner's name
 * @param uid the owner's UID
 * @param controller the owner is the child's managing controller
 * @param blockOwnerDeletion the owner's foreground deletion waits for the child
 */
public record OwnerReference(String apiVersion, String kind, String name, String uid, boolean controller, boolean blockOwnerDeletion) {
  public OwnerReference {
    Objects.requireNonNull(apiVersion, "apiVersion");
    Objects.requireNonNull(kind, "kind");
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(uid, "uid");
  }
}
