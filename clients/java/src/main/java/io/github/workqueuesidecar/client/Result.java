package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * What a successful reconcile asks for: {@link #done()} (the key's failures are forgotten) or
 * {@link #requeueAfter(Duration)} (done for now; see the key again after a delay). A failure is not
 * a Result: throw, and the key is retried with the queue's backoff.
 */
public final class Result {
  private static final Result DONE = new Result(null);

  private final Duration requeueAfter;

  private Result(Duration requeueAfter) {
    this.requeueAfter = requeueAfter;
  }

  /** The work is done: Forget + Done. */
  public static Result done() {
    return DONE;
  }

  /** The work is done for now; the key comes back after {@code delay}: Forget + Done + AddAfter. */
  public static Result requeueAfter(Duration delay) {
    Objects.requireNonNull(delay, "delay");
    if (delay.isNegative()) {
      throw new IllegalArgumentException("requeueAfter: negative delay " + delay);
    }
    return delay.isZero() ? DONE : new Result(delay);
  }

  /** The requeue delay, empty for {@link #done()}. */
  public Optional<Duration> requeueAfter() {
    return Optional.ofNullable(requeueAfter);
  }

  @Override
  public String toString() {
    return requeueAfter == null ? "Result.done()" : "Result.requeueAfter(" + requeueAfter + ")";
  }
}
