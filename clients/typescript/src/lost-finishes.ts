// LostFinishes: the Finishes of lost leases a Work stream still expects the
// sidecar to refuse.

/**
 * Tokens of lost leases whose Finish was sent, with when it was sent: the
 * sidecar's refusal of them is expected, not worth a warning, and answering
 * one removes it. On a stream that hears only of failed Finishes
 * (`Opened.ackFailuresOnly`), a lost lease the sidecar still held (the local
 * deadline passed first) has its Finish applied and never answered: then
 * `forgetAfter` is set and `prune` drops a token that long after its Finish
 * went out. While it is undefined (a sidecar that answers every Finish) a
 * token stays until its answer, as every Finish gets one.
 */
export class LostFinishes {
  /** When each Finish went out (epoch ms), in sending order: the oldest first. */
  private readonly sent = new Map<bigint, number>();
  /** How long (ms) an unanswered token is kept; undefined keeps it until answered. */
  forgetAfter: number | undefined;

  add(token: bigint, now: number): void {
    this.sent.delete(token); // keeps the map in sending order
    this.sent.set(token, now);
  }

  /** Removes `token`; true if it was a lost lease's Finish (its refusal was expected). */
  answered(token: bigint): boolean {
    return this.sent.delete(token);
  }

  /** Drops the tokens whose Finish went out `forgetAfter` ago or more. */
  prune(now: number): void {
    const after = this.forgetAfter;
    if (after === undefined) return;
    for (const [token, at] of this.sent) {
      if (now - at < after) return;
      this.sent.delete(token);
    }
  }

  /** When the oldest token is to be dropped (epoch ms); undefined when none will be. */
  nextExpiry(): number | undefined {
    if (this.forgetAfter === undefined) return undefined;
    for (const at of this.sent.values()) return at + this.forgetAfter;
    return undefined;
  }

  has(token: bigint): boolean {
    return this.sent.has(token);
  }

  get size(): number {
    return this.sent.size;
  }
}
