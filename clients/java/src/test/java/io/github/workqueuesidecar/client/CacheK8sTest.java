package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * Cache reads, lease objects and object writes with a real informer: ConfigMaps of the local
 * control plane (hack/control-plane), selected by a label unique to the run, written through the
 * sidecar's ObjectService. Skipped without WQS_KUBECONFIG.
 */
class CacheK8sTest {
  private static final ResourceType CONFIG_MAP = new ResourceType("v1", "ConfigMap");

  /** The part of a ConfigMap the test decodes. */
  record Meta(String name, String namespace, Map<String, String> labels, String resourceVersion) {}

  record ConfigMap(Meta metadata, Map<String, String> data) {}

  private static Map<String, Object> manifest(String name, String id, String team) {
    return Map.of(
        "apiVersion", "v1",
        "kind", "ConfigMap",
        "metadata", Map.of("name", name, "namespace", "default", "labels", Map.of("wqs-java-test", id)),
        "data", Map.of("team", team));
  }

  @Test
  @DisplayName("C11 cache reads: get, list by namespace, labels and index, read-your-writes, lease objects")
  void c11CacheReads() throws Exception {
    String kubeconfig = System.getenv("WQS_KUBECONFIG");
    Assumptions.assumeTrue(kubeconfig != null && !kubeconfig.isEmpty(),
        "needs the local control plane: hack/control-plane up; eval \"$(hack/control-plane env)\"");
    String id = "wqs-java-" + (System.nanoTime() % 1_000_000);
    String selector = "wqs-java-test=" + id;
    String config = """
        informers:
          cms:
            version: v1
            kind: ConfigMap
            namespace: default
            label_selector: %s
            indexes:
              team: { field: data.team }
        queues:
          cms:
            primary: cms
        writes:
          - { kind: ConfigMap, namespaces: [default], lease: optional }
        """.formatted(selector);
    String a = id + "-a";
    String b = id + "-b";
    try (Sidecar s = Sidecar.startWithKubeconfig(config, kubeconfig);
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      try {
        WrittenObject wa = client.objects().apply(CONFIG_MAP, "default", a, manifest(a, id, "red"));
        client.objects().apply(CONFIG_MAP, "default", b, manifest(b, id, "blue"));
        Cache cache = client.cache();

        // get, waiting for the informer's list and for the version the apply returned.
        Optional<ConfigMap> cm = cache.get("cms", "default", a, ConfigMap.class, ReadOptions.atLeast(wa.resourceVersion()).waitFor(Duration.ofSeconds(30)));
        assertTrue(cm.isPresent());
        assertEquals(a, cm.get().metadata().name());
        assertEquals("red", cm.get().data().get("team"));
        assertEquals(Optional.empty(), cache.get("cms", "default", id + "-none", JsonNode.class));
        NotFoundException unknown = assertThrows(NotFoundException.class, () -> cache.get("nope", "default", a, JsonNode.class));
        assertEquals(io.grpc.Status.Code.NOT_FOUND, unknown.code());

        // list by namespace and label selector, one object per page, in name order.
        eventually("both objects cached", () -> cache.listObjects("cms", ListOptions.inNamespace("default")).size() == 2);
        List<ConfigMap> all = cache.list("cms", ConfigMap.class, ListOptions.inNamespace("default").labels(selector).pageSize(1));
        assertEquals(List.of(a, b), all.stream().map(c -> c.metadata().name()).toList());
        List<CachedObject> blue = cache.listObjects("cms", ListOptions.all().index("team", "blue"));
        assertEquals(1, blue.size());
        assertEquals(b, blue.get(0).name());
        assertEquals("default", blue.get(0).namespace());

        // Read-your-writes: the read waits until the cache has the patch's version.
        WrittenObject patched = client.objects().mergePatch(CONFIG_MAP, "default", a, Map.of("data", Map.of("team", "green")));
        CachedObject green = cache.getObject("cms", "default", a, ReadOptions.atLeast(patched.resourceVersion()).waitFor(Duration.ofSeconds(10))).orElseThrow();
        assertEquals(patched.resourceVersion(), green.resourceVersion());
        assertEquals("green", green.as(ConfigMap.class).data().get("team"));

        // Leases carry the object; a deleted one comes as a tombstone.
        Recorder r = new Recorder((req, sig, n) -> Result.done());
        try (Worker w = client.queue("cms").start(r, RunOptions.concurrency(2).includeObject())) {
          eventually("both keys reconciled", () -> !r.of("default/" + a).isEmpty() && !r.of("default/" + b).isEmpty());
          for (String name : List.of(a, b)) {
            Request req = r.of("default/" + name).get(0).request();
            CachedObject obj = req.object().orElseThrow();
            assertEquals(name, obj.name());
            assertFalse(obj.deleted());
            assertEquals(name, obj.as(ConfigMap.class).metadata().name());
          }
          client.objects().delete(CONFIG_MAP, "default", b);
          eventually("the deletion reconciled", () -> r.of("default/" + b).size() > 1);
          Request gone = r.of("default/" + b).get(1).request();
          assertTrue(gone.has(ReasonKind.DELETED), gone.reasons().toString());
          assertTrue(gone.object().orElseThrow().deleted());
        }
        assertEquals(Optional.empty(), cache.getObject("cms", "default", b, ReadOptions.now()));
        assertTrue(cache.getObject("cms", "default", b, ReadOptions.now().includeDeleted()).orElseThrow().deleted());
      } finally {
        for (String name : List.of(a, b)) {
          try {
            client.objects().delete(CONFIG_MAP, "default", name);
          } catch (NotFoundException gone) {
            // already deleted
          }
        }
      }
    }
  }
}
