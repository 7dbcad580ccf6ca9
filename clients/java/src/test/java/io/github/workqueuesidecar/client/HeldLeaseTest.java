package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The deadline rules of a held lease, decided from instants passed in (no sidecar); its signal reads the clock. */
class HeldLeaseTest {
  private static final Instant T0 = Instant.parse("2025-01-01T00:00:00Z");

  private static HeldLease lease(Instant sidecarDeadline, Duration ttl) {
    return new HeldLease("ns/a", 7, null, T0, sidecarDeadline, ttl);
  }

  @Test
  @DisplayName("C6 the deadline is the sidecar's when it is earlier than arrival plus ttl")
  void deadlineIsTheSidecarsWhenEarlier() {
    assertEquals(T0.plusSeconds(5), lease(T0.plusSeconds(5), Duration.ofSeconds(30)).deadline());
  }

  @Test
  @DisplayName("C6 the deadline is arrival plus ttl when the sidecar's clock runs ahead")
  void deadlineIsArrivalPlusTtlWhenEarlier() {
    assertEquals(T0.plusSeconds(30), lease(T0.plusSeconds(90), Duration.ofSeconds(30)).deadline());
  }

  @Test
  @DisplayName("C6 a missing sidecar deadline or ttl leaves the other")
  void missingPartsLeaveTheOther() {
    assertEquals(T0.plusSeconds(30), lease(null, Duration.ofSeconds(30)).deadline());
    assertEquals(T0.plusSeconds(9), lease(T0.plusSeconds(9), null).deadline());
    assertEquals(T0.plusSeconds(9), lease(T0.plusSeconds(9), Duration.ZERO).deadline());
  }

  @Test
  @DisplayName("C6 each Extended moves the deadline to the earlier of its deadline and now plus its ttl")
  void extendedMovesTheDeadline() {
    HeldLease h = lease(T0.plusSeconds(30), Duration.ofSeconds(30));
    h.extended(T0.plusSeconds(10), T0.plusSeconds(40), Duration.ofSeconds(30));
    assertEquals(T0.plusSeconds(40), h.deadline());
    h.extended(T0.plusSeconds(20), T0.plusSeconds(80), Duration.ofSeconds(30));
    assertEquals(T0.plusSeconds(50), h.deadline());
  }

  @Test
  @DisplayName("C6 a lease already past its deadline when a thread frees is never started")
  void pastDeadlineIsNeverStarted() {
    HeldLease h = lease(T0.plusSeconds(1), Duration.ofSeconds(1));
    assertTrue(h.mayStart(T0.plusMillis(999)));
    assertFalse(h.mayStart(T0.plusSeconds(1)), "at the deadline");
    assertFalse(h.mayStart(T0.plusSeconds(2)), "after the deadline");
  }

  @Test
  @DisplayName("C6 a result returned at or after the deadline is discarded")
  void resultAfterDeadlineIsDiscarded() {
    HeldLease h = lease(T0.plusSeconds(1), Duration.ofSeconds(1));
    assertTrue(h.resultCounts(T0.plusMillis(500)));
    assertFalse(h.resultCounts(T0.plusSeconds(1)));
    assertFalse(h.resultCounts(T0.plusSeconds(3)));
  }

  @Test
  @DisplayName("C6 a lost lease neither starts nor counts, even before its deadline, and fires its signal once")
  void lostLeaseNeitherStartsNorCounts() {
    HeldLease h = lease(T0.plusSeconds(30), Duration.ofSeconds(30));
    AtomicInteger fired = new AtomicInteger();
    h.signal.onCancel(fired::incrementAndGet);
    h.lose("revoked");
    h.lose("again");
    assertFalse(h.mayStart(T0));
    assertFalse(h.resultCounts(T0));
    assertEquals(1, fired.get());
    assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), h.signal.cause());
    assertEquals("revoked", h.signal.message());
  }

  @Test
  @DisplayName("C5 a stop request cancels without losing the lease; a later loss overrides it")
  void stopRequestThenLoss() {
    // Anchored at the clock: the signal reads it when asked.
    Instant now = Instant.now();
    HeldLease h = new HeldLease("ns/a", 7, null, now, now.plusSeconds(30), Duration.ofSeconds(30));
    AtomicInteger fired = new AtomicInteger();
    h.signal.onCancel(fired::incrementAndGet);
    h.signal.cancel(CancellationSignal.Cause.STOP_REQUESTED, "queue shutting down");
    assertTrue(h.signal.isCancelled());
    assertFalse(h.signal.isLeaseLost());
    assertTrue(h.resultCounts(now.plusSeconds(1)), "a stop request keeps the result");
    h.lose("expired");
    assertTrue(h.signal.isLeaseLost());
    assertEquals(1, fired.get(), "callbacks run once");
    // A callback registered after the signal fired runs at once.
    h.signal.onCancel(fired::incrementAndGet);
    assertEquals(2, fired.get());
  }

  @Test
  @DisplayName("C6 a lease past its deadline by the clock reads as lost when asked, before any timer fires")
  void pastDeadlineReadsAsLostWhenAsked() {
    HeldLease h = lease(T0.plusSeconds(30), Duration.ofSeconds(30)); // long past by the clock
    AtomicInteger fired = new AtomicInteger();
    h.signal.onCancel(fired::incrementAndGet);
    assertTrue(h.signal.isLeaseLost());
    assertTrue(h.signal.isCancelled());
    assertEquals(Optional.of(CancellationSignal.Cause.LEASE_LOST), h.signal.cause());
    assertEquals("lease deadline passed", h.signal.message());
    CancellationSignal.CancelledException thrown =
        assertThrows(CancellationSignal.CancelledException.class, h.signal::throwIfCancelled);
    assertEquals(CancellationSignal.Cause.LEASE_LOST, thrown.why());
    assertEquals(0, fired.get(), "callbacks wait for the worker to lose the lease");
    Instant now = Instant.now();
    h.extended(now, now.plusSeconds(30), Duration.ofSeconds(30));
    assertFalse(h.signal.isLeaseLost(), "extended, it holds again");
  }

  @Test
  @DisplayName("the signal's deadline follows the lease's")
  void signalDeadlineFollowsTheLease() {
    HeldLease h = lease(T0.plusSeconds(30), Duration.ofSeconds(30));
    h.extended(T0.plusSeconds(10), T0.plusSeconds(40), Duration.ofSeconds(30));
    assertEquals(T0.plusSeconds(40), h.signal.deadline());
  }
}
