package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.rpc.ErrorInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import workqueue.v1.Workqueue;

/**
 * Writes through the sidecar's ObjectService: each call and its errors (C12), and writes under a
 * lease, fenced by it (C13). The Kubernetes parts write ConfigMaps of the local control plane
 * (hack/control-plane) and are skipped without WQS_KUBECONFIG.
 */
class ObjectsTest {
  private static final ResourceType CONFIG_MAP = new ResourceType("v1", "ConfigMap");

  record Meta(String name, String resourceVersion) {}

  record ConfigMap(Meta metadata, Map<String, String> data) {}

  private static String kubeconfig() {
    String kubeconfig = System.getenv("WQS_KUBECONFIG");
    Assumptions.assumeTrue(kubeconfig != null && !kubeconfig.isEmpty(),
        "needs the local control plane: hack/control-plane up; eval \"$(hack/control-plane env)\"");
    return kubeconfig;
  }

  private static Sidecar kubernetesSidecar(String id) {
    String config = """
        informers:
          cms: { version: v1, kind: ConfigMap, namespace: default, label_selector: wqs-java-objects=%s }
        queues:
          cms: { primary: cms }
        writes:
          - { kind: ConfigMap, namespaces: [default], lease: optional }
        """.formatted(id);
    return Sidecar.startWithKubeconfig(config, kubeconfig());
  }

  private static Map<String, Object> configMap(String name, String id, String v) {
    return Map.of(
        "apiVersion", "v1",
        "kind", "ConfigMap",
        "metadata", Map.of("name", name, "namespace", "default", "labels", Map.of("wqs-java-objects", id)),
        "data", Map.of("v", v));
  }

  private static void deleteQuietly(WorkqueueClient client, String name) {
    try {
      client.objects().delete(CONFIG_MAP, "default", name);
    } catch (WorkqueueException ignored) {
      // already gone, or never made
    }
  }

  @Test
  @DisplayName("C12 a standalone sidecar refuses every write with NoKubernetesException, never StaleLeaseException")
  void c12StandaloneRefusesWrites() {
    try (Sidecar s = Sidecar.start();
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      ObjectWrites plain = client.objects();
      ObjectWrites leased = client.objects().underLease(new LeaseRef("default", "default/a", 1));
      Map<String, Object> cm = configMap("a", "x", "1");
      for (ObjectWrites w : List.of(plain, leased)) {
        List<Executable> writes = List.of(
            () -> w.apply(CONFIG_MAP, "default", "a", cm),
            () -> w.create(CONFIG_MAP, "default", cm),
            () -> w.mergePatch(CONFIG_MAP, "default", "a", Map.of("data", Map.of())),
            () -> w.jsonPatch(CONFIG_MAP, "default", "a", List.of(Map.of("op", "remove", "path", "/data"))),
            () -> w.delete(CONFIG_MAP, "default", "a"));
        for (Executable write : writes) {
          NoKubernetesException e = assertThrows(NoKubernetesException.class, write);
          assertFalse(((WorkqueueException) e) instanceof StaleLeaseException);
          assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
          assertEquals(Optional.of("NO_KUBERNETES"), e.reason());
          assertEquals(Optional.of("workqueue-sidecar"), e.domain());
        }
      }
    }
  }

