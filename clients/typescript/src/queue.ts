// Queue: a handle on one of the sidecar's named queues: client-go's
// workqueue calls, introspection, and `run`, the worker.
import {
  KeyState as WireKeyState,
  type AddRateLimitedResponse,
  type KeyStateResponse,
  type LenResponse,
  type NumRequeuesResponse,
  type ShutDownResponse,
  type WorkQueueServiceClient,
} from "./gen/workqueue/v1/workqueue.js";
import type { Logger } from "./log.js";
import { reasonFromWire, type Reason } from "./request.js";
import { DEFAULT_CALL_TIMEOUT_MS, limits, unary, type CallOptions } from "./rpc.js";
import { fromDuration, toDuration } from "./time.js";
import { Worker, type Reconcile, type RunOptions } from "./worker.js";

/** Options of the add calls. */
export interface AddOptions extends CallOptions {
  /** The priority to queue at (higher first); default the queue's priority for manual adds. */
  priority?: number;
  /** A label shown to workers as the reason's source. */
  reason?: string;
}

/** A queue's counts at one instant. */
export interface QueueLength {
  /** Ready to be handed out now (client-go's Len). */
  ready: number;
  /** Waiting for a delay or a backoff. */
  waiting: number;
  /** Held under a lease. */
  held: number;
  /** Held and added again meanwhile. */
  dirty: number;
  /** Waiting, after a lease that wrote through the sidecar, for the caches to see the writes. */
  settling: number;
  /** Ready keys per priority, highest first. */
  readyByPriority: { priority: number; count: number }[];
}

export type KeyPhase = "ABSENT" | "QUEUED" | "WAITING" | "HELD" | "SETTLING" | "UNSPECIFIED";

/** Where a key is in its queue. */
export interface KeyInfo {
  state: KeyPhase;
  priority: number;
  failures: number;
  lastError: string;
  reasons: Reason[];
  /** QUEUED: when it became ready. */
  queuedSince: Date | undefined;
  /** WAITING: when it becomes ready. */
  waitingUntil: Date | undefined;
  /** HELD: the lease's deadline. */
  heldUntil: Date | undefined;
  /** HELD: who holds it ("<worker>#<stream>" for a Work stream). */
  holder: string;
  dirty: boolean;
  /** SETTLING (its last lease wrote through the sidecar): the latest it waits for the caches to see those writes. */
  settlingUntil: Date | undefined;
  /** Where the key belongs among the replicas of a shard group; undefined unless the queue is sharded (`shard_by` in the sidecar's config). */
  shard: ShardPlace | undefined;
}

/** Which shard slot a key of a sharded queue falls in and which replica owns it, as the asked sidecar last read its group's Leases. */
export interface ShardPlace {
  /**
   * The key's shard slot, 0 to 4095; undefined when not known (sharded by
   * uid, the key's object is not in the sidecar's cache nor among its
   * tombstones; such a key is not granted until it is).
   */
  slot: number | undefined;
  /** The identity of the replica the slot is assigned to; empty when the slot is not known or no replica is live. During a handover the previous owner may still be draining it. */
  owner: string;
  /** Whether the asked sidecar holds the slot and grants the key now. */
  grantedHere: boolean;
}

/** The backoff the rate limiter chose for one key. */
export interface RateLimitedKey {
  key: string;
  failures: number;
  /** The rate limiter's delay in milliseconds: the key is ready after it unless it was due sooner already. */
  delay: number;
}

/** What a drain did with the leases held at shutdown. */
export interface DrainReport {
  finished: number;
  returned: number;
}

const phases: Record<number, KeyPhase> = {
  [WireKeyState.KEY_STATE_ABSENT]: "ABSENT",
  [WireKeyState.KEY_STATE_QUEUED]: "QUEUED",
  [WireKeyState.KEY_STATE_WAITING]: "WAITING",
  [WireKeyState.KEY_STATE_HELD]: "HELD",
  [WireKeyState.KEY_STATE_SETTLING]: "SETTLING",
};

function keysAndOptions(args: unknown[]): [string[], AddOptions] {
  if (Array.isArray(args[0])) return [args[0] as string[], (args[1] as AddOptions | undefined) ?? {}];
  return [args as string[], {}];
}

export class Queue {
  constructor(
    private readonly client: WorkQueueServiceClient,
    /** The queue's name in the sidecar config. */
    readonly name: string,
    private readonly workerName: string,
    private readonly log: Logger,
    /** Aborted when the client closes: a running worker stops on it too. */
    private readonly clientClosing: AbortSignal = new AbortController().signal,
    /** The deadline of each call (ms) unless the call gives its own. */
    private readonly callTimeout: number = DEFAULT_CALL_TIMEOUT_MS,
  ) {}

  private op(verb: string): string {
    return `${verb} queue ${JSON.stringify(this.name)}`;
  }

  /** Queues keys now (client-go Add). `add("a", "b")` or `add(["a", "b"], { priority })`. */
  add(...keys: string[]): Promise<void>;
  add(keys: readonly string[], options: AddOptions): Promise<void>;
  async add(...args: unknown[]): Promise<void> {
    const [keys, o] = keysAndOptions(args);
    await unary(this.op("add to"), limits(this.callTimeout, o), (md, co, cb) =>
      this.client.add({ queue: this.name, keys, priority: o.priority, reason: o.reason ?? "" }, md, co, cb),
    );
  }

