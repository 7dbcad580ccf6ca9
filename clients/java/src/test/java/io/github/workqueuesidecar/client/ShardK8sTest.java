package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * KeyState's shard place: one replica of a shard group, its Lease on the local control plane
 * (hack/control-plane). Skipped without WQS_KUBECONFIG.
 */
class ShardK8sTest {
  private static final ResourceType NAMESPACE = new ResourceType("v1", "Namespace");
  private static final String IDENTITY = "r0";

  @Test
  @DisplayName("C14 a key's shard place: the replica that owns its slot, granted here; none in a queue that is not sharded")
  void c14ShardPlace() throws Exception {
    String kubeconfig = System.getenv("WQS_KUBECONFIG");
    Assumptions.assumeTrue(kubeconfig != null && !kubeconfig.isEmpty(),
        "needs the local control plane: hack/control-plane up; eval \"$(hack/control-plane env)\"");
    // The replica's Lease goes in a namespace of the test's own, made (and deleted) through the
    // sidecar: the replica keeps trying to write its Lease until the namespace exists.
    String ns = "javashard-" + (System.nanoTime() % 1_000_000);
    // The informer selects nothing: by namespace, a key's slot comes from the key.
    String config = """
        informers:
          cms: { version: v1, kind: ConfigMap, namespace: %s, label_selector: none=none }
        queues:
          sharded: { primary: cms, shard_by: namespace }
          plain: {}
        writes:
          - { kind: Namespace, verbs: [create, delete], lease: optional }
        """.formatted(ns);
    try (Sidecar s = Sidecar.start(config, "--kubeconfig", kubeconfig, "--shard-group", "shards",
            "--leader-election-namespace", ns, "--leader-election-identity", IDENTITY,
            // A 3 s Lease renewed every 0.5 s, as the sidecar's own replica tests.
            "--leader-election-lease-duration", "3s", "--leader-election-renew-deadline", "2s",
            "--leader-election-retry-period", "500ms");
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      client.objects().create(NAMESPACE, "", Map.of("apiVersion", "v1", "kind", "Namespace", "metadata", Map.of("name", ns)));
      try {
        String key = ns + "/a";
        AtomicReference<KeyStatus> status = new AtomicReference<>();
        eventually(Duration.ofSeconds(30), "the replica to own the key's slot", () -> {
          status.set(client.queue("sharded").keyState(key));
          return status.get().shard().map(ShardPlace::grantedHere).orElse(false);
        });
        ShardPlace shard = status.get().shard().orElseThrow();
        assertTrue(shard.slot().isPresent() && shard.slot().getAsInt() >= 0 && shard.slot().getAsInt() < 4096, shard.toString());
        assertEquals(IDENTITY, shard.owner());

        assertTrue(client.queue("plain").keyState(key).shard().isEmpty(), "a queue that is not sharded has no shard place");
      } finally {
        client.objects().delete(NAMESPACE, "", ns);
      }
    }
  }
}
