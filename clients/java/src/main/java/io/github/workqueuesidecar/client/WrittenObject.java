package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;

/**
 * An object as the API server returned it after a write. Pass {@link #resourceVersion()} to a
 * cache read ({@link ReadOptions#atLeast}) to read the write back from the cache.
 */
public final class WrittenObject {
  private final byte[] json;
  private final String resourceVersion;
  private final String uid;
  private final ObjectMapper mapper;

  WrittenObject(workqueue.v1.Object.WrittenObject proto, ObjectMapper mapper) {
    this.json = proto.getJson().toByteArray();
    this.resourceVersion = proto.getResourceVersion();
    this.uid = proto.getUid();
    this.mapper = mapper;
  }

  public String resourceVersion() {
    return resourceVersion;
  }

  public String uid() {
    return uid;
  }

  public String json() {
    return new String(json, StandardCharsets.UTF_8);
  }

  public <T> T as(Class<T> type) {
    try {
      return mapper.readValue(json, type);
    } catch (IOException e) {
      throw new UncheckedIOException("decoding a written object as " + type.getName(), e);
    }
  }

  public JsonNode tree() {
    return as(JsonNode.class);
  }
}
