// Queue.run against the real sidecar: conformance scenarios C1-C9 of
// clients/CONFORMANCE.md.
import assert from "node:assert/strict";
import { test } from "node:test";

import { credentials } from "@grpc/grpc-js";

import { WorkQueueServiceClient, type WorkResponse } from "../src/gen/workqueue/v1/workqueue.js";
import { LeaseLostError, StopRequestedError, type Client, type Reconcile, type Request, type Result, type RunOptions } from "../src/index.js";
import { MAX_LOGGED_ERROR_CHARS } from "../src/log.js";
import { Session } from "../src/session.js";
import { blockFor, eventually, Fixture, gate, RecordingLogger, sleep } from "./sidecar.js";

/** One reconcile call: its request, when it ran, and why its signal aborted (if it did). */
interface Attempt {
  req: Request;
  start: number;
  end?: number;
  abortReason?: unknown;
}

/** Records every reconcile; behave decides each call's outcome from the key's attempt number. */
class Recorder {
  readonly attempts: Attempt[] = [];
  running = 0;
  maxRunning = 0;

  constructor(private readonly behave: (req: Request, n: number) => Promise<Result | void> | Result | void = () => {}) {}

  of(key: string): Attempt[] {
    return this.attempts.filter((a) => a.req.key === key);
  }

  readonly reconcile: Reconcile = async (req) => {
    const a: Attempt = { req, start: Date.now() };
    const n = this.of(req.key).length;
    this.attempts.push(a);
    req.signal.addEventListener("abort", () => (a.abortReason = req.signal.reason), { once: true });
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      return await this.behave(req, n);
    } finally {
      this.running--;
      a.end = Date.now();
    }
  };
}

/** Runs the worker in the background until the test ends (or stop() is called). */
function runWorker(f: Fixture, client: Client, queue: string, r: Reconcile, options: RunOptions = {}): { stop(): Promise<void>; done: Promise<void> } {
  const controller = new AbortController();
  const done = client.queue(queue).run(r, { stopTimeout: 10_000, ...options, signal: controller.signal });
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (!stopped) {
      stopped = true;
      controller.abort();
    }
    await done;
  };
  f.defer(stop);
  return { stop, done };
}

/** Resolves when signal aborts. */
function aborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

const FAST_BACKOFF = `
queues:
  default:
    rate_limiter:
      exponential: { base: 200ms, max: 10s }
`;
const SHORT_LEASES = `
queues:
  default:
    lease_ttl: 1s
`;

test("C1 success forgets: a key that failed once and then succeeds has no requeues and is absent", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar({ config: FAST_BACKOFF })).target);
  const q = client.queue("default");
  const rec = new Recorder((_req, n) => {
    if (n === 0) throw new Error("first attempt fails");
  });
  runWorker(f, client, "default", rec.reconcile);
  await q.add("ns/a");
  await eventually("the second attempt to finish", () => rec.of("ns/a")[1]?.end !== undefined);
  await eventually("the key to be absent", async () => (await q.keyState("ns/a")).state === "ABSENT");
  assert.equal(await q.numRequeues("ns/a"), 0);
  assert.equal(rec.of("ns/a")[1]!.req.failures, 1);
});

test("C2 an error retries with backoff: failures grow, last_error holds the message, after the base delay", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar({ config: FAST_BACKOFF })).target);
  const q = client.queue("default");
  const rec = new Recorder((_req, n) => {
    if (n < 2) throw new Error(`attempt ${n} failed`);
  });
  runWorker(f, client, "default", rec.reconcile);
  await q.add("ns/flaky");
  await eventually("the third attempt to finish", () => rec.of("ns/flaky")[2]?.end !== undefined, 15_000);
  const attempts = rec.of("ns/flaky");
  for (const [i, a] of attempts.entries()) {
    assert.equal(a.req.failures, i, `attempt ${i}: failures`);
    if (i === 0) continue;
    assert.equal(a.req.lastError, `attempt ${i - 1} failed`);
    assert.ok(a.req.has("RETRY"), `attempt ${i}: reasons ${JSON.stringify(a.req.reasons)} lack RETRY`);
    // base * 2^(failures before this one): 200 ms, 400 ms; a lower bound only.
    const backoff = 200 * 2 ** (i - 1);
    const gap = a.start - attempts[i - 1]!.end!;
    assert.ok(gap >= backoff * 0.9, `attempt ${i} came ${gap} ms after the previous failure; backoff is ${backoff} ms`);
  }
  await eventually("the failures to be forgotten", async () => (await q.numRequeues("ns/flaky")) === 0);
});

