package io.github.workqueuesidecar.client;

import static io.github.workqueuesidecar.client.Eventually.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.logging.Level;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * How a lost lease is logged, against a sidecar faked in-process: one WARNING for the loss, when it
 * happens, and nothing above DEBUG when its reconcile returns after it, as the Go client does. A
 * worker hears of one loss several times, and one loss is one line an operator reads.
 */
class LostLeaseLogTest {
  @Test
  @DisplayName("a lease revoked while its reconcile runs is one WARNING; the reconcile returning after it is DEBUG")
  void aRevokedLeaseIsOneWarning() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    AtomicReference<CancellationSignal> running = new AtomicReference<>();
    try (LogRecords records = new LogRecords(Session.class);
        FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.NONE);
        WorkqueueClient client = WorkqueueClient.connect(fake.target());
        Worker w = client.queue("default").start((req, signal) -> {
          running.set(signal);
          release.await(60, TimeUnit.SECONDS); // ignores its signal, and returns after the loss
          return Result.done();
        }, RunOptions.concurrency(1));
        AutoCloseable unblock = release::countDown) {
      eventually("the stream open", fake::opened);
      fake.lease("ns/a", 1);
      eventually("the reconcile to start", () -> running.get() != null);
      fake.revoke("ns/a", 1, "leadership lost");
      eventually("the loss seen", () -> running.get().isCancelled());
      release.countDown();
      eventually("the lost lease finished", () -> fake.finished().equals(List.of("1 RETRY")));
      assertOneLossWarningThenDebug(records, "revoked");
    }
  }

  @Test
  @DisplayName("a reconcile returning past its lease's deadline, before the expiry timer ran, is one WARNING; the discard is DEBUG")
  void aResultPastTheDeadlineIsOneWarning() throws Exception {
    // The worker's clock jumps past the deadline inside the reconcile; the expiry timer, set by
    // real time to the lease's 30 s, cannot run first, so the loss is seen when the result comes.
    SteppedClock clock = new SteppedClock();
    try (LogRecords records = new LogRecords(Session.class);
        FakeWorkServer fake = FakeWorkServer.start(FakeWorkServer.FinishAnswer.NONE);
        WorkqueueClient client = WorkqueueClient.connect(fake.target());
        Worker w = new Worker(client.queue("default"), (req, signal) -> {
          clock.step(FakeWorkServer.LEASE_TTL.plusSeconds(1));
          return Result.done();
        }, RunOptions.concurrency(1), clock)) {
      w.start();
      eventually("the stream open", fake::opened);
      fake.lease("ns/a", 1);
      eventually("the late result finished as lost", () -> fake.finished().equals(List.of("1 RETRY")));
      assertOneLossWarningThenDebug(records, "deadline passed");
    }
  }

  /** The lease of ns/a was lost once: one WARNING that says why; the discarded result at DEBUG. */
  private static void assertOneLossWarningThenDebug(LogRecords records, String why) {
    List<String> loud = records.lines(Level.INFO).stream().filter(l -> l.contains("ns/a")).toList();
    assertEquals(1, loud.size(), loud.toString());
    assertTrue(loud.get(0).startsWith("WARNING") && loud.get(0).contains("ns/a") && loud.get(0).contains(why), loud.get(0));
    assertTrue(records.lines(Level.FINE).stream().anyMatch(l -> l.startsWith("FINE") && l.contains("ns/a") && l.contains("result discarded")),
        () -> "the discarded result was not logged at DEBUG: " + records.lines(Level.ALL));
  }

  /** A clock the test moves forward; it stands still otherwise. */
  private static final class SteppedClock extends Clock {
    private final AtomicReference<Instant> now = new AtomicReference<>(Instant.now());

    void step(Duration by) {
      now.updateAndGet(t -> t.plus(by));
    }

    @Override
    public Instant instant() {
      return now.get();
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      throw new UnsupportedOperationException("a test clock, in UTC only");
    }
  }
}
