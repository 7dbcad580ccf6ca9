package io.github.workqueuesidecar.client;

/**
 * What became of the leases held when a queue was shut down with drain.
 *
 * @param finished leases that ended during the drain
 * @param returned leases still held at the drain timeout, returned to the queue
 */
public record DrainReport(int finished, int returned) {}
