package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import java.util.List;
import org.junit.jupiter.api.Test;
import workqueue.v1.Cache;

/** CachedObject.controllerRef and OwnerReference's JSON: pure, no sidecar. */
class OwnerReferenceTest {
  private static final ObjectMapper MAPPER = ClientOptions.defaults().objectMapper();

  private static CachedObject cached(String json) {
    return new CachedObject(Cache.CachedObject.newBuilder().setName("ada").setJson(ByteString.copyFromUtf8(json)).build(), MAPPER);
  }

  @Test
  void controllerRefNamesTheOwnerAsController() throws Exception {
    CachedObject user = cached("""
        {"apiVersion": "example.com/v1", "kind": "User", "metadata": {"name": "ada", "uid": "u-1", "resourceVersion": "7"}, "spec": {}}""");
    OwnerReference ref = user.controllerRef();
    assertEquals(new OwnerReference("example.com/v1", "User", "ada", "u-1", true, true), ref);
    assertEquals("{\"apiVersion\":\"example.com/v1\",\"kind\":\"User\",\"name\":\"ada\",\"uid\":\"u-1\",\"controller\":true,\"blockOwnerDeletion\":true}",
        MAPPER.writeValueAsString(ref));
  }

  @Test
  void controllerRefNeedsApiVersionKindNameAndUid() {
    assertThrows(IllegalStateException.class, () -> cached("{\"apiVersion\": \"v1\", \"kind\": \"User\", \"metadata\": {\"name\": \"ada\"}}").controllerRef());
    assertThrows(IllegalStateException.class, () -> cached("{\"metadata\": {\"name\": \"ada\", \"uid\": \"u-1\"}}").controllerRef());
  }

  @Test
  void ownerReferencesDecodeFromTheApiServersJson() throws Exception {
    List<OwnerReference> refs = MAPPER.readValue("""
        [{"apiVersion": "example.com/v1", "kind": "User", "name": "ada", "uid": "u-1", "controller": true, "blockOwnerDeletion": true},
         {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-2"}]""", new TypeReference<List<OwnerReference>>() {});
    assertEquals(List.of(new OwnerReference("example.com/v1", "User", "ada", "u-1", true, true), new OwnerReference("v1", "ConfigMap", "c", "u-2", false, false)), refs);
  }
}
