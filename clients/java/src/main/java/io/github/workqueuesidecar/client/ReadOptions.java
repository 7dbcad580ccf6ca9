package io.github.workqueuesidecar.client;

import java.time.Duration;
import java.util.Objects;

/**
 * Options of a cache read: {@code ReadOptions.atLeast(rv).waitFor(Duration.ofSeconds(5))}.
 * Immutable; each method returns a changed copy.
 */
public final class ReadOptions {
  final String minResourceVersion;
  final Duration wait;
  final boolean includeDeleted;

  private ReadOptions(String minResourceVersion, Duration wait, boolean includeDeleted) {
    this.minResourceVersion = minResourceVersion;
    this.wait = wait;
    this.includeDeleted = includeDeleted;
  }

  /** Read the cache as it is now; fail at once if its informer has not synced. */
  public static ReadOptions now() {
    return new ReadOptions("", Duration.ZERO, false);
  }

  /**
   * Read-your-writes: wait until the cache has seen this resourceVersion (one a write returned).
   * Give a wait with {@link #waitFor}; without one the read fails at once when the cache is behind.
   */
  public static ReadOptions atLeast(String resourceVersion) {
    return now().minResourceVersion(resourceVersion);
  }

  public ReadOptions minResourceVersion(String resourceVersion) {
    return new ReadOptions(Objects.requireNonNull(resourceVersion, "resourceVersion"), wait, includeDeleted);
  }

  /** How long to wait for the informer's initial list and for the minimum resourceVersion. */
  public ReadOptions waitFor(Duration timeout) {
    return new ReadOptions(minResourceVersion, Objects.requireNonNull(timeout, "wait"), includeDeleted);
  }

  /** Also return a deleted object's last known state (get only; {@link CachedObject#deleted()} is true). */
  public ReadOptions includeDeleted() {
    return new ReadOptions(minResourceVersion, wait, true);
  }
}
