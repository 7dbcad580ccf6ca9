// Session: one Work stream, from Open to its end: its leases, their
// reconciles, and the messages that travel both ways.
import { status as Status, type ClientDuplexStream, type StatusObject } from "@grpc/grpc-js";

import { errorForCode, LeaseEndedDuringWriteError, LeaseLostError, StopRequestedError, type LeaseLostWhy, WorkqueueError } from "./errors.js";
import type {
  Lease,
  WorkRequest,
  WorkRequest_Finish,
  WorkResponse,
  WorkResponse_Cancel,
  WorkResponse_Extended,
  WorkResponse_FinishAck,
  WorkResponse_Opened,
} from "./gen/workqueue/v1/workqueue.js";
import { extendInterval, leaseDeadline, leaseExpired } from "./lease.js";
import { LostFinishes } from "./lost-finishes.js";
import { requestFromLease, type Request, type Result } from "./request.js";
import { fromDuration, toDuration } from "./time.js";
import { logLine } from "./log.js";
import type { Worker } from "./worker.js";

/** How long Open may wait for Opened: a sidecar that accepted the stream answers at once. */
const OPEN_TIMEOUT_MS = 10_000;
/** How long a graceful stop waits for the sidecar to end the stream after the half-close. */
const CLOSE_TIMEOUT_MS = 5_000;
/** Stands in for the stream's lease TTL if Opened carries none. */
const DEFAULT_LEASE_TTL_MS = 30_000;

/** One lease this session holds. */
class Held {
  /** Aborts on the first of a stop request and the loss: the reconcile's `req.signal`. */
  readonly controller = new AbortController();
  /** Aborts on the loss only (`req.leaseLost`): `controller` cannot tell a loss after a stop request. */
  readonly lostController = new AbortController();
  /** The lease ended without this worker; its result is discarded. */
  lost = false;
  /** The reconcile took a slot (it runs, or ran, or waits for its key). */
  started = false;
  /** It has a slot and waits for an earlier reconcile of its key, still running here, to return. */
  waitingForKey = false;
  /** Aborts on the loss or a stop: the lease no longer waits for its key, and never starts. */
  readonly keyWait = new AbortController();
  /** The lease's end by the local clock, epoch ms (see leaseDeadline). */
  deadline = 0;
  expiry: NodeJS.Timeout | undefined;
  ticker: NodeJS.Timeout | undefined;

  constructor(
    readonly key: string,
    readonly token: bigint,
    /** Called once when the lease is lost, so the session can answer it. */
    private readonly onLost: (h: Held) => void,
    /** Called when the expiry timer finds the deadline passed, so the session can log the loss and lose it. */
    private readonly onExpired: (h: Held) => void,
  ) {}

  lose(why: LeaseLostWhy): void {
    if (this.lost) return;
    this.lost = true;
    // Nothing to extend or wait for any more, even if the reconcile never returns.
    this.stopTimers();
    this.keyWait.abort();
    const error = new LeaseLostError(this.key, why);
    this.lostController.abort(error);
    if (!this.controller.signal.aborted) this.controller.abort(error);
    this.onLost(this);
  }

  askToStop(message: string): void {
    if (!this.controller.signal.aborted) this.controller.abort(new StopRequestedError(this.key, message));
  }

  /** Moves the deadline (and the expiry timer with it). */
  setDeadline(now: number, sidecar: Date | undefined, ttlMs: number): void {
    this.deadline = leaseDeadline(now, sidecar, ttlMs);
    if (this.expiry !== undefined) clearTimeout(this.expiry);
    this.expiry = setTimeout(() => this.onExpired(this), Math.max(0, this.deadline - Date.now()));
    // A lease's timers never keep the process alive: a reconcile that never
    // settles must not stop a worker that was told to exit from exiting.
    this.expiry.unref();
  }

  stopTimers(): void {
    clearTimeout(this.expiry);
    clearInterval(this.ticker);
  }
}

type Outcome = { ok: true; result: Result | void } | { ok: false; error: unknown };

/** Whether a reconcile's error is a LeaseEndedDuringWriteError, or has one in its `cause` chain. */
function endedDuringWrite(error: unknown): boolean {
  const seen = new Set<unknown>();
  for (let e = error; e instanceof Error && !seen.has(e); e = e.cause) {
    if (e instanceof LeaseEndedDuringWriteError) return true;
    seen.add(e);
  }
  return false;
}