  @Test
  @DisplayName("a write whose lease ended before the API server answered is a LeaseEndedDuringWriteException, a ConflictException too; a 409 is not")
  void leaseEndedDuringWriteIsItsOwnConflict() {
    String message = "the write was made, but the lease on \"default/a\" of queue \"q\" ended before the API server answered it";
    WorkqueueException ended = Errors.of("patch ConfigMap default/a", "127.0.0.1:1", Refusal.of(Status.Code.ABORTED, message,
        ErrorInfo.newBuilder().setDomain("workqueue-sidecar").setReason("LEASE_ENDED_DURING_WRITE").build()));
    assertInstanceOf(LeaseEndedDuringWriteException.class, ended);
    assertInstanceOf(ConflictException.class, ended);
    assertEquals(Status.Code.ABORTED, ended.code());
    assertEquals(Optional.of(ErrorDetails.LEASE_ENDED_DURING_WRITE), ended.reason());
    assertEquals(Optional.of(ErrorDetails.DOMAIN_SIDECAR), ended.domain());
    assertTrue(ended.getMessage().endsWith(message), ended.getMessage());
    // The API server's 409, with its own ErrorInfo or none, is a plain conflict.
    List<StatusRuntimeException> conflicts = List.of(
        Refusal.of(Status.Code.ABORTED, "the object has been modified",
            ErrorInfo.newBuilder().setDomain("k8s.io").setReason("Conflict").putMetadata("http_status", "409").build()),
        Refusal.of(Status.Code.ABORTED, "conflict"));
    for (StatusRuntimeException conflict : conflicts) {
      assertEquals(ConflictException.class, Errors.of("patch ConfigMap default/a", "127.0.0.1:1", conflict).getClass());
    }
  }

  @Test
  @DisplayName("C12 writes reach the API server, and its refusals come back typed with its reason")
  void c12WritesAndTheirErrors() {
    String id = "wqs-java-objects-" + (System.nanoTime() % 1_000_000);
    String name = id + "-a";
    try (Sidecar s = kubernetesSidecar(id);
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      ObjectWrites objects = client.objects();
      try {
        WrittenObject created = objects.create(CONFIG_MAP, "default", configMap(name, id, "1"));
        assertEquals("1", created.as(ConfigMap.class).data().get("v"));
        assertFalse(created.uid().isEmpty());

        // An existing name: AlreadyExistsException, a conflict, reason AlreadyExists.
        AlreadyExistsException exists = assertThrows(AlreadyExistsException.class, () -> objects.create(CONFIG_MAP, "default", configMap(name, id, "1")));
        assertInstanceOf(ConflictException.class, exists);
        assertEquals(Status.Code.ABORTED, exists.code());
        assertEquals(Optional.of("AlreadyExists"), exists.reason());
        assertEquals(Optional.of("k8s.io"), exists.domain());
        assertEquals("409", exists.metadata().get("http_status"));

        // Merge patch, JSON patch, server-side apply.
        WrittenObject merged = objects.mergePatch(CONFIG_MAP, "default", name, Map.of("data", Map.of("v", "2")));
        assertEquals("2", merged.as(ConfigMap.class).data().get("v"));
        WrittenObject jsonPatched = objects.jsonPatch(CONFIG_MAP, "default", name, List.of(Map.of("op", "replace", "path", "/data/v", "value", "3")));
        assertEquals("3", jsonPatched.as(ConfigMap.class).data().get("v"));
        WrittenObject applied = objects.apply(CONFIG_MAP, "default", name, configMap(name, id, "4"), "", true);
        assertEquals("4", applied.as(ConfigMap.class).data().get("v"));
        assertEquals(applied.resourceVersion(), applied.as(ConfigMap.class).metadata().resourceVersion());

        // A stale resourceVersion: a conflict, reason Conflict; nothing written.
        ConflictException stale = assertThrows(ConflictException.class, () -> objects.mergePatch(CONFIG_MAP, "default", name,
            Map.of("metadata", Map.of("resourceVersion", created.resourceVersion()), "data", Map.of("v", "5"))));
        assertEquals(Optional.of("Conflict"), stale.reason());
        assertEquals(Optional.of("k8s.io"), stale.domain());

        // An invalid object: invalid-argument, reason Invalid, with the API server's causes.
        InvalidArgumentException invalid = assertThrows(InvalidArgumentException.class,
            () -> objects.create(CONFIG_MAP, "default", Map.of("apiVersion", "v1", "kind", "ConfigMap", "metadata", Map.of("name", "Not_A_Name", "namespace", "default"))));
        assertEquals(Status.Code.INVALID_ARGUMENT, invalid.code());
        assertEquals(Optional.of("Invalid"), invalid.reason());
        assertEquals("422", invalid.metadata().get("http_status"));
        assertFalse(invalid.causes().isEmpty(), invalid.toString());
        assertTrue(invalid.causes().stream().anyMatch(c -> c.field().contains("metadata.name")), invalid.causes().toString());

        // A missing object: not found, reason NotFound.
        NotFoundException missing = assertThrows(NotFoundException.class, () -> objects.mergePatch(CONFIG_MAP, "default", id + "-none", Map.of("data", Map.of())));
        assertEquals(Optional.of("NotFound"), missing.reason());

        // A delete whose resourceVersion precondition fails is a conflict; a plain one removes it.
        assertThrows(ConflictException.class, () -> objects.delete(CONFIG_MAP, "default", name, "", created.resourceVersion(), ObjectWrites.Propagation.DEFAULT));
        ObjectWrites.Deleted deleted = objects.delete(CONFIG_MAP, "default", name);
        assertTrue(deleted.gone());
        assertEquals(Optional.empty(), deleted.object());
        assertThrows(NotFoundException.class, () -> objects.delete(CONFIG_MAP, "default", name));
      } finally {
        deleteQuietly(client, name);
      }
    }
  }

