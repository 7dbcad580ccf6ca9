// Queue calls against the real sidecar, and C10 (typed errors).
import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";

import { InvalidArgumentError, NotFoundError, Status, UnavailableError, WorkqueueError } from "../src/index.js";
import { Fixture } from "./sidecar.js";

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
