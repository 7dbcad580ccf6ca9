package io.github.workqueuesidecar.client;

import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.function.BooleanSupplier;

/** Waits for conditions with generous timeouts instead of asserting on timing. */
final class Eventually {
  private Eventually() {}

  /** Polls {@code condition} every 20 ms until it holds; fails the test after {@code timeout}. */
  static void eventually(Duration timeout, String what, BooleanSupplier condition) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!condition.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        fail("timed out after " + timeout + " waiting for " + what);
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fail("interrupted waiting for " + what);
      }
    }
  }

  static void eventually(String what, BooleanSupplier condition) {
    eventually(Duration.ofSeconds(15), what, condition);
  }
}
