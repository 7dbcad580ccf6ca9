// Queue calls against the real sidecar, and C10 (typed errors).
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import {
  CancelledError,
  connect,
  DEFAULT_CALL_TIMEOUT_MS,
  DeadlineExceededError,
  InvalidArgumentError,
  NotFoundError,
  Status,
  UnavailableError,
  WorkqueueError,
  type Client,
  type ConnectOptions,
} from "../src/index.js";
import { eventually, Fixture, gate, sleep } from "./sidecar.js";

/** A client with options of its own, closed when the test ends. */
async function clientWith(f: Fixture, target: string, options: ConnectOptions): Promise<Client> {
  const c = await connect(target, { workerName: "node-test", ...options });
  f.defer(() => c.close());
  return c;
}

/** What a call settled with, or "hung" when it had not after ms: a missing deadline fails the test instead of hanging it. */
async function settled<T>(call: Promise<T>, ms = 20_000): Promise<{ value: T } | { error: unknown } | "hung"> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<"hung">((resolve) => (timer = setTimeout(() => resolve("hung"), ms)));
  try {
    return await Promise.race([call.then((value) => ({ value }), (error: unknown) => ({ error })), hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** Asserts that outcome is a rejection with Class carrying code. */
function assertFailed(outcome: Awaited<ReturnType<typeof settled>>, Class: typeof WorkqueueError, code: Status, what: string): void {
  assert.notEqual(outcome, "hung", `${what}: still waiting after 20 s on a stopped sidecar`);
  assert.ok(typeof outcome === "object" && "error" in outcome, `${what}: resolved`);
  const err = outcome.error;
  assert.ok(err instanceof Class, `${what}: ${String(err)}`);
  assert.equal(err.code, code, `${what}: ${String(err)}`);
}

test("C10 typed errors: an unknown queue fails run and a queue call with NotFoundError; an empty key with InvalidArgumentError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const nope = client.queue("nope");
  await assert.rejects(nope.add("x"), (err: unknown) => {
    assert.ok(err instanceof NotFoundError, String(err));
    assert.ok(err instanceof WorkqueueError);
    assert.equal(err.code, Status.NOT_FOUND);
    assert.match(err.message, /queue "nope"/);
    return true;
  });
  await assert.rejects(nope.run(() => {}, { signal: AbortSignal.timeout(20_000) }), (err: unknown) => {
    assert.ok(err instanceof NotFoundError, String(err));
    assert.equal(err.code, Status.NOT_FOUND);
    return true;
  });
  await assert.rejects(client.queue("default").add(""), (err: unknown) => {
    assert.ok(err instanceof InvalidArgumentError, String(err));
    assert.equal(err.code, Status.INVALID_ARGUMENT);
    return true;
  });
  await assert.rejects(client.queue("default").keyState(""), InvalidArgumentError);
});

test("queue calls: add, addAfter, addRateLimited, forget, numRequeues, len, keyState", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  await q.add(["ns/a"], { priority: 5, reason: "backfill" });
  await q.add("ns/b");
  await q.addAfter(60_000, "ns/later");
  const limited = await q.addRateLimited("ns/c");
  assert.equal(limited.length, 1);
  assert.equal(limited[0]!.key, "ns/c");
  assert.equal(limited[0]!.failures, 1);
  assert.ok(limited[0]!.delay >= 0);
  assert.equal(await q.numRequeues("ns/c"), 1);
  await q.forget("ns/c");
  assert.equal(await q.numRequeues("ns/c"), 0);

  const len = await q.len();
  assert.ok(len.ready >= 2, JSON.stringify(len));
  assert.ok(len.waiting >= 1, JSON.stringify(len));
  assert.equal(len.held, 0);
  assert.equal(len.readyByPriority[0]!.priority, 5);

  const a = await q.keyState("ns/a");
  assert.equal(a.state, "QUEUED");
  assert.equal(a.priority, 5);
  assert.deepEqual(a.reasons, [{ kind: "MANUAL", source: "backfill", detail: "" }]);
  assert.ok(a.queuedSince instanceof Date);
  const later = await q.keyState("ns/later");
  assert.equal(later.state, "WAITING");
  assert.ok(later.waitingUntil!.getTime() > Date.now() + 30_000);
  assert.equal((await q.keyState("ns/none")).state, "ABSENT");
});

test("shutDownWithDrain reports, and a shut-down queue refuses adds with UnavailableError", async (t) => {
  const f = new Fixture(t);
  const client = await f.client((await f.sidecar()).target);
  const q = client.queue("default");
  await q.add("ns/a");
  const report = await q.shutDownWithDrain(1_000);
  assert.deepEqual(report, { finished: 0, returned: 0 });
  await assert.rejects(q.add("ns/b"), (err: unknown) => err instanceof UnavailableError && err.code === Status.UNAVAILABLE);
  await q.shutDown(); // again: harmless
});

test("connect over a unix socket (unix:///path)", async (t) => {
  const f = new Fixture(t);
  const sidecar = await f.sidecar({ unix: join(f.dir, "wq.sock") });
  const client = await f.client(`unix://${sidecar.unixPath}`);
  const q = client.queue("default");
  await q.add("over-unix");
  assert.equal((await q.keyState("over-unix")).state, "QUEUED");
});

test("unary calls have a deadline and a signal: on a stopped sidecar they fail with DeadlineExceededError or CancelledError", async (t) => {
  const f = new Fixture(t);
  const sidecar = await f.sidecar();
  const short = await clientWith(f, sidecar.target, { callTimeout: 500 });
  const byDefault = await clientWith(f, sidecar.target, {});
  assert.equal(byDefault.callTimeout, DEFAULT_CALL_TIMEOUT_MS);
  // Both connected before the sidecar stops answering.
  await short.queue("default").add("ns/a");
  await byDefault.queue("default").add("ns/b");
  // SIGSTOP: the connection stays open, nothing answers (a hung process, a frozen node).
  sidecar.process.kill("SIGSTOP");
  f.defer(() => void sidecar.process.kill("SIGCONT"));

  assertFailed(await settled(short.queue("default").keyState("ns/a")), DeadlineExceededError, Status.DEADLINE_EXCEEDED, "the client's callTimeout");
  assertFailed(
    await settled(byDefault.queue("default").len({ timeout: 300 })),
    DeadlineExceededError,
    Status.DEADLINE_EXCEEDED,
    "a call's own timeout over the 30 s default",
  );
  const controller = new AbortController();
  const call = settled(byDefault.queue("default").add(["ns/c"], { signal: controller.signal }));
  await sleep(200); // the call is on the wire
  controller.abort(new Error("the caller gave up"));
  assertFailed(await call, CancelledError, Status.CANCELLED, "an aborted signal");
  assertFailed(
    await settled(byDefault.queue("default").forget("ns/a", { signal: AbortSignal.abort() })),
    CancelledError,
    Status.CANCELLED,
    "a signal aborted before the call",
  );
});

/** Runs a worker whose reconcile holds its lease until the test ends (a drain waits its whole timeout); resolves once it holds one. */
async function holdOneKey(f: Fixture, client: Client): Promise<void> {
  const q = client.queue("default");
  const { opened: released, open: release } = gate();
  let started = false;
  const stop = new AbortController();
  const done = q.run(
    async () => {
      started = true;
      await released;
    },
    { signal: stop.signal, stopTimeout: 1_000 },
  );
  f.defer(async () => {
    release();
    stop.abort();
    await done;
  });
  await q.add("ns/held");
  await eventually("the reconcile to start", () => started);
}

test("a drain's wait comes on top of the call timeout: the call outlives callTimeout while the sidecar drains", async (t) => {
  const f = new Fixture(t);
  const client = await clientWith(f, (await f.sidecar()).target, { callTimeout: 2_000 });
  await holdOneKey(f, client);
  const q = client.queue("default");
  const outcome = await settled(q.shutDownWithDrain(3_000));
  assert.ok(outcome !== "hung" && "value" in outcome, `the drain failed: ${String(outcome !== "hung" && "error" in outcome ? outcome.error : outcome)}`);
  assert.equal(outcome.value.finished + outcome.value.returned, 1, JSON.stringify(outcome.value));
});

test("a drain without a timeout is bounded by the call's own timeout, and past it fails with DeadlineExceededError", async (t) => {
  const f = new Fixture(t);
  const client = await clientWith(f, (await f.sidecar({ args: ["--grace-period", "60s"] })).target, { callTimeout: 500 });
  await holdOneKey(f, client);
  // The sidecar's wait is 60 s, unknown to the client: its own 500 ms would cut
  // the drain short, so only the call's timeout bounds it. The sidecar ends a
  // call past its deadline with CANCELLED; the client says what it is.
  assertFailed(
    await settled(client.queue("default").shutDownWithDrain(undefined, { timeout: 1_000 })),
    DeadlineExceededError,
    Status.DEADLINE_EXCEEDED,
    "a drain with a call timeout",
  );
});