test("a reconcile's failure is logged as one line of bounded length; the key's last error keeps more", async (t) => {
  const f = new Fixture(t);
  const log = new RecordingLogger();
  const client = await f.client((await f.sidecar({ config: FAST_BACKOFF })).target, log);
  const q = client.queue("default");
  // 100,000 characters over 2,000 lines, as a dumped response body or a stack would be.
  const huge = Array.from({ length: 2_000 }, (_, i) => `line ${i} of a very long error: ${"x".repeat(40)}`).join("\n");
  const rec = new Recorder((_req, n) => {
    if (n === 0) throw new Error(huge);
  });
  runWorker(f, client, "default", rec.reconcile);
  await q.add("ns/loud");
  await eventually("the retry to finish", () => rec.of("ns/loud")[1]?.end !== undefined, 15_000);
  const failures = log.lines.filter((l) => l.message === "reconcile failed" && l.fields?.["key"] === "ns/loud");
  assert.equal(failures.length, 1);
  const logged = String(failures[0]!.fields?.["err"]);
  assert.ok(logged.length <= MAX_LOGGED_ERROR_CHARS + 40, `${logged.length} characters logged for one failure`);
  assert.ok(!/[\r\n]/.test(logged), "the logged error spans several lines");
  assert.ok(logged.startsWith("line 0 of a very long error"), logged.slice(0, 80));
  assert.match(logged, /more characters\)$/);
  assert.ok(rec.of("ns/loud")[1]!.req.lastError.startsWith("line 0 of a very long error: x"));
});

test("C3 requeue after: the key waits about the delay, comes back after it with no failures", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const delay = 1_000;
  const rec = new Recorder((_req, n) => (n === 0 ? { requeueAfter: delay } : undefined));
  runWorker(f, client, "default", rec.reconcile);
  await q.add("poll");
  await eventually("the first attempt to finish", () => rec.of("poll")[0]?.end !== undefined);
  const finished = rec.of("poll")[0]!.end!;
  await eventually("the key to wait", async () => (await q.keyState("poll")).state === "WAITING" || rec.of("poll").length > 1);
  if (rec.of("poll").length === 1) {
    const st = await q.keyState("poll");
    if (st.state === "WAITING") {
      const ahead = st.waitingUntil!.getTime() - finished;
      assert.ok(ahead > delay * 0.5 && ahead <= delay + 2_000, `waiting until ${ahead} ms after the finish; asked for ${delay} ms`);
    }
  }
  await eventually("the second attempt to finish", () => rec.of("poll")[1]?.end !== undefined);
  const [first, second] = rec.of("poll");
  assert.ok(second!.start - first!.end! >= delay * 0.9, `second attempt ${second!.start - first!.end!} ms after the first; asked for ${delay} ms`);
  assert.equal(second!.req.failures, 0);
  assert.ok(second!.req.has("REQUEUE_AFTER"));
});

test("C4 a slow reconcile keeps its lease: three and a half TTLs, never handed to anyone else", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar({ config: SHORT_LEASES })).target);
  const q = client.queue("default");
  const rec = new Recorder(async (req) => {
    await Promise.race([sleep(3_500), aborted(req.signal)]);
    if (req.signal.aborted) throw req.signal.reason;
  });
  // A window of 2: an expired lease's key would come straight back to this worker.
  runWorker(f, client, "default", rec.reconcile, { concurrency: 2 });
  await q.add("slow");
  await eventually("the reconcile to start", () => rec.of("slow").length === 1);
  await sleep(2_500);
  const st = await q.keyState("slow");
  assert.equal(st.state, "HELD");
  assert.ok(st.heldUntil!.getTime() > Date.now() - 1_000, "the lease's deadline moved with the extends");
  await eventually("the slow reconcile to finish", async () => (await q.keyState("slow")).state === "ABSENT", 15_000);
  assert.equal(rec.of("slow").length, 1, "the lease must not expire");
  assert.equal(rec.of("slow")[0]!.abortReason, undefined);
  assert.equal(await q.numRequeues("slow"), 0);
});

