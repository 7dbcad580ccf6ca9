package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** Queue.run/start over the Work stream, against the real sidecar (clients/CONFORMANCE.md C1-C9). */
class WorkerTest {
  /** Retries slow enough to measure: 200ms, 400ms, 800ms... */
  private static final String SLOW_BACKOFF = """
      queues:
        default:
          rate_limiter:
            exponential: { base: 200ms, max: 10s }
      """;
  /** Leases that end after one second unless extended. */
  private static final String SHORT_LEASES = """
      queues:
        default:
          lease_ttl: 1s
      """;

  private final List<AutoCloseable> cleanup = new ArrayList<>();

  @AfterEach
  void tearDown() throws Exception {
    for (int i = cleanup.size() - 1; i >= 0; i--) {
      cleanup.get(i).close();
    }
  }

  private Sidecar sidecar(String config, String... args) {
    Sidecar s = Sidecar.start(config, args);
    cleanup.add(s);
    return s;
  }

  private WorkqueueClient client(Sidecar s) {
    WorkqueueClient c = WorkqueueClient.connect(s.target(), ClientOptions.defaults().workerName("java-test"));
    cleanup.add(c);
    return c;
  }

  private static Worker start(Queue q, Reconciler r, RunOptions options) {
    return q.start(r, options.reconnectBackoff(Duration.ofMillis(100), Duration.ofSeconds(1)));
  }

  private static boolean state(Queue q, String key, KeyStatus.State state) {
    return q.keyState(key).state() == state;
  }

  private static void sleep(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Waits until the signal fires (or a minute passes, failing the reconcile). */
  private static void awaitSignal(CancellationSignal signal) throws InterruptedException {
    CountDownLatch fired = new CountDownLatch(1);
    signal.onCancel(fired::countDown);
    if (!fired.await(60, TimeUnit.SECONDS)) {
      throw new IllegalStateException("the signal never fired");
    }
  }

  @Test
  @DisplayName("C1 success forgets the key's failures")
  void c1SuccessForgets() {
    Queue q = client(sidecar(null)).queue("default");
    Recorder r = new Recorder((req, sig, n) -> {
      if (n == 0) {
        throw new IllegalStateException("first attempt fails");
      }
      return Result.done();
    });
    q.add("ns/a");
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      eventually("two attempts", () -> r.of("ns/a").size() == 2 && r.returned() == 2);
      eventually("the key absent", () -> state(q, "ns/a", KeyStatus.State.ABSENT));
    }
    assertEquals(1, r.of("ns/a").get(1).request().failures());
    assertEquals(0, q.numRequeues("ns/a"));
    assertEquals(KeyStatus.State.ABSENT, q.keyState("ns/a").state());
    Request first = r.of("ns/a").get(0).request();
    assertEquals("ns", first.namespace());
    assertEquals("a", first.name());
    assertEquals(Optional.empty(), first.object());
  }

  @Test
  @DisplayName("C2 an exception retries with backoff and its message becomes last_error")
  void c2ErrorRetriesWithBackoff() {
    Queue q = client(sidecar(SLOW_BACKOFF)).queue("default");
    Recorder r = new Recorder((req, sig, n) -> {
      if (n < 2) {
        throw new IllegalStateException("attempt " + (n + 1) + " failed");
      }
      return Result.done();
    });
    q.add("ns/a");
    try (Worker w = start(q, r, RunOptions.concurrency(2))) {
      eventually("three attempts", () -> r.of("ns/a").size() == 3);
      eventually("the key absent", () -> state(q, "ns/a", KeyStatus.State.ABSENT));
    }
    List<Recorder.Attempt> a = r.of("ns/a");
    assertEquals(0, a.get(0).request().failures());
    assertEquals("", a.get(0).request().lastError());
    assertEquals(1, a.get(1).request().failures());
    assertEquals("attempt 1 failed", a.get(1).request().lastError());
    assertEquals(2, a.get(2).request().failures());
    assertEquals("attempt 2 failed", a.get(2).request().lastError());
    assertTrue(a.get(1).request().has(ReasonKind.RETRY), "reasons " + a.get(1).request().reasons());
    // The queue's backoff: 200ms after the first failure, 400ms after the second (lower bounds only).
    assertTrue(a.get(1).startNanos() - a.get(0).startNanos() >= TimeUnit.MILLISECONDS.toNanos(180));
    assertTrue(a.get(2).startNanos() - a.get(1).startNanos() >= TimeUnit.MILLISECONDS.toNanos(380));
    assertEquals(0, q.numRequeues("ns/a"));
  }

