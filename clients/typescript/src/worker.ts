// Worker: one `run` of a queue: the reconnect loop around sessions (one
// Work stream each) and the concurrency slots that outlive a session.
import { status as Status } from "@grpc/grpc-js";

import { fromGrpc, type WorkqueueError } from "./errors.js";
import type { WorkQueueServiceClient } from "./gen/workqueue/v1/workqueue.js";
import { jitter } from "./lease.js";
import type { Logger } from "./log.js";
import type { Request, Result } from "./request.js";
import { Session } from "./session.js";

/** How long `run` waits for running reconciles once its signal aborts, by default (ms): under Kubernetes' 30 s grace period. */
export const DEFAULT_STOP_TIMEOUT_MS = 20_000;
const DEFAULT_MIN_BACKOFF_MS = 100;
const DEFAULT_MAX_BACKOFF_MS = 10_000;

/** A reconcile: resolve (with nothing, or a Result) for success; throw to retry with backoff. */
export type Reconcile = (req: Request) => Promise<Result | void> | Result | void;

export interface RunOptions {
  /** How many reconciles run at once (the stream's credit window); default 1. */
  concurrency?: number;
  /** Aborting it stops the worker gracefully; `run` resolves once stopped. */
  signal?: AbortSignal;
  /** Lease length in ms (within the queue's max_lease_ttl); default the queue's lease_ttl. */
  leaseTtl?: number;
  /** Attach the key's object from the queue's primary informer as `req.object`. */
  includeObject?: boolean;
  /** How long a stop waits for running reconciles (ms); default 20 000. */
  stopTimeout?: number;
  /** Delays between attempts to reopen a broken stream (ms): from `initial`, doubling, up to `max`; default 100 to 10 000. */
  reconnectBackoff?: { initial: number; max: number };
}

/** A lease waiting for a concurrency slot. */
interface Waiter {
  lease: object;
  start: () => void;
}

export class Worker {
  readonly concurrency: number;
  readonly stopTimeout: number;
  /** Reconciles running now, across sessions: a reconcile still running when its stream broke keeps its slot. */
  private running = 0;
  private readonly waiters: Waiter[] = [];
  /**
   * The keys reconciling in this process, each with a promise that resolves
   * when its reconcile returns. A lease for a key whose earlier reconcile
   * still runs (its lease lost, its signal ignored, and it has not returned)
   * waits for it: one key never runs twice at once here.
   */
  private readonly keys = new Map<string, Promise<void>>();
  /** The session whose window grows when an older session's reconcile frees a slot. */
  current: Session | undefined;

  constructor(
    private readonly client: WorkQueueServiceClient,
    readonly queue: string,
    readonly workerName: string,
    readonly reconcile: Reconcile,
    readonly options: RunOptions,
    readonly log: Logger,
  ) {
    this.concurrency = options.concurrency ?? 1;
    this.stopTimeout = options.stopTimeout ?? DEFAULT_STOP_TIMEOUT_MS;
  }

  async run(): Promise<void> {
    const signal = this.options.signal ?? new AbortController().signal;
    const min = this.options.reconnectBackoff?.initial ?? DEFAULT_MIN_BACKOFF_MS;
    const max = this.options.reconnectBackoff?.max ?? DEFAULT_MAX_BACKOFF_MS;
    let delay = min;
    for (;;) {
      if (signal.aborted) return;
      const started = Date.now();
      const err = await this.serveStream(signal);
      if (signal.aborted) return;
      if (err !== undefined && permanent(err)) throw err;
      if (Date.now() - started > max) delay = min;
      const wait = jitter(delay);
      this.log.warn("work stream ended; reopening", { queue: this.queue, err, afterMs: Math.round(wait) });
      await sleep(wait, signal);
      delay = Math.min(2 * delay, max);
    }
  }

  /** One session from Open to its end; resolves with why it ended (undefined: stopped). */
  private async serveStream(signal: AbortSignal): Promise<WorkqueueError | undefined> {
    const session = new Session(this, this.client.work());
    try {
      await session.open(signal);
    } catch (err) {
      return fromGrpc(`open work stream on queue ${JSON.stringify(this.queue)}`, err);
    }
    return session.serve(signal);
  }

  /** Slots free now: the window a new stream opens with. */
  freeSlots(): number {
    return Math.max(0, this.concurrency - this.running);
  }

  /** Starts a lease's reconcile now if a slot is free, else when one frees. */
  acquire(lease: object, start: () => void): void {
    if (this.running < this.concurrency) {
      this.running++;
      start();
    } else {
      this.waiters.push({ lease, start });
    }
  }

  /**
   * Claims key if no other reconcile of it runs in this process: returns
   * what ends the claim, or undefined when the key is busy.
   */
  claimKey(key: string): (() => void) | undefined {
    if (this.keys.has(key)) return undefined;
    let done: () => void = () => {};
    this.keys.set(key, new Promise<void>((resolve) => (done = resolve)));
    return () => {
      this.keys.delete(key);
      done();
    };
  }

  /**
   * Waits until no other reconcile of key runs in this process and claims
   * it (see claimKey); undefined when cancel aborts first (the lease was
   * lost, or the worker is stopping, while it waited).
   */
  async waitForKey(key: string, cancel: AbortSignal): Promise<(() => void) | undefined> {
    for (;;) {
      if (cancel.aborted) return undefined;
      const claim = this.claimKey(key);
      if (claim !== undefined) return claim;
      this.log.info("waiting for the earlier reconcile of this key to return (its lease was lost, and it ignores its signal)", {
        queue: this.queue,
        key,
      });
      let onAbort: () => void = () => {};
      const aborted = new Promise<void>((resolve) => (onAbort = resolve));
      cancel.addEventListener("abort", onAbort, { once: true });
      try {
        await Promise.race([this.keys.get(key), aborted]);
      } finally {
        cancel.removeEventListener("abort", onAbort);
      }
    }
  }

  /** Drops a lease that no longer waits for a slot. */
  unqueue(lease: object): void {
    const i = this.waiters.findIndex((w) => w.lease === lease);
    if (i >= 0) this.waiters.splice(i, 1);
  }

  /**
   * Frees a reconcile's slot: to a waiting lease, or, when an older
   * session's reconcile freed it, to the current session as one more credit.
   */
  release(from: Session): void {
    this.running--;
    const next = this.waiters.shift();
    if (next !== undefined) {
      this.running++;
      next.start();
      return;
    }
    const cur = this.current;
    if (cur !== undefined && cur !== from && cur.window < cur.maxWindow) {
      cur.window++;
      cur.credit(1);
    }
  }
}

/** Errors that reopening the stream cannot fix. */
function permanent(err: WorkqueueError): boolean {
  switch (err.code) {
    case Status.NOT_FOUND:
    case Status.INVALID_ARGUMENT:
    case Status.UNIMPLEMENTED:
    case Status.PERMISSION_DENIED:
    case Status.UNAUTHENTICATED:
      return true;
    default:
      return false;
  }
}

/** Resolves after ms, or at once when signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}