test("C5 a lost lease cancels its reconcile: a lease past its deadline aborts with LeaseLostError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar({ config: SHORT_LEASES })).target);
  const q = client.queue("default");
  const rec = new Recorder(async (req, n) => {
    if (n > 0) return;
    blockFor(1_600); // a stalled process: no extend goes out, the lease expires
    await aborted(req.signal);
    throw req.signal.reason;
  });
  runWorker(f, client, "default", rec.reconcile, { concurrency: 2 });
  await q.add("ns/a");
  await eventually("the key to come back", () => rec.of("ns/a").length === 2);
  await eventually("the first attempt to end", () => rec.of("ns/a")[0]!.end !== undefined);
  const reason = rec.of("ns/a")[0]!.abortReason;
  assert.ok(reason instanceof LeaseLostError, `abort reason ${String(reason)}`);
  assert.ok(reason.why === "expired" || reason.why === "revoked", reason.why);
  const second = rec.of("ns/a")[1]!;
  assert.ok(second.req.has("LEASE_EXPIRED"), JSON.stringify(second.req.reasons));
  assert.equal(second.req.failures, 1);
});

test("C5 a lost lease cancels its reconcile: a queue shut down without drain aborts with StopRequestedError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const rec = new Recorder(async (req) => {
    await aborted(req.signal);
    throw new Error("stopped: " + String(req.signal.reason));
  });
  // A shut-down queue ends the stream with UNAVAILABLE; the worker backs off, retrying.
  runWorker(f, client, "default", rec.reconcile, { reconnectBackoff: { initial: 100, max: 1_000 } });
  await q.add("ns/a");
  await eventually("the reconcile to start", () => rec.of("ns/a").length === 1);
  await q.shutDown();
  await eventually("the reconcile to be aborted", () => rec.of("ns/a")[0]!.end !== undefined);
  const reason = rec.of("ns/a")[0]!.abortReason;
  assert.ok(reason instanceof StopRequestedError, `abort reason ${String(reason)}`);
  // The lease was still valid: the worker's retry counted.
  await eventually("the retry to be applied", async () => (await q.keyState("ns/a")).failures === 1);
});

test("C5 a lease lost after a stop request aborts req.leaseLost with LeaseLostError; req.signal keeps StopRequestedError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar({ config: SHORT_LEASES })).target);
  const q = client.queue("default");
  let stopReason: unknown;
  let lostReason: unknown;
  const rec = new Recorder(async (req, n) => {
    if (n > 0) return;
    await aborted(req.signal);
    stopReason = req.signal.reason;
    blockFor(1_600); // a stalled process: no extend goes out, the lease (TTL 1 s) is lost
    await Promise.race([aborted(req.leaseLost), sleep(15_000)]);
    lostReason = req.leaseLost.reason;
  });
  runWorker(f, client, "default", rec.reconcile, { reconnectBackoff: { initial: 100, max: 1_000 } });
  await q.add("ns/a");
  await eventually("the reconcile to start", () => rec.of("ns/a").length === 1);
  await q.shutDown();
  await eventually("the reconcile to end", () => rec.of("ns/a")[0]!.end !== undefined, 20_000);
  assert.ok(stopReason instanceof StopRequestedError, `req.signal's reason ${String(stopReason)}`);
  assert.ok(lostReason instanceof LeaseLostError, `req.leaseLost's reason ${String(lostReason)}; the loss was not told`);
  assert.ok(rec.of("ns/a")[0]!.abortReason instanceof StopRequestedError, "req.signal aborts once, with the first reason");
});

test("C6 nothing past the deadline: a lease past its deadline is never started, a late result is discarded", async (t) => {
  const f = new Fixture(t);
  const log = new RecordingLogger();
  const logged = await f.client((await f.sidecar({ config: SHORT_LEASES })).target, log);
  const q = logged.queue("default");
  let first: string | undefined;
  const rec = new Recorder((req) => {
    if (first === undefined) {
      first = req.key;
      // Stalls past the TTL and then succeeds: the other key's lease arrives
      // meanwhile and is read only after its deadline.
      blockFor(1_600);
    }
  });
  await q.add("a", "b");
  runWorker(f, logged, "default", rec.reconcile, { concurrency: 2 });
  await eventually("the first attempt", () => first !== undefined);
  const other = first === "a" ? "b" : "a";
  await eventually("both keys to be reconciled and absent", async () => {
    const [sa, sb] = await Promise.all([q.keyState("a"), q.keyState("b")]);
    return sa.state === "ABSENT" && sb.state === "ABSENT";
  }, 15_000);
  // The stalled reconcile's success was discarded: the key came back as expired.
  assert.ok(log.has("result discarded", first), "the late result was not discarded");
  const again = rec.of(first!)[1];
  assert.ok(again !== undefined && again.req.has("LEASE_EXPIRED"), "the stalled key was not handed out again");
  // The other key's first lease was never started: its first reconcile is a later lease.
  assert.ok(log.has("lease expired before its reconcile could start", other), "the expired lease was started");
  const otherFirst = rec.of(other)[0]!;
  assert.ok(otherFirst.req.has("LEASE_EXPIRED"), `other key first reconciled with ${JSON.stringify(otherFirst.req.reasons)}`);
});

