// The lease rules, as pure functions of the clock: a lease's deadline by the
// local clock, and whether it has passed.

/**
 * A lease's deadline by this machine's clock, in epoch milliseconds: the
 * earlier of the sidecar's deadline (when it sent one) and the time the
 * message arrived plus the TTL the sidecar gave. The TTL guards against a
 * sidecar clock ahead of ours; the sidecar's deadline against a message that
 * waited before it was read.
 */
export function leaseDeadline(arrivedMs: number, sidecarDeadline: Date | undefined, ttlMs: number): number {
  const byTtl = arrivedMs + ttlMs;
  if (sidecarDeadline === undefined) return byTtl;
  const sidecar = sidecarDeadline.getTime();
  return Number.isFinite(sidecar) && sidecar < byTtl ? sidecar : byTtl;
}

/** True once nowMs has reached the deadline: a lease is not held at its deadline. */
export function leaseExpired(deadlineMs: number, nowMs: number): boolean {
  return nowMs >= deadlineMs;
}

/** How often a running reconcile's lease is extended: a third of its TTL, at least 10 ms. */
export function extendInterval(ttlMs: number): number {
  return Math.max(Math.floor(ttlMs / 3), 10);
}

/** Spreads d by ±20%, so that workers do not reconnect in lockstep. */
export function jitter(d: number, random: () => number = Math.random): number {
  return d * (0.8 + 0.4 * random());
}
