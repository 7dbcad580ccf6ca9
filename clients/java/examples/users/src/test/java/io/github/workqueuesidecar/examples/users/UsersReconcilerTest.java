package io.github.workqueuesidecar.examples.users;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The reconciler's pure parts: label values and the up-to-date check. */
class UsersReconcilerTest {
  private static final ObjectMapper JSON = new ObjectMapper();

  @Test
  void labelValueKeepsAValidLabel() {
    assertEquals("Alice-Smith", UsersReconciler.labelValue("Alice Smith"));
    assertEquals("a.b_c", UsersReconciler.labelValue("--a.b_c__"));
    assertEquals(63, UsersReconciler.labelValue("x".repeat(80)).length());
    assertEquals("", UsersReconciler.labelValue("  "));
  }

  @Test
  void upToDateNeedsLabelsAnnotationsAndOneControllerOwner() throws Exception {
    Map<String, String> labels = Map.of("example.com/user", "alice");
    Map<String, String> annotations = Map.of("example.com/display-name", "Alice");
    JsonNode good = JSON.readTree("""
        {"labels": {"example.com/user": "alice", "other": "x"},
         "annotations": {"example.com/display-name": "Alice"},
         "ownerReferences": [{"uid": "u1", "controller": true}, {"uid": "u2"}]}""");
    assertTrue(UsersReconciler.upToDate(good, labels, annotations, "u1"));
    assertFalse(UsersReconciler.upToDate(good, labels, annotations, "u2"), "another owner");
    assertFalse(UsersReconciler.upToDate(good, Map.of("example.com/user", "bob"), annotations, "u1"), "a label differs");
    JsonNode bare = JSON.readTree("{}");
    assertFalse(UsersReconciler.upToDate(bare, labels, annotations, "u1"));
  }
}