test("one key is never reconciled twice at once in a process: a lease for a key whose lost reconcile still runs waits for it", async (t) => {
  const f = new Fixture(t);
  const sidecar = await f.sidecar({ config: SHORT_LEASES });
  const client = await f.client(sidecar.target);
  const q = client.queue("default");
  const rec = new Recorder(async (_req, n) => {
    if (n === 0) await sleep(3_500); // ignores req.signal, lease lost or not
  });
  await q.add("a");
  // A window of 2: the key, once expired, comes back to this worker's free slot.
  runWorker(f, client, "default", rec.reconcile, { concurrency: 2 });
  await eventually("the first reconcile to start", () => rec.of("a").length === 1);
  // The sidecar stalls past the lease (TTL 1 s): the worker loses it, the
  // sidecar expires it once it runs again and hands the key out again while
  // the first reconcile still runs.
  sidecar.process.kill("SIGSTOP");
  try {
    await sleep(2_000);
  } finally {
    sidecar.process.kill("SIGCONT");
  }
  const returned = (): boolean => rec.of("a").length >= 2 && rec.of("a").every((a) => a.end !== undefined);
  await eventually("the key to be reconciled again, and both reconciles to return", returned, 20_000);
  const [first, second] = rec.of("a");
  assert.ok(first!.abortReason instanceof LeaseLostError, `the first lease was not lost: ${String(first!.abortReason)}`);
  assert.ok(
    second!.start >= first!.end!,
    `a's second reconcile started ${first!.end! - second!.start} ms before its first returned`,
  );
});

test("C7 graceful stop: the running reconcile finishes and counts, unstarted keys go back at once with no failure", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const { opened: released, open: release } = gate();
  const rec = new Recorder(async (req) => {
    await released;
    if (req.signal.aborted) throw new Error("aborted");
  });
  // Two slots: the second one's credit brings a lease the stopping worker never starts.
  const w = runWorker(f, client, "default", rec.reconcile, { concurrency: 2 });
  await q.add("first");
  await eventually("the reconcile to start", () => rec.attempts.length === 1);
  const stopped = w.stop();
  await q.add("second");
  await eventually("the stopping worker to hold the second key", async () => (await q.keyState("second")).state === "HELD");
  release();
  await stopped;
  assert.equal(rec.attempts.length, 1, "a key started after the stop");
  assert.equal(rec.attempts[0]!.abortReason, undefined);
  const [first, second] = await Promise.all([q.keyState("first"), q.keyState("second")]);
  assert.equal(first.state, "ABSENT", "the running reconcile's success counted");
  assert.equal(await q.numRequeues("first"), 0);
  assert.notEqual(second.state, "HELD", "a key not started is back in the queue");
  // Given back, not failed: a clean stop charges the keys it never started nothing.
  assert.equal(second.failures, 0, `the key never started counts a failure (${second.lastError})`);
});

test("C7 graceful stop: a reconcile past the stop timeout is aborted as lost and its key goes back", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const rec = new Recorder(async (req) => {
    await aborted(req.signal);
    throw req.signal.reason;
  });
  const w = runWorker(f, client, "default", rec.reconcile, { stopTimeout: 300 });
  await q.add("stuck");
  await eventually("the reconcile to start", () => rec.attempts.length === 1);
  await w.stop();
  await eventually("the reconcile to end", () => rec.attempts[0]!.end !== undefined);
  const reason = rec.attempts[0]!.abortReason;
  assert.ok(reason instanceof LeaseLostError && reason.why === "stop timeout", String(reason));
  assert.notEqual((await q.keyState("stuck")).state, "HELD");
});

