package io.github.workqueuesidecar.examples.users;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.workqueuesidecar.client.ClientOptions;
import io.github.workqueuesidecar.client.OwnerReference;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The example's pure parts: label values, and when a cached Namespace needs no write. */
class UsersTest {
  private static final ObjectMapper JSON = ClientOptions.defaults().objectMapper();
  private static final OwnerReference ADA = new OwnerReference("example.com/v1", "User", "ada", "u1", true, true);

  @Test
  void labelValueKeepsAValidLabel() {
    assertEquals("Alice-Smith", Users.labelValue("Alice Smith"));
    assertEquals("Ada-Lovelace--renamed", Users.labelValue("Ada Lovelace (renamed)"));
    assertEquals("a.b_c", Users.labelValue("--a.b_c__"));
    assertEquals(63, Users.labelValue("x".repeat(80)).length());
    assertEquals("", Users.labelValue("  "));
  }

  @Test
  void aNamespaceIsRightWithTheLabelsAnnotationsAndOnlyItsUserAsOwner() throws Exception {
    Map<String, String> labels = Map.of("example.com/user", "ada");
    Map<String, String> annotations = Map.of("example.com/display-name", "Ada");
    Users.Namespace cached = JSON.readValue("""
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "user-ada",
          "labels": {"example.com/user": "ada", "kubernetes.io/metadata.name": "user-ada"},
          "annotations": {"example.com/display-name": "Ada"},
          "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "User", "name": "ada", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]}}""",
        Users.Namespace.class);
    assertTrue(cached.metadata().covers(labels, annotations, List.of(ADA)));
    assertFalse(cached.metadata().covers(Map.of("example.com/user", "bob"), annotations, List.of(ADA)), "a label differs");
    assertFalse(cached.metadata().covers(labels, Map.of("example.com/display-name", "Bob"), List.of(ADA)), "an annotation differs");
    OwnerReference other = new OwnerReference("example.com/v1", "User", "ada", "u2", true, true);
    assertFalse(cached.metadata().covers(labels, annotations, List.of(other)), "another User of the same name");
    Users.Namespace bare = JSON.readValue("{\"metadata\": {\"name\": \"user-ada\"}}", Users.Namespace.class);
    assertFalse(bare.metadata().covers(labels, annotations, List.of(ADA)), "nothing set");
  }
}