  @Test
  @DisplayName("C3 requeue after brings the key back after the delay, with no failure")
  void c3RequeueAfter() {
    Queue q = client(sidecar(null)).queue("default");
    Duration delay = Duration.ofSeconds(2);
    Recorder r = new Recorder((req, sig, n) -> n == 0 ? Result.requeueAfter(delay) : Result.done());
    q.add("ns/a");
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      // The reconcile returns before its Finish is sent (by the stream thread): until the sidecar
      // has it, the key is still HELD.
      eventually("the first attempt finished", () -> r.returned() == 1 && q.keyState("ns/a").state() != KeyStatus.State.HELD || r.count() > 1);
      Instant returned = Instant.now();
      KeyStatus waiting = q.keyState("ns/a");
      if (r.count() == 1) { // not yet back (the machine may be slow enough for it to be)
        assertEquals(KeyStatus.State.WAITING, waiting.state());
        Duration ahead = Duration.between(returned, waiting.waitingUntil());
        // About the delay ahead: the Finish left just after the reconcile returned.
        assertTrue(ahead.compareTo(delay.dividedBy(2)) > 0 && ahead.compareTo(delay.plusSeconds(5)) < 0, "waiting_until " + ahead + " ahead");
      }
      eventually("the second attempt", () -> r.of("ns/a").size() == 2);
      eventually("the key absent", () -> state(q, "ns/a", KeyStatus.State.ABSENT));
    }
    List<Recorder.Attempt> a = r.of("ns/a");
    assertTrue(a.get(1).startNanos() - a.get(0).startNanos() >= delay.toNanos() - TimeUnit.MILLISECONDS.toNanos(20));
    assertEquals(0, a.get(1).request().failures());
    assertTrue(a.get(1).request().has(ReasonKind.REQUEUE_AFTER), "reasons " + a.get(1).request().reasons());
  }

  @Test
  @DisplayName("C4 a slow reconcile keeps its lease past three TTLs")
  void c4SlowReconcileKeepsItsLease() {
    Sidecar s = sidecar(SHORT_LEASES);
    Queue q = client(s).queue("default");
    List<KeyStatus> seen = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      for (int i = 0; i < 7; i++) { // 3.5 s: over three 1 s leases
        Thread.sleep(500);
        seen.add(q.keyState(req.key()));
      }
      return Result.done();
    });
    q.add("ns/slow");
    try (Worker w = start(q, r, RunOptions.concurrency(2))) {
      eventually(Duration.ofSeconds(30), "the reconcile to finish", () -> r.returned() == 1);
      eventually("the key absent", () -> state(q, "ns/slow", KeyStatus.State.ABSENT));
    }
    assertEquals(1, r.count(), "the lease expired and the key was handed out again");
    assertEquals(0, q.numRequeues("ns/slow"));
    for (KeyStatus st : seen) {
      assertEquals(KeyStatus.State.HELD, st.state(), "while the reconcile ran: " + st);
    }
    assertEquals(1, seen.stream().map(KeyStatus::holder).distinct().count(), "one holder throughout");
    assertTrue(Duration.between(seen.get(0).heldUntil(), seen.get(seen.size() - 1).heldUntil()).compareTo(Duration.ofSeconds(2)) >= 0, "the deadline moved");
  }

  @Test
  @DisplayName("C5 a queue shut down without drain cancels the running reconcile (stop requested) and its result still counts")
  void c5ShutDownCancels() {
    Queue q = client(sidecar(null)).queue("default");
    List<Optional<CancellationSignal.Cause>> causes = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      awaitSignal(sig);
      causes.add(sig.cause());
      throw new IllegalStateException("cancelled: " + sig.message());
    });
    q.add("ns/a");
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      eventually("the reconcile to start", () -> r.count() == 1);
      q.shutDown();
      eventually("the signal", () -> causes.size() == 1);
      eventually("the retry applied", () -> q.keyState("ns/a").failures() >= 1);
    }
    assertEquals(Optional.of(CancellationSignal.Cause.STOP_REQUESTED), causes.get(0));
    KeyStatus st = q.keyState("ns/a");
    assertNotEquals(KeyStatus.State.HELD, st.state());
    assertTrue(st.lastError().startsWith("cancelled: "), st.lastError());
  }

  @Test
  @DisplayName("C5 a lease whose deadline passes (the sidecar frozen) cancels its reconcile with lease lost")
  void c5DeadlinePassesLeaseLost() {
    Sidecar s = sidecar(SHORT_LEASES);
    Queue q = client(s).queue("default");
    List<Optional<CancellationSignal.Cause>> causes = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      if (n == 0) {
        awaitSignal(sig);
        causes.add(sig.cause());
      }
      return Result.done();
    });
    q.add("ns/a");
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      eventually("the reconcile to start", () -> r.count() == 1);
      s.signal("STOP");
      try {
        eventually("the signal", () -> causes.size() == 1);
      } finally {
        s.signal("CONT");
      }
      eventually("the key reconciled again", () -> r.of("ns/a").size() == 2);
    }
    assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), causes.get(0));
  }

  @Test
  @DisplayName("C6 a reconcile that returns after its deadline has its result discarded")
  void c6ResultAfterDeadlineDiscarded() {
    Sidecar s = sidecar(SHORT_LEASES);
    Queue q = client(s).queue("default");
    Recorder r = new Recorder((req, sig, n) -> {
      if (n == 0) {
        awaitSignal(sig); // ignores it: returns success after the deadline
        Thread.sleep(200);
      }
      return Result.done();
    });
    q.addRateLimited("ns/a"); // one failure a success would forget
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      eventually("the reconcile to start", () -> r.count() == 1);
      s.signal("STOP");
      try {
        eventually("the first reconcile to return", () -> r.returned() == 1);
        sleep(Duration.ofMillis(200));
      } finally {
        s.signal("CONT");
      }
      eventually("the key handed out again", () -> r.of("ns/a").size() == 2);
      eventually("the second attempt's success", () -> state(q, "ns/a", KeyStatus.State.ABSENT));
    }
    Request first = r.of("ns/a").get(0).request();
    Request second = r.of("ns/a").get(1).request();
    assertEquals(1, first.failures());
    // Had the late success counted, the key would have been forgotten and not come back at all.
    assertTrue(second.failures() >= 2, "failures " + second.failures() + ", reasons " + second.reasons());
    assertTrue(second.has(ReasonKind.LEASE_EXPIRED) || second.has(ReasonKind.RETRY), "reasons " + second.reasons());
  }

  @Test
  @DisplayName("one key is never reconciled twice at once in a process: a lease for a key whose lost reconcile still runs waits for it")
  void oneKeyIsNeverReconciledTwiceAtOnce() {
    Sidecar s = sidecar(SHORT_LEASES);
    Queue q = client(s).queue("default");
    // Each reconcile of the key: when it began and returned (System.nanoTime), by attempt.
    Map<Integer, long[]> spans = new ConcurrentHashMap<>();
    List<Boolean> firstLost = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      long began = System.nanoTime();
      if (n == 0) {
        sleepThroughInterrupts(Duration.ofMillis(3_500)); // ignores its signal, lease lost or not
        firstLost.add(sig.isLeaseLost());
      }
      spans.put(n, new long[] {began, System.nanoTime()});
      return Result.done();
    });
    q.add("ns/a");
    // Two threads: the key, once expired, comes back to this worker's free one.
    try (Worker w = start(q, r, RunOptions.concurrency(2))) {
      eventually("the first reconcile to start", () -> r.count() == 1);
      // The sidecar stalls past the lease (TTL 1 s): the worker loses it, the
      // sidecar expires it once it runs again and hands the key out again
      // while the first reconcile still runs.
      s.signal("STOP");
      try {
        sleep(Duration.ofSeconds(2));
      } finally {
        s.signal("CONT");
      }
      eventually(Duration.ofSeconds(20), "the key reconciled again, and both reconciles to return", () -> spans.size() >= 2);
    }
    assertEquals(List.of(true), firstLost, "the first lease was not lost");
    long[] first = spans.get(0);
    long[] second = spans.get(1);
    assertTrue(second[0] >= first[1], "ns/a's second reconcile started " + (first[1] - second[0]) / 1_000_000 + " ms before its first returned");
  }

  /** Sleeps for d whatever interrupts come, as a reconcile that ignores its cancellation would. */
  private static void sleepThroughInterrupts(Duration d) {
    long until = System.nanoTime() + d.toNanos();
    for (long left = d.toNanos(); left > 0; left = until - System.nanoTime()) {
      try {
        TimeUnit.NANOSECONDS.sleep(left);
      } catch (InterruptedException ignored) {
        // ignored, as this reconcile means to
      }
    }
  }

  @Test
  @DisplayName("C7 graceful stop lets a running reconcile finish and its result counts; a key it never started goes back with no failure")
  void c7GracefulStopFinishes() throws Exception {
    Queue q = client(sidecar(null)).queue("default");
    CountDownLatch release = new CountDownLatch(1);
    Set<String> started = ConcurrentHashMap.newKeySet();
    Recorder r = new Recorder((req, sig, n) -> {
      started.add(req.key());
      release.await();
      return Result.done();
    });
    q.addRateLimited("ns/a");
    // Two threads: the free one's credit brings a lease the stopping worker never starts.
    Worker w = start(q, r, RunOptions.concurrency(2).stopTimeout(Duration.ofSeconds(10)));
    eventually("the reconcile to start", () -> started.contains("ns/a"));
    w.stop();
    q.add("ns/late");
    eventually("the stopping worker to hold the late key", () -> q.keyState("ns/late").state() == KeyStatus.State.HELD);
    release.countDown();
    w.close();
    // close() returned after the reconcile finished and its Finish was applied.
    assertFalse(w.isRunning());
    assertEquals(KeyStatus.State.ABSENT, q.keyState("ns/a").state());
    assertEquals(0, q.numRequeues("ns/a"));
    assertFalse(started.contains("ns/late"), "a key started after the stop");
    KeyStatus late = q.keyState("ns/late");
    assertTrue(late.state() == KeyStatus.State.QUEUED || late.state() == KeyStatus.State.WAITING, late.toString());
    // Given back, not failed: a clean stop charges the keys it never started nothing.
    assertEquals(0, late.failures(), late.toString());
  }

  @Test
  @DisplayName("C7 graceful stop hands back what is still held after the stop timeout and starts nothing new")
  void c7GracefulStopHandsBack() {
    Queue q = client(sidecar(null)).queue("default");
    Set<String> started = ConcurrentHashMap.newKeySet();
    List<Optional<CancellationSignal.Cause>> causes = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      started.add(req.key());
      if (req.key().equals("ns/stuck")) {
        awaitSignal(sig);
        causes.add(sig.cause());
      }
      return Result.done();
    });
    q.add("ns/stuck");
    Worker w = start(q, r, RunOptions.concurrency(2).stopTimeout(Duration.ofMillis(300)));
    eventually("the stuck reconcile to start", () -> started.contains("ns/stuck"));
    w.stop();
    q.add("ns/late");
    w.close();
    KeyStatus stuck = q.keyState("ns/stuck");
    assertTrue(stuck.state() == KeyStatus.State.QUEUED || stuck.state() == KeyStatus.State.WAITING, stuck.toString());
    assertTrue(stuck.reasons().stream().anyMatch(x -> x.kind() == ReasonKind.LEASE_RELEASED), stuck.toString());
    assertFalse(started.contains("ns/late"), "a key started after the stop");
    assertEquals(0, q.len().held());
    eventually("the stuck reconcile's signal", () -> causes.size() == 1);
    assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), causes.get(0));
  }

  @Test
  @DisplayName("C7 run blocks until the worker is stopped from another thread")
  void c7RunBlocksUntilStopped() throws Exception {
    WorkqueueClient c = client(sidecar(null));
    Queue q = c.queue("default");
    Recorder r = new Recorder((req, sig, n) -> Result.done());
    Thread runner = new Thread(() -> q.run(r, RunOptions.concurrency(1)));
    runner.start();
    q.add("ns/a");
    eventually("the key reconciled", () -> r.returned() == 1);
    assertTrue(runner.isAlive());
    runner.interrupt(); // an interrupted run stops gracefully
    runner.join(TimeUnit.SECONDS.toMillis(30));
    assertFalse(runner.isAlive(), "run did not return after its thread was interrupted");
  }

  @Test
  @DisplayName("C8 a broken stream cancels its reconcile and reconnects to a restarted sidecar")
  void c8Reconnects() throws Exception {
    Sidecar first = sidecar(null);
    WorkqueueClient c = client(first);
    Queue q = c.queue("default");
    List<Optional<CancellationSignal.Cause>> causes = new CopyOnWriteArrayList<>();
    Recorder r = new Recorder((req, sig, n) -> {
      if (req.key().equals("ns/before")) {
        awaitSignal(sig);
        causes.add(sig.cause());
      }
      return Result.done();
    });
    q.add("ns/before");
    try (Worker w = start(q, r, RunOptions.concurrency(1))) {
      eventually("the first reconcile", () -> r.count() == 1);
      first.kill();
      eventually("the broken stream's signal", () -> causes.size() == 1);
      assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), causes.get(0));
      // A sidecar comes back on the same address; the worker finds it by itself.
      Sidecar second = Sidecar.startOn(first.address(), null);
      cleanup.add(second);
      q.add("ns/after");
      eventually(Duration.ofSeconds(30), "the key added after the restart", () -> Recorder.keys(r.all()).contains("ns/after"));
      eventually("the key absent", () -> state(q, "ns/after", KeyStatus.State.ABSENT));
      assertTrue(w.isRunning());
    }
  }

  @Test
  @DisplayName("C9 the concurrency limit holds and every key is reconciled")
  void c9ConcurrencyLimit() {
    Queue q = client(sidecar(null)).queue("default");
    Recorder r = new Recorder((req, sig, n) -> {
      Thread.sleep(100);
      return Result.done();
    });
    List<String> keys = IntStream.range(0, 12).mapToObj(i -> "ns/k" + i).toList();
    q.add(keys);
    try (Worker w = start(q, r, RunOptions.concurrency(3))) {
      eventually(Duration.ofSeconds(30), "every key", () -> r.returned() == keys.size());
      eventually("nothing held", () -> q.len().held() == 0);
    }
    assertTrue(r.mostAtOnce() <= 3, "most at once: " + r.mostAtOnce());
    assertEquals(Set.copyOf(keys), Recorder.keys(r.all()).stream().collect(Collectors.toSet()));
    assertEquals(keys.size(), r.count());
  }

  @Test
  @DisplayName("the stream opens with ack_failures_only, and a Finish the sidecar refuses is still answered and warned of")
  void onlyARefusedFinishIsAnswered() {
    java.util.logging.Logger log = java.util.logging.Logger.getLogger(Session.class.getName());
    List<String> lines = new CopyOnWriteArrayList<>();
    java.util.logging.Handler handler = new java.util.logging.Handler() {
      @Override
      public void publish(java.util.logging.LogRecord r) {
        lines.add(r.getLevel() + " " + new java.util.logging.SimpleFormatter().formatMessage(r));
      }

      @Override
      public void flush() {}

      @Override
      public void close() {}
    };
    log.addHandler(handler);
    try {
      WorkqueueClient client = client(sidecar(null));
      Queue q = client.queue("default");
      // One lease is ended behind the worker's back by a unary Done: its Finish is then refused (stale token).
      Recorder r = new Recorder((req, sig, n) -> {
        if (req.key().equals("ns/done-elsewhere")) {
          client.queueStub.done(workqueue.v1.Workqueue.DoneRequest.newBuilder()
              .setQueue(req.queue()).setKey(req.key()).setToken(req.lease().token()).build());
        }
        return Result.done();
      });
      q.add("ns/a", "ns/done-elsewhere", "ns/b");
      try (Worker w = start(q, r, RunOptions.concurrency(1))) {
        eventually("every key reconciled", () -> r.returned() == 3);
        eventually("the refusal warned of", () -> lines.stream().anyMatch(l -> l.contains("refused the finish of ns/done-elsewhere")));
        eventually("the other keys absent", () -> state(q, "ns/a", KeyStatus.State.ABSENT) && state(q, "ns/b", KeyStatus.State.ABSENT));
      }
    } finally {
      log.removeHandler(handler);
    }
    assertTrue(lines.stream().anyMatch(l -> l.contains("only failed finishes answered")), String.join("\n", lines));
    assertTrue(lines.stream().anyMatch(l -> l.startsWith("WARNING ") && l.contains("refused the finish of ns/done-elsewhere: FAILED_PRECONDITION")),
        String.join("\n", lines));
    assertEquals(1, lines.stream().filter(l -> l.contains("refused the finish")).count(), String.join("\n", lines));
  }
}