  /** Queues keys once `delay` ms have passed (client-go AddAfter). */
  addAfter(delay: number, ...keys: string[]): Promise<void>;
  addAfter(delay: number, keys: readonly string[], options: AddOptions): Promise<void>;
  async addAfter(delay: number, ...args: unknown[]): Promise<void> {
    const [keys, o] = keysAndOptions(args);
    await unary(this.op("add after to"), limits(this.callTimeout, o), (md, co, cb) =>
      this.client.addAfter({ queue: this.name, keys, delay: toDuration(delay), priority: o.priority, reason: o.reason ?? "" }, md, co, cb),
    );
  }

  /** Counts a failure for each key and queues it after its backoff (client-go AddRateLimited). */
  addRateLimited(...keys: string[]): Promise<RateLimitedKey[]>;
  addRateLimited(keys: readonly string[], options: AddOptions): Promise<RateLimitedKey[]>;
  async addRateLimited(...args: unknown[]): Promise<RateLimitedKey[]> {
    const [keys, o] = keysAndOptions(args);
    const res = await unary<AddRateLimitedResponse>(this.op("add rate limited to"), limits(this.callTimeout, o), (md, co, cb) =>
      this.client.addRateLimited({ queue: this.name, keys, priority: o.priority, reason: o.reason ?? "" }, md, co, cb),
    );
    return res.keys.map((k) => ({ key: k.key, failures: k.failures, delay: fromDuration(k.delay) ?? 0 }));
  }

  /** Clears a key's failure count (client-go Forget). */
  async forget(key: string, options?: CallOptions): Promise<void> {
    await unary(this.op("forget in"), limits(this.callTimeout, options), (md, co, cb) => this.client.forget({ queue: this.name, key }, md, co, cb));
  }

  /** How many times a key failed since it was last forgotten (client-go NumRequeues). */
  async numRequeues(key: string, options?: CallOptions): Promise<number> {
    const res = await unary<NumRequeuesResponse>(this.op("num requeues in"), limits(this.callTimeout, options), (md, co, cb) =>
      this.client.numRequeues({ queue: this.name, key }, md, co, cb),
    );
    return res.numRequeues;
  }

  /** The queue's counts (client-go Len is `.ready`). */
  async len(options?: CallOptions): Promise<QueueLength> {
    const res = await unary<LenResponse>(this.op("len of"), limits(this.callTimeout, options), (md, co, cb) => this.client.len({ queue: this.name }, md, co, cb));
    return {
      ready: res.ready,
      waiting: res.waiting,
      held: res.held,
      dirty: res.dirty,
      settling: res.settling,
      readyByPriority: res.readyByPriority.map((p) => ({ priority: p.priority, count: p.count })),
    };
  }

  /** Where a key is: absent, queued, waiting, held or settling, with its failures and reasons. */
  async keyState(key: string, options?: CallOptions): Promise<KeyInfo> {
    const res = await unary<KeyStateResponse>(this.op("key state in"), limits(this.callTimeout, options), (md, co, cb) =>
      this.client.keyState({ queue: this.name, key }, md, co, cb),
    );
    return {
      state: phases[res.state] ?? "UNSPECIFIED",
      priority: res.priority,
      failures: res.failures,
      lastError: res.lastError,
      reasons: res.reasons.map(reasonFromWire),
      queuedSince: res.queuedSince,
      waitingUntil: res.waitingUntil,
      heldUntil: res.heldUntil,
      holder: res.holder,
      dirty: res.dirty,
      settlingUntil: res.settlingUntil,
      shard: res.shard && { slot: res.shard.slot, owner: res.shard.owner, grantedHere: res.shard.grantedHere },
    };
  }

  /** Stops the queue at once; holders of leases are asked to stop (client-go ShutDown). */
  async shutDown(options?: CallOptions): Promise<void> {
    await unary(this.op("shut down"), limits(this.callTimeout, options), (md, co, cb) =>
      this.client.shutDown({ queue: this.name, drain: false, drainTimeout: undefined }, md, co, cb),
    );
  }

  /**
   * Stops the queue, waiting up to `timeout` ms (default: the sidecar's grace
   * period) for held leases to end (client-go ShutDownWithDrain). The call's
   * deadline is that wait plus the call timeout; without `timeout` the wait
   * is the sidecar's to choose, so there is none unless `options` give one.
   */
  async shutDownWithDrain(timeout?: number, options?: CallOptions): Promise<DrainReport> {
    const res = await unary<ShutDownResponse>(this.op("shut down"), limits(this.callTimeout, options, timeout), (md, co, cb) =>
      this.client.shutDown({ queue: this.name, drain: true, drainTimeout: timeout === undefined ? undefined : toDuration(timeout) }, md, co, cb),
    );
    return { finished: res.finished, returned: res.returned };
  }

  /**
   * Runs a worker: takes keys from the queue and calls reconcile for each, at
   * most `concurrency` at once, until `signal` aborts. Resolves once stopped;
   * rejects only on what retrying cannot fix (an unknown queue, an invalid
   * argument). See the README's lease rules.
   */
  async run(reconcile: Reconcile, options: RunOptions = {}): Promise<void> {
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`workqueue: run on queue ${JSON.stringify(this.name)}: concurrency must be an integer of at least 1, not ${concurrency}`);
    }
    const signal = options.signal === undefined ? this.clientClosing : AbortSignal.any([options.signal, this.clientClosing]);
    await new Worker(this.client, this.name, this.workerName, reconcile, { ...options, signal }, this.log).run();
  }
}
