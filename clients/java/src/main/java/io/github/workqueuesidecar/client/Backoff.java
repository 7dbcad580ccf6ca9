package io.github.workqueuesidecar.client;

import java.time.Duration;

/**
 * The rate limiter's decision for one key of an addRateLimited.
 *
 * @param key the key
 * @param failures its failure count including this one
 * @param delay how long it waits before it is ready again
 */
public record Backoff(String key, int failures, Duration delay) {}