test("C7 close() stops the client's running workers: run resolves, running reconciles finish, no key is taken after", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const { opened: released, open: release } = gate();
  const rec = new Recorder(async (req) => {
    if (req.key === "running") await released;
  });
  const done = q.run(rec.reconcile, { concurrency: 2 });
  await q.add("running");
  await eventually("the reconcile to start", () => rec.attempts.length === 1);
  client.close();
  release();
  await done;
  assert.equal(rec.attempts.length, 1, "nothing taken after close()");
  assert.notEqual(rec.attempts[0]!.end, undefined, "the running reconcile finished");
});

test("a reconcile that never settles keeps no timer alive once the worker stopped", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const timers = (): number => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const before = timers();
  const rec = new Recorder(() => new Promise<never>(() => {}));
  const w = runWorker(f, client, "default", rec.reconcile, { stopTimeout: 300 });
  await client.queue("default").add("hung");
  await eventually("the reconcile to start", () => rec.attempts.length === 1);
  await w.stop();
  // Past the stop timeout the lease is given up: its extend ticker and
  // expiry timer are gone, so a process told to exit can.
  assert.ok(timers() <= before, `${timers()} timers keep the process alive, ${before} before the worker ran`);
});

test("C8 a broken stream reconnects: the sidecar killed and restarted on the same address", async (t) => {
  const f = new Fixture(t);
  const first = await f.sidecar();
  const client = await f.client(first.target);
  const rec = new Recorder();
  runWorker(f, client, "default", rec.reconcile, { reconnectBackoff: { initial: 50, max: 500 } });
  await client.queue("default").add("before");
  await eventually("the key added before the restart", () => rec.of("before").length === 1);
  await first.stop("SIGKILL");
  await f.sidecar({ tcp: first.address });
  await client.queue("default").add("after");
  await eventually("the key added after the restart", () => rec.of("after").length === 1, 20_000);
});

test("C9 the concurrency limit holds: never more than n at once, every key reconciled", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  const rec = new Recorder(() => sleep(50));
  const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
  await q.add(...keys);
  runWorker(f, client, "default", rec.reconcile, { concurrency: 3 });
  await eventually("every key to be reconciled", () => keys.every((k) => rec.of(k).some((a) => a.end !== undefined)), 20_000);
  assert.ok(rec.maxRunning <= 3, `${rec.maxRunning} reconciles ran at once`);
  assert.ok(rec.maxRunning >= 2, `only ${rec.maxRunning} ran at once; the window was not used`);
});

test("only a refused Finish is answered, and it is still logged: a lease ended by a unary Done", async (t) => {
  const f = new Fixture(t);
  const sidecar = await f.sidecar();
  const log = new RecordingLogger();
  const client = await f.client(sidecar.target, log);
  const q = client.queue("default");
  // Every FinishAck the session hears.
  const acks: { key: string; code: number }[] = [];
  const proto = Session.prototype as unknown as { receive(m: WorkResponse): void };
  const receive = proto.receive;
  proto.receive = function (this: Session, m: WorkResponse) {
    if (m.kind?.$case === "finishAck") acks.push({ key: m.kind.value.key, code: m.kind.value.code });
    receive.call(this, m);
  };
  f.defer(() => void (proto.receive = receive));
  // The raw API, to end one lease behind the worker's back: its Finish is then refused (stale token).
  const raw = new WorkQueueServiceClient(sidecar.target, credentials.createInsecure());
  f.defer(() => raw.close());
  const rec = new Recorder(async (req) => {
    if (req.key !== "ns/done-elsewhere") return;
    await new Promise<void>((resolve, reject) =>
      raw.done({ queue: "default", key: req.key, token: req.token }, (err) => (err ? reject(err) : resolve())),
    );
  });
  await q.add("ns/a", "ns/b", "ns/done-elsewhere", "ns/c");
  runWorker(f, client, "default", rec.reconcile);
  await eventually("every key reconciled and the refusal heard", () => rec.attempts.filter((a) => a.end).length === 4 && acks.length >= 1);
  for (const key of ["ns/a", "ns/b", "ns/c"]) await eventually(`${key} absent`, async () => (await q.keyState(key)).state === "ABSENT");
  await sleep(200); // an answer to an applied Finish would have come by now
  assert.deepEqual(acks, [{ key: "ns/done-elsewhere", code: 9 }]);
  assert.ok(log.lines.some((l) => l.message === "work stream open" && l.fields?.["ackFailuresOnly"] === true), "Opened did not say only failures are answered");
  assert.ok(log.has("the sidecar refused a finish", "ns/done-elsewhere"), "the refused Finish was not warned of");
});