/** The error a stream's final status stands for. */
function streamError(op: string, s: StatusObject): WorkqueueError {
  if (s.code === Status.OK) return errorForCode(op, Status.UNAVAILABLE, "the sidecar ended the work stream");
  return errorForCode(op, s.code, s.details);
}

export class Session {
  /** The leases held, by token. */
  private readonly leases = new Map<bigint, Held>();
  /** Tokens of lost leases whose Finish was sent: the sidecar's refusal is expected. */
  private readonly lostFinishes = new LostFinishes();
  /** Drops the lost leases' Finishes left unanswered (see LostFinishes); one per stream. */
  private forgetTimer: NodeJS.Timeout | undefined;
  /** Resolves with the call's final status. */
  private readonly done: Promise<StatusObject>;
  private onOpened: ((o: WorkResponse_Opened) => void) | undefined;
  private leaseTtl = DEFAULT_LEASE_TTL_MS;
  private extendEvery = extendInterval(DEFAULT_LEASE_TTL_MS);
  private stopping = false;
  /** No more sends: half-closed, or the call ended. */
  private closed = false;
  /** Wakes a graceful stop when the last lease of this session is gone. */
  private idle: (() => void) | undefined;

  /** Credits granted so far on this stream, and their ceiling (see Worker.release). */
  window = 0;
  maxWindow = 0;

  constructor(
    private readonly worker: Worker,
    private readonly call: ClientDuplexStream<WorkRequest, WorkResponse>,
  ) {
    this.done = new Promise((resolve) => {
      call.on("status", (s: StatusObject) => {
        this.closed = true;
        resolve(s);
      });
    });
    call.on("error", () => {}); // the status event carries it
    call.on("data", (m: WorkResponse) => this.receive(m));
  }

  private get op(): string {
    return `work stream on queue ${JSON.stringify(this.worker.queue)}`;
  }

