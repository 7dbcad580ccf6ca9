package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/** The lost leases' Finishes a stream awaits the refusal of (no sidecar). */
class LostFinishesTest {
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");

  @Test
  @DisplayName("a token stays until answered while the sidecar answers every Finish")
  void keptUntilAnswered() {
    LostFinishes lost = new LostFinishes();
    lost.add(1, T0);
    lost.prune(T0.plus(Duration.ofDays(1)));
    assertTrue(lost.contains(1));
    assertEquals(Optional.empty(), lost.nextExpiry());
    assertTrue(lost.answered(1));
    assertFalse(lost.answered(1), "answered twice");
  }

  @Test
  @DisplayName("when only failures are answered, a token goes forgetAfter after its Finish, oldest first, never before")
  void droppedAfterForgetAfter() {
    LostFinishes lost = new LostFinishes();
    lost.forgetAfter(Duration.ofSeconds(30));
    lost.add(1, T0);
    lost.add(2, T0.plusSeconds(2));
    assertEquals(Optional.of(T0.plusSeconds(30)), lost.nextExpiry());
    lost.prune(T0.plusSeconds(29));
    assertEquals(2, lost.size(), "dropped before its refusal could come");
    lost.prune(T0.plusSeconds(31));
    assertFalse(lost.contains(1), "31 s after its Finish (TTL 30 s) the token is still awaited");
    assertTrue(lost.contains(2));
    assertEquals(Optional.of(T0.plusSeconds(32)), lost.nextExpiry());
  }
}
