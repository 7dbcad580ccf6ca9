package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The unary queue calls and typed errors, against the real sidecar (C10). */
class QueueCallsTest {
  private Sidecar sidecar;
  private WorkqueueClient client;

  @BeforeEach
  void setUp() {
    sidecar = Sidecar.start();
    client = WorkqueueClient.connect(sidecar.target());
  }

  @AfterEach
  void tearDown() {
    client.close();
    sidecar.close();
  }

  @Test
  @DisplayName("queue operations: add, addAfter, addRateLimited, forget, numRequeues, len, keyState")
  void queueOperations() {
    Queue q = client.queue("default");
    q.withPriority(10).withReason("backfill").add("ns/a", "ns/b");
    q.addAfter(Duration.ofMinutes(1), "ns/later");
    Counts counts = q.len();
    assertEquals(2, counts.ready());
    assertEquals(1, counts.waiting());
    assertEquals(Map.of(10, 2), counts.readyByPriority());

    KeyStatus a = q.keyState("ns/a");
    assertEquals(KeyStatus.State.QUEUED, a.state());
    assertEquals(10, a.priority());
    assertEquals(List.of(new Reason(ReasonKind.MANUAL, "backfill", "")), a.reasons());
    assertTrue(a.queuedSince() != null);
    KeyStatus later = q.keyState("ns/later");
    assertEquals(KeyStatus.State.WAITING, later.state());
    assertTrue(later.readyAt().isPresent());
    assertEquals(KeyStatus.State.ABSENT, q.keyState("ns/none").state());
    assertNull(q.keyState("ns/none").heldUntil());

    List<Backoff> backoffs = q.addRateLimited("ns/c");
    assertEquals(1, backoffs.size());
    assertEquals("ns/c", backoffs.get(0).key());
    assertEquals(1, backoffs.get(0).failures());
    assertEquals(1, q.numRequeues("ns/c"));
    q.forget("ns/c");
    assertEquals(0, q.numRequeues("ns/c"));
  }

  @Test
  @DisplayName("shutDownWithDrain reports nothing held, and later adds are UNAVAILABLE")
  void shutDownWithDrain() {
    Queue q = client.queue("default");
    assertEquals(new DrainReport(0, 0), q.shutDownWithDrain(Duration.ofSeconds(1)));
    UnavailableException e = assertThrows(UnavailableException.class, () -> q.add("ns/a"));
    assertEquals(Status.Code.UNAVAILABLE, e.code());
    q.shutDown(); // again: harmless
  }

  @Test
  @DisplayName("C10 an unknown queue fails a queue call with NotFoundException carrying NOT_FOUND")
  void c10UnknownQueueCall() {
    NotFoundException e = assertThrows(NotFoundException.class, () -> client.queue("nope").add("ns/a"));
    assertEquals(Status.Code.NOT_FOUND, e.code());
    assertTrue(e.getMessage().contains("nope"), e.getMessage());
  }

  @Test
  @DisplayName("C10 an unknown queue fails run with NotFoundException")
  void c10UnknownQueueRun() {
    Queue q = client.queue("nope");
    NotFoundException e = assertThrows(NotFoundException.class, () -> q.run((req, sig) -> Result.done(), RunOptions.concurrency(1)));
    assertEquals(Status.Code.NOT_FOUND, e.code());
    Worker w = q.start((req, sig) -> Result.done(), RunOptions.concurrency(1));
    assertThrows(NotFoundException.class, w::await);
    assertFalse(w.isRunning());
  }

  @Test
  @DisplayName("C10 an empty key fails with InvalidArgumentException carrying INVALID_ARGUMENT")
  void c10EmptyKey() {
    InvalidArgumentException e = assertThrows(InvalidArgumentException.class, () -> client.queue("default").add(""));
    assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    assertThrows(InvalidArgumentException.class, () -> client.queue("default").forget(""));
  }

  @Test
  @DisplayName("C10 cache reads of a standalone sidecar fail with NotFoundException (no informers)")
  void c10CacheOfStandalone() {
    NotFoundException e = assertThrows(NotFoundException.class, () -> client.cache().get("users", "", "alice", Map.class));
    assertEquals(Status.Code.NOT_FOUND, e.code());
  }

  @Test
  @DisplayName("a unix:/// target works through the epoll transport")
  void unixSocketTarget() throws Exception {
    Path dir = Files.createTempDirectory("wqs-java");
    Path socket = dir.resolve("wq.sock");
    try (Sidecar s = Sidecar.start(null, "--unix", socket.toString());
        WorkqueueClient unix = WorkqueueClient.connect("unix://" + socket)) {
      unix.queue("default").add("ns/a");
      eventually("the key queued", () -> unix.queue("default").len().ready() == 1);
    }
  }

  @Test
  @DisplayName("an unreachable sidecar: UnavailableException naming the target and why (connection refused, no socket file)")
  void unreachableSidecarNamesTargetAndCause() throws Exception {
    int closedPort;
    try (ServerSocket free = new ServerSocket(0)) {
      closedPort = free.getLocalPort(); // nothing listens once it is closed
    }
    String tcp = "127.0.0.1:" + closedPort;
    try (WorkqueueClient refused = WorkqueueClient.connect(tcp)) {
      UnavailableException e = assertThrows(UnavailableException.class, () -> refused.queue("default").add("ns/a"));
      assertEquals(Status.Code.UNAVAILABLE, e.code());
      assertTrue(e.getMessage().contains(tcp), e.getMessage());
      assertTrue(e.getMessage().toLowerCase(java.util.Locale.ROOT).contains("connection refused"), e.getMessage());
    }
    String unix = "unix://" + Files.createTempDirectory("wqs-java").resolve("nobody.sock");
    try (WorkqueueClient missing = WorkqueueClient.connect(unix)) {
      UnavailableException e = assertThrows(UnavailableException.class, () -> missing.queue("default").len());
      assertTrue(e.getMessage().contains(unix), e.getMessage());
      assertTrue(e.getMessage().contains("no such file"), e.getMessage());
    }
  }
}