  /** Sends Open with the free slots as the window and waits for Opened. */
  async open(signal: AbortSignal): Promise<void> {
    const w = this.worker;
    this.window = w.freeSlots();
    this.maxWindow = w.concurrency;
    const opened = new Promise<WorkResponse_Opened>((resolve) => (this.onOpened = resolve));
    this.send({
      kind: {
        $case: "open",
        value: {
          queue: w.queue,
          worker: w.workerName,
          credits: this.window,
          leaseTtl: w.options.leaseTtl === undefined ? undefined : toDuration(w.options.leaseTtl),
          includeObject: w.options.includeObject ?? false,
          // Nothing waits on a Finish's answer: a refusal is only logged
          // (onFinishAck). So the sidecar answers only those, one message
          // less per lease; a sidecar older than the field answers them all.
          ackFailuresOnly: true,
        },
      },
    });
    w.current = this;
    const timeout = setTimeout(() => this.call.cancel(), OPEN_TIMEOUT_MS);
    const onAbort = (): void => this.call.cancel();
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const first = await Promise.race([opened, this.done]);
      if (!("leaseTtl" in first)) {
        this.detach();
        throw streamError(`open ${this.op}`, first);
      }
      const ttl = fromDuration(first.leaseTtl);
      this.leaseTtl = ttl !== undefined && ttl > 0 ? ttl : DEFAULT_LEASE_TTL_MS;
      this.extendEvery = extendInterval(this.leaseTtl);
      // An applied Finish is not answered: a lost lease the sidecar still
      // held gets no answer, so its token is dropped a TTL after its Finish
      // went out (a refusal comes within a round trip). A sidecar older than
      // the field says false and answers every Finish, as before.
      this.lostFinishes.forgetAfter = first.ackFailuresOnly ? this.leaseTtl : undefined;
      if (first.maxCredits > 0 && first.maxCredits < w.concurrency) {
        w.log.warn("concurrency is over the sidecar's window; capped", { concurrency: w.concurrency, maxCredits: first.maxCredits });
        this.maxWindow = first.maxCredits;
        this.window = Math.min(this.window, first.maxCredits);
      }
      w.log.info("work stream open", { queue: w.queue, credits: first.credits, leaseTtlMs: this.leaseTtl, ackFailuresOnly: first.ackFailuresOnly });
    } finally {
      clearTimeout(timeout);
      signal.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Runs until the stream breaks (resolving with why) or signal aborts
   * (stopping gracefully, resolving with undefined).
   */
  serve(signal: AbortSignal): Promise<WorkqueueError | undefined> {
    return new Promise((resolve) => {
      let stopping = false;
      const onAbort = (): void => {
        stopping = true;
        void this.stop().then(() => resolve(undefined));
      };
      void this.done.then((s) => {
        if (stopping) return;
        signal.removeEventListener("abort", onAbort);
        const n = this.end("stream broke");
        const err = streamError(this.op, s);
        if (n > 0) this.worker.log.warn("work stream broke; leases returned to the queue, their reconciles aborted", { leases: n, err });
        resolve(err);
      });
      if (signal.aborted) onAbort();
      else signal.addEventListener("abort", onAbort, { once: true });
    });
  }

  private receive(m: WorkResponse): void {
    switch (m.kind?.$case) {
      case "opened":
        this.onOpened?.(m.kind.value);
        this.onOpened = undefined;
        break;
      case "lease":
        this.onLease(m.kind.value);
        break;
      case "extended":
        this.onExtended(m.kind.value);
        break;
      case "finishAck":
        this.onFinishAck(m.kind.value);
        break;
      case "cancel":
        this.onCancel(m.kind.value);
        break;
      case undefined:
        break;
    }
  }

  private onLease(l: Lease): void {
    const received = Date.now();
    if (this.stopping) {
      this.worker.log.debug("lease arrived while stopping; it goes back when the stream closes", { key: l.key });
      return;
    }
    const h = new Held(
      l.key,
      l.token,
      (lost) => this.onLost(lost),
      (expired) => this.expire(expired),
    );
    const ttl = fromDuration(l.ttl);
    h.setDeadline(received, l.deadline, ttl !== undefined && ttl > 0 ? ttl : this.leaseTtl);
    h.ticker = setInterval(() => this.tick(h), this.extendEvery);
    h.ticker.unref();
    this.leases.set(h.token, h);
    const req = requestFromLease(this.worker.queue, l, {
      deadline: () => h.deadline,
      signal: h.controller.signal,
      leaseLost: h.lostController.signal,
    });
    this.worker.acquire(h, () => void this.start(h, req));
  }

  /** Every third of the TTL: extend the lease, and lose it if its deadline passed unanswered. */
  private tick(h: Held): void {
    if (h.lost) return;
    if (leaseExpired(h.deadline, Date.now())) {
      this.expire(h);
      return;
    }
    this.send({ kind: { $case: "extend", value: { key: h.key, token: h.token, ttl: undefined } } });
  }

  /** The lease's deadline passed unextended (by its timer or the tick, whichever saw it first): lost, one warning. */
  private expire(h: Held): void {
    if (h.lost) return;
    this.worker.log.warn("lease expired without an answer from the sidecar; aborting its reconcile", { key: h.key, why: "expired" });
    h.lose("expired");
  }

  /** A lease lost before its reconcile started is answered now; a running one when it returns. */
  private onLost(h: Held): void {
    if (h.started) return;
    this.worker.unqueue(h);
    this.finishLost(h);
    this.forget(h);
  }

  private onExtended(e: WorkResponse_Extended): void {
    const h = this.leases.get(e.token);
    if (h === undefined || h.lost) return;
    if (e.code === Status.OK) {
      const ttl = fromDuration(e.ttl) ?? this.leaseTtl;
      h.setDeadline(Date.now(), e.deadline, ttl);
      if (e.cancel) {
        // Debug, as a Cancel's: see onCancel.
        this.worker.log.debug("the sidecar asks to stop working on the key", { key: h.key });
        h.askToStop("extend answered cancel");
      }
    } else if (e.code === Status.FAILED_PRECONDITION) {
      this.worker.log.warn("lease lost: the sidecar no longer knows it; aborting its reconcile", { key: h.key });
      h.lose("revoked");
    } else {
      this.worker.log.warn("extending a lease failed", { key: h.key, err: errorForCode("extend", e.code, e.message) });
    }
  }

  private onFinishAck(a: WorkResponse_FinishAck): void {
    if (this.lostFinishes.answered(a.token)) return; // the refusal expected for a lost lease
    if (a.code === Status.OK) return;
    this.worker.log.warn("the sidecar refused a finish", { key: a.key, err: errorForCode("finish", a.code, a.message) });
  }

  private onCancel(c: WorkResponse_Cancel): void {
    const h = this.leases.get(c.token);
    if (h === undefined || h.lost) return; // a loss is logged once, when it happens
    if (c.revoked) {
      this.worker.log.warn("lease lost: the sidecar revoked it; aborting its reconcile", { key: h.key, why: c.message });
      h.lose("revoked");
      return;
    }
    // The lease stays valid and nothing went wrong, so debug: the sidecar
    // asks back every lease at once when it stops, or those of every shard
    // slot that moved to another replica (up to 4,096), one Cancel each.
    this.worker.log.debug("the sidecar asks to stop working on the key", { key: h.key, why: c.message });
    h.askToStop(c.message);
  }

  /**
   * Runs one lease's reconcile once it has a slot and no earlier reconcile
   * of its key runs in this process, then finishes the lease.
   */
  private async start(h: Held, req: Request): Promise<void> {
    h.started = true;
    let releaseKey = h.lost ? undefined : this.worker.claimKey(h.key);
    if (releaseKey === undefined && !h.lost) {
      // An earlier reconcile of the key still runs here (its lease lost, its
      // signal ignored): wait for it, keeping the slot, so that one key
      // never runs twice at once in this process.
      h.waitingForKey = true;
      releaseKey = await this.worker.waitForKey(h.key, h.keyWait.signal);
      h.waitingForKey = false;
      if (releaseKey === undefined && !h.lost) {
        // The worker is stopping: never started, it goes back when the stream closes.
        this.worker.release(this);
        this.forget(h);
        return;
      }
    }
    // A lease lost or expired while it waited for a slot or for its key (or
    // while this process was stopped) may be another worker's by now: never
    // start it.
    if (releaseKey === undefined || h.lost || leaseExpired(h.deadline, Date.now())) {
      releaseKey?.();
      if (!h.lost) this.worker.log.warn("lease expired before its reconcile could start; not reconciled", { key: h.key });
      else if (releaseKey === undefined) {
        this.worker.log.info("lease lost while it waited for the earlier reconcile of its key; not reconciled", { key: h.key });
      }
      h.lose("expired");
      this.worker.release(this);
      this.finishLost(h);
      this.forget(h);
      return;
    }
    let outcome: Outcome;
    try {
      outcome = { ok: true, result: await this.worker.reconcile(req) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    releaseKey();
    this.worker.release(this);
    this.finish(h, outcome);
    this.forget(h);
  }

  private finish(h: Held, o: Outcome): void {
    if (!h.lost && leaseExpired(h.deadline, Date.now())) {
      // Returned after the deadline, before its timer saw it pass: lost here, and logged here,
      // as every loss is, once.
      this.worker.log.warn("lease lost: its deadline passed before its reconcile returned; result discarded", {
        key: h.key,
        why: "expired",
      });
      h.lose("expired");
    }
    if (!h.lost && !o.ok && endedDuringWrite(o.error)) {
      // A write under the lease was made, but the sidecar ended the lease
      // before the API server answered (its Cancel may not be here yet): the
      // lease is lost. Its outcome is not sent (the sidecar would refuse it
      // as stale, a warning); the lost lease's Finish is.
      this.worker.log.warn("lease lost: a write under it ended with it; result discarded", {
        queue: this.worker.queue,
        key: h.key,
        why: "lease ended during write",
      });
      h.lose("lease ended during write");
    }
    if (h.lost) {
      // Debug: the loss was a warning when it happened; this is the same lease again.
      this.worker.log.debug("reconcile returned after its lease was lost; result discarded", { key: h.key });
      this.finishLost(h);
      return;
    }
    const finish: WorkRequest_Finish = { key: h.key, token: h.token, outcome: undefined };
    if (!o.ok) {
      const message = o.error instanceof Error ? o.error.message : String(o.error);
      this.worker.log.error("reconcile failed", { key: h.key, err: logLine(message) });
      finish.outcome = { $case: "retry", value: { error: message } };
    } else if (o.result && o.result.requeueAfter !== undefined && o.result.requeueAfter !== 0) {
      const after = o.result.requeueAfter;
      if (Number.isFinite(after) && after > 0) {
        finish.outcome = { $case: "requeueAfter", value: { delay: toDuration(after) } };
      } else {
        const message = `reconcile returned requeueAfter ${after}; it must be a positive number of milliseconds`;
        this.worker.log.error("reconcile failed", { key: h.key, err: message });
        finish.outcome = { $case: "retry", value: { error: message } };
      }
    } else {
      finish.outcome = { $case: "success", value: {} };
    }
    if (!this.send({ kind: { $case: "finish", value: finish } })) {
      this.worker.log.warn("finish not sent (the stream is closed); the key goes back to the queue", { key: h.key });
    }
  }

  /**
   * Answers a lease that ended without this worker with a Finish all the
   * same: the sidecar refuses it (FAILED_PRECONDITION, nothing changes) and
   * gives the lease's credit back. Every lease gets exactly one Finish.
   */
  private finishLost(h: Held): void {
    const sent = this.send({
      kind: {
        $case: "finish",
        value: { key: h.key, token: h.token, outcome: { $case: "retry", value: { error: "lease lost before the worker finished" } } },
      },
    });
    if (sent) {
      this.lostFinishes.add(h.token, Date.now());
      this.forgetUnanswered();
    }
  }

  /** Arms the one timer that drops lost leases' Finishes left unanswered a TTL, if one is due. */
  private forgetUnanswered(): void {
    if (this.forgetTimer !== undefined || this.closed) return;
    const at = this.lostFinishes.nextExpiry();
    if (at === undefined) return;
    this.forgetTimer = setTimeout(() => {
      this.forgetTimer = undefined;
      this.lostFinishes.prune(Date.now());
      this.forgetUnanswered();
    }, Math.max(0, at - Date.now()));
    this.forgetTimer.unref();
  }

  private forget(h: Held): void {
    h.stopTimers();
    this.leases.delete(h.token);
    if (this.leases.size === 0) this.idle?.();
  }

  credit(n: number): void {
    this.send({ kind: { $case: "credit", value: { credits: n } } });
  }

  /** Sends unless the stream is closed; reports whether it did. */
  private send(req: WorkRequest): boolean {
    if (this.closed) return false;
    this.call.write(req);
    return true;
  }

  private detach(): void {
    if (this.worker.current === this) this.worker.current = undefined;
  }

  /** Ends the call, marking every lease lost (aborting running reconciles); returns how many were held. */
  private end(why: LeaseLostWhy): number {
    this.detach();
    this.closed = true;
    clearTimeout(this.forgetTimer);
    const n = this.leases.size;
    for (const h of [...this.leases.values()]) h.lose(why);
    this.call.cancel();
    return n;
  }

  /**
   * The graceful end: take no new lease, wait (bounded) for running
   * reconciles and their Finishes, half-close, wait for the sidecar to end
   * the stream.
   */
  private async stop(): Promise<void> {
    const log = this.worker.log;
    this.detach();
    this.stopping = true;
    let waiting = 0;
    for (const h of [...this.leases.values()]) {
      if (!h.started) {
        this.worker.unqueue(h); // never started; goes back when the stream closes
        this.forget(h);
      } else if (h.waitingForKey) {
        h.keyWait.abort(); // never started either: start() gives its slot back and forgets it
        waiting++;
      }
    }
    const timeoutMs = this.worker.stopTimeout;
    log.info("stopping: no new keys; waiting for running reconciles", { running: this.leases.size - waiting, timeoutMs });
    const idle = new Promise<"idle">((resolve) => {
      this.idle = () => resolve("idle");
      if (this.leases.size === 0) resolve("idle");
    });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
    const first = await Promise.race([idle, timeout, this.done.then(() => "broke" as const)]);
    clearTimeout(timer);
    if (first === "broke") {
      const n = this.end("stream broke");
      if (n > 0) log.warn("work stream broke while stopping; leases returned to the queue", { leases: n });
      return;
    }
    if (first === "timeout") {
      const left = this.leases.size;
      for (const h of [...this.leases.values()]) h.lose("stop timeout");
      log.warn("stop timeout: aborting running reconciles; their keys go back to the queue", { leases: left });
    }
    this.closed = true;
    this.call.end(); // half-close: the sidecar returns what is still held and ends the stream
    let closeTimer: NodeJS.Timeout | undefined;
    const waited = await Promise.race([
      this.done.then(() => true),
      new Promise<false>((resolve) => (closeTimer = setTimeout(() => resolve(false), CLOSE_TIMEOUT_MS))),
    ]);
    clearTimeout(closeTimer);
    if (!waited) log.warn("the sidecar did not end the work stream after the worker closed it", { waitedMs: CLOSE_TIMEOUT_MS });
    this.end("stop timeout");
    log.info("stopped", { queue: this.worker.queue });
  }
}