  @Test
  @DisplayName("C13 writes under a lease are made while it is current, and refused, not made, after it ended")
  void c13WritesUnderALeaseAreFenced() throws Exception {
    String id = "wqs-java-fenced-" + (System.nanoTime() % 1_000_000);
    String name = id + "-a";
    String key = "default/" + name;
    try (Sidecar s = kubernetesSidecar(id);
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      try {
        client.objects().create(CONFIG_MAP, "default", configMap(name, id, "0"));

        AtomicReference<LeaseRef> held = new AtomicReference<>();
        AtomicReference<WrittenObject> written = new AtomicReference<>();
        AtomicInteger reconciles = new AtomicInteger();
        AtomicInteger firstDone = new AtomicInteger();
        List<KeyStatus.State> states = Collections.synchronizedList(new ArrayList<>());
        Reconciler reconciler = (req, signal) -> {
          if (!req.key().equals(key)) {
            return Result.done();
          }
          if (reconciles.getAndIncrement() == 0) {
            assertEquals(new LeaseRef("cms", key, req.lease().token()), req.lease());
            assertFalse(req.deleting());
            assertEquals(Optional.empty(), req.deletionTimestamp());
            held.set(req.lease());
            written.set(client.objects().underLease(req.lease()).mergePatch(CONFIG_MAP, "default", name, Map.of("data", Map.of("v", "under the lease"))));
            firstDone.set(1);
          }
          return Result.done();
        };
        Queue q = client.queue("cms");
        try (Worker w = q.start(reconciler, RunOptions.concurrency(2))) {
          eventually(Duration.ofSeconds(30), "a reconcile that wrote under its lease", () -> firstDone.get() == 1);
          // The lease ends with the reconcile's success: the key settles (SETTLING) until the cache
          // has the write, whose watch event (the key was dirty) then queues it again (QUEUED), and a
          // second lease follows. Between the two the key is never ABSENT or WAITING.
          eventually(Duration.ofSeconds(20), "the key back after its lease settled", () -> {
            KeyStatus.State st = q.keyState(key).state();
            if (reconciles.get() == 1) {
              states.add(st);
            }
            return reconciles.get() > 1;
          });
          Set<KeyStatus.State> allowed = EnumSet.of(KeyStatus.State.HELD, KeyStatus.State.SETTLING, KeyStatus.State.QUEUED);
          assertTrue(allowed.containsAll(states), states.toString());
        }
        assertEquals("under the lease", written.get().as(ConfigMap.class).data().get("v"));

        // The saved lease has ended: a write under it is refused with the stale-lease error.
        LeaseRef lease = held.get();
        for (Executable write : List.<Executable>of(
            () -> client.objects().underLease(lease).mergePatch(CONFIG_MAP, "default", name, Map.of("data", Map.of("v", "after the lease"))),
            () -> client.objects().underLease(lease).apply(CONFIG_MAP, "default", name, configMap(name, id, "after the lease"), "", true),
            () -> client.objects().underLease(lease).delete(CONFIG_MAP, "default", name))) {
          StaleLeaseException refused = assertThrows(StaleLeaseException.class, write);
          assertEquals(Status.Code.FAILED_PRECONDITION, refused.code());
          assertEquals(Optional.of("STALE_LEASE"), refused.reason());
          assertEquals(Optional.of("workqueue-sidecar"), refused.domain());
          assertFalse(((WorkqueueException) refused) instanceof NoKubernetesException);
        }

        // Not made: the cache (at least at the fenced write's version) and the API server (a
        // no-op merge patch answers the object as it is) still have the write under the lease.
        ConfigMap cached = client.cache().get("cms", "default", name, ConfigMap.class,
            ReadOptions.atLeast(written.get().resourceVersion()).waitFor(Duration.ofSeconds(10))).orElseThrow();
        assertEquals("under the lease", cached.data().get("v"));
        WrittenObject now = client.objects().mergePatch(CONFIG_MAP, "default", name, Map.of());
        assertEquals("under the lease", now.as(ConfigMap.class).data().get("v"));
        assertEquals(written.get().resourceVersion(), now.resourceVersion());
      } finally {
        deleteQuietly(client, name);
      }
    }
  }

