package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.util.Objects;

/**
 * How a worker runs: {@code RunOptions.concurrency(4).leaseTtl(Duration.ofMinutes(1))}. Immutable;
 * each method returns a changed copy.
 */
public final class RunOptions {
  /**
   * How long a graceful stop waits for running reconciles by default: less than Kubernetes' default
   * 30 s termination grace period, so their results still reach the sidecar.
   */
  public static final Duration DEFAULT_STOP_TIMEOUT = Duration.ofSeconds(20);

  private final int concurrency;
  private final Duration leaseTtl;
  private final boolean includeObject;
  private final Duration stopTimeout;
  private final Duration minBackoff;
  private final Duration maxBackoff;

  private RunOptions(int concurrency, Duration leaseTtl, boolean includeObject, Duration stopTimeout, Duration minBackoff, Duration maxBackoff) {
    if (concurrency < 1) {
      throw new IllegalArgumentException("concurrency must be at least 1, not " + concurrency);
    }
    this.concurrency = concurrency;
    this.leaseTtl = leaseTtl;
    this.includeObject = includeObject;
    this.stopTimeout = stopTimeout;
    this.minBackoff = minBackoff;
    this.maxBackoff = maxBackoff;
  }

  /** One reconcile at a time, the queue's lease TTL, no objects, 20 s stop timeout, 100 ms..10 s reconnect backoff. */
  public static RunOptions defaults() {
    return new RunOptions(1, null, false, DEFAULT_STOP_TIMEOUT, Duration.ofMillis(100), Duration.ofSeconds(10));
  }

  /** The defaults with {@code n} reconciles at once (n threads, a window of n leases). */
  public static RunOptions concurrency(int n) {
    return defaults().withConcurrency(n);
  }

  public RunOptions withConcurrency(int n) {
    return new RunOptions(n, leaseTtl, includeObject, stopTimeout, minBackoff, maxBackoff);
  }

  /** Leases of this length (kept within the sidecar's bounds), extended every third of it; by default the queue's lease_ttl. */
  public RunOptions leaseTtl(Duration ttl) {
    requirePositive(ttl, "leaseTtl");
    return new RunOptions(concurrency, ttl, includeObject, stopTimeout, minBackoff, maxBackoff);
  }

  /** Attach each key's cached object to its {@link Request} (queues with a primary informer). */
  public RunOptions includeObject() {
    return new RunOptions(concurrency, leaseTtl, true, stopTimeout, minBackoff, maxBackoff);
  }

  /** How long a graceful stop waits for running reconciles; after it their leases are given up. */
  public RunOptions stopTimeout(Duration timeout) {
    Objects.requireNonNull(timeout, "stopTimeout");
    return new RunOptions(concurrency, leaseTtl, includeObject, timeout, minBackoff, maxBackoff);
  }

  /** The delays between attempts to reopen a broken stream: from {@code initial}, doubling, up to {@code max}, ±20% jitter. */
  public RunOptions reconnectBackoff(Duration initial, Duration max) {
    requirePositive(initial, "initial backoff");
    requirePositive(max, "max backoff");
    return new RunOptions(concurrency, leaseTtl, includeObject, stopTimeout, initial, max.compareTo(initial) < 0 ? initial : max);
  }

  public int concurrency() {
    return concurrency;
  }

  /** The asked lease TTL, or null for the queue's. */
  public Duration leaseTtl() {
    return leaseTtl;
  }

  public boolean objectIncluded() {
    return includeObject;
  }

  public Duration stopTimeout() {
    return stopTimeout;
  }

  public Duration minBackoff() {
    return minBackoff;
  }

  public Duration maxBackoff() {
    return maxBackoff;
  }

  private static void requirePositive(Duration d, String what) {
    Objects.requireNonNull(d, what);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(what + " must be positive, not " + d);
    }
  }
}
