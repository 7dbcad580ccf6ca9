package io.github.workqueuesidecar.client;

import java.time.Duration;

/**
 * The rate limiter's decision for one key of an addRateLimited.
 *
 * @param key the key
 * @param failures its failure count including this one
 * @param delay the rate limiter's delay: the key is ready after it unless it was due sooner already
 */
public record Backoff(String key, int failures, Duration delay) {}