  @Test
  @DisplayName("C13 the key settles when a lease with writes ends: SETTLING, then QUEUED once the cache has the write")
  void c13TheKeySettles() {
    String id = "wqs-java-settle-" + (System.nanoTime() % 1_000_000);
    String name = id + "-a";
    String key = "default/" + name;
    try (Sidecar s = kubernetesSidecar(id);
        WorkqueueClient client = WorkqueueClient.connect(s.target())) {
      try {
        client.objects().create(CONFIG_MAP, "default", configMap(name, id, "0"));
        Queue q = client.queue("cms");
        eventually(Duration.ofSeconds(30), "the key queued by the informer", () -> q.keyState(key).state() == KeyStatus.State.QUEUED);

        // A lease by the unary Get (no worker, so nothing takes the key again), a write under it,
        // then Done.
        Workqueue.Lease l = client.queueStub.get(Workqueue.GetRequest.newBuilder().setQueue("cms").setWorker("c13").build()).getLeases(0);
        assertEquals(key, l.getKey());
        LeaseRef lease = new LeaseRef("cms", key, l.getToken());
        WrittenObject w = client.objects().underLease(lease).mergePatch(CONFIG_MAP, "default", name, Map.of("data", Map.of("v", "1")));
        client.queueStub.done(Workqueue.DoneRequest.newBuilder().setQueue("cms").setKey(key).setToken(l.getToken()).build());

        KeyStatus after = q.keyState(key);
        assertTrue(after.state() == KeyStatus.State.SETTLING || after.state() == KeyStatus.State.QUEUED, after.toString());
        if (after.state() == KeyStatus.State.SETTLING) {
          assertTrue(after.settlingUntil() != null, after.toString());
        }
        // The cache sees the write; its watch event (the key was held, so dirty) queues the key.
        eventually(Duration.ofSeconds(20), "the key queued after settling", () -> q.keyState(key).state() == KeyStatus.State.QUEUED);
        Counts counts = q.len();
        assertEquals(0, counts.settling());
        assertEquals(1, counts.ready());

        StaleLeaseException stale = assertThrows(StaleLeaseException.class,
            () -> client.objects().underLease(lease).mergePatch(CONFIG_MAP, "default", name, Map.of("data", Map.of("v", "2"))));
        assertEquals(Optional.of("STALE_LEASE"), stale.reason());
        assertEquals(w.resourceVersion(), client.objects().mergePatch(CONFIG_MAP, "default", name, Map.of()).resourceVersion());
      } finally {
        deleteQuietly(client, name);
      }
    }
  }
}
