package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import workqueue.v1.Cache;

/**
 * One Kubernetes object as an informer cache holds it: its JSON and what a worker needs without
 * parsing it. Decode with {@link #as(Class)} (your own type, or {@code JsonNode.class}).
 */
public final class CachedObject {
  private final byte[] json;
  private final String resourceVersion;
  private final boolean deleted;
  private final String namespace;
  private final String name;
  private final ObjectMapper mapper;

  CachedObject(Cache.CachedObject proto, ObjectMapper mapper) {
    this.json = proto.getJson().toByteArray();
    this.resourceVersion = proto.getResourceVersion();
    this.deleted = proto.getDeleted();
    this.namespace = proto.getNamespace();
    this.name = proto.getName();
    this.mapper = mapper;
  }

  /** The object decoded into {@code type} with the client's Jackson mapper (unknown fields ignored). */
  public <T> T as(Class<T> type) {
    try {
      return mapper.readValue(json, type);
    } catch (IOException e) {
      throw new UncheckedIOException("decoding " + namespace + "/" + name + " as " + type.getName(), e);
    }
  }

  /** The object decoded into a generic type, e.g. {@code new TypeReference<Map<String, Object>>() {}}. */
  public <T> T as(TypeReference<T> type) {
    try {
      return mapper.readValue(json, type);
    } catch (IOException e) {
      throw new UncheckedIOException("decoding " + namespace + "/" + name, e);
    }
  }

  /** The object as a Jackson tree. */
  public JsonNode tree() {
    return as(JsonNode.class);
  }

  /**
   * The controller ownerReference of a child of this object: its apiVersion, kind, name and uid,
   * with {@code controller} and {@code blockOwnerDeletion} true. Put it in the child's {@code
   * metadata.ownerReferences}: the garbage collector deletes the child with its owner, and a queue
   * whose trigger is {@code by: owner} hears of the child's changes.
   *
   * @throws IllegalStateException when the object lacks one of apiVersion, kind, name or uid
   */
  public OwnerReference controllerRef() {
    JsonNode o = tree();
    String apiVersion = o.path("apiVersion").asText("");
    String kind = o.path("kind").asText("");
    String ownerName = o.path("metadata").path("name").asText("");
    String uid = o.path("metadata").path("uid").asText("");
    if (apiVersion.isEmpty() || kind.isEmpty() || ownerName.isEmpty() || uid.isEmpty()) {
      throw new IllegalStateException("workqueue: controller reference of " + this + ": the object lacks apiVersion, kind, name or uid");
    }
    return new OwnerReference(apiVersion, kind, ownerName, uid, true, true);
  }

  /** The object's JSON text. */
  public String json() {
    return new String(json, StandardCharsets.UTF_8);
  }

  /** Its metadata.resourceVersion. */
  public String resourceVersion() {
    return resourceVersion;
  }

  /** True when the object was deleted: the JSON is its last known state. */
  public boolean deleted() {
    return deleted;
  }

  /** Its metadata.namespace; empty for a cluster-scoped object. */
  public String namespace() {
    return namespace;
  }

  /** Its metadata.name. */
  public String name() {
    return name;
  }

  @Override
  public String toString() {
    return "CachedObject[" + (namespace.isEmpty() ? name : namespace + "/" + name) + "@" + resourceVersion + (deleted ? ", deleted" : "") + "]";
  }
}
