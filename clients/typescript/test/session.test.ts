// The Work stream's session driven directly, over a fake call (no sidecar):
// what it asks for in Open, what it makes of Opened.ackFailuresOnly, and a
// lease whose key's earlier reconcile still runs.
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { test } from "node:test";

import { status, type ClientDuplexStream } from "@grpc/grpc-js";

import { LeaseEndedDuringWriteError, LeaseLostError } from "../src/errors.js";
import { Lease, type WorkRequest, type WorkRequest_Finish, type WorkResponse } from "../src/gen/workqueue/v1/workqueue.js";
import { LostFinishes } from "../src/lost-finishes.js";
import type { Request } from "../src/request.js";
import { Session } from "../src/session.js";
import { toDuration } from "../src/time.js";
import { Worker } from "../src/worker.js";
import { blockFor, eventually, gate, RecordingLogger, sleep } from "./sidecar.js";

/** A Work call that records what is written and hands the session what a test sends. */
class FakeCall extends EventEmitter {
  readonly written: WorkRequest[] = [];
  write(req: WorkRequest): boolean {
    this.written.push(req);
    return true;
  }
  cancel(): void {
    this.emit("status", { code: 1, details: "cancelled", metadata: undefined });
  }
  end(): void {
    this.emit("status", { code: 0, details: "", metadata: undefined });
  }
  receive(m: WorkResponse): void {
    this.emit("data", m);
  }
}

/** What a Session reads of its Worker. */
function fakeWorker(log: RecordingLogger): Worker {
  const w = { queue: "q", workerName: "test", concurrency: 1, options: {}, log, current: undefined, freeSlots: () => 1 };
  return w as unknown as Worker;
}

/** Opens a session whose sidecar answers Open with ackFailuresOnly and a lease TTL of ttlMs. */
async function opened(ackFailuresOnly: boolean, ttlMs: number): Promise<{ session: Session; call: FakeCall; log: RecordingLogger }> {
  const call = new FakeCall();
  const log = new RecordingLogger();
  const session = new Session(fakeWorker(log), call as unknown as ClientDuplexStream<WorkRequest, WorkResponse>);
  const open = session.open(new AbortController().signal);
  call.receive({ kind: { $case: "opened", value: { leaseTtl: toDuration(ttlMs), maxCredits: 100, credits: 1, ackFailuresOnly } } });
  await open;
  return { session, call, log };
}

/** The session's private parts a test reads. */
interface Inside {
  lostFinishes: LostFinishes;
  finishLost(h: { key: string; token: bigint }): void;
}

test("a session opens its stream asking that only failed Finishes be answered", async () => {
  const { call } = await opened(true, 30_000);
  const open = call.written[0]?.kind;
  assert.equal(open?.$case, "open");
  assert.equal(open.value.ackFailuresOnly, true);
});

test("a lost lease's Finish left unanswered is forgotten a TTL after it went out, when only failures are answered", async () => {
  const { session, call, log } = await opened(true, 50);
  const inside = session as unknown as Inside;
  assert.equal(inside.lostFinishes.forgetAfter, 50);
  assert.ok(log.has("work stream open"));
  inside.finishLost({ key: "ns/lost", token: 7n });
  assert.equal(call.written[1]?.kind?.$case, "finish");
  assert.ok(inside.lostFinishes.has(7n));
  await sleep(150);
  assert.equal(inside.lostFinishes.size, 0, "the unanswered token is still awaited three TTLs later");
  call.cancel();
});

test("a sidecar that answers every Finish (older than ackFailuresOnly) keeps a lost lease's token until its refusal", async () => {
  const { session, call, log } = await opened(false, 50);
  const inside = session as unknown as Inside;
  assert.equal(inside.lostFinishes.forgetAfter, undefined);
  inside.finishLost({ key: "ns/lost", token: 7n });
  await sleep(150);
  assert.ok(inside.lostFinishes.has(7n), "the token was dropped before its refusal came");
  call.receive({ kind: { $case: "finishAck", value: { key: "ns/lost", token: 7n, code: 9, message: "stale" } } });
  call.receive({ kind: { $case: "finishAck", value: { key: "ns/ok", token: 8n, code: 0, message: "" } } });
  assert.equal(inside.lostFinishes.size, 0);
  assert.ok(!log.lines.some((l) => l.level === "warn"), "an expected refusal or an OK answer was warned of");
  call.receive({ kind: { $case: "finishAck", value: { key: "ns/other", token: 9n, code: 9, message: "stale" } } });
  assert.ok(log.has("the sidecar refused a finish", "ns/other"), "an unexpected refusal was not warned of");
  call.cancel();
});

test("LostFinishes drops tokens in the order they went out, once forgetAfter has passed", () => {
  const lost = new LostFinishes();
  lost.add(1n, 1_000);
  lost.add(2n, 2_000);
  lost.prune(1_000_000);
  assert.equal(lost.size, 2, "without forgetAfter nothing is dropped");
  lost.forgetAfter = 1_500;
  assert.equal(lost.nextExpiry(), 2_500);
  lost.prune(3_499);
  assert.ok(!lost.has(1n) && lost.has(2n));
  assert.equal(lost.nextExpiry(), 3_500);
  assert.ok(lost.answered(2n) && !lost.answered(2n));
  assert.equal(lost.nextExpiry(), undefined);
});

test("a lease for a key whose lost reconcile still runs waits in its slot, and is never started if lost meanwhile", async () => {
  const call = new FakeCall();
  const log = new RecordingLogger();
  const started: bigint[] = [];
  const { opened: released, open: release } = gate();
  const reconcile = async (req: { token: bigint }): Promise<void> => {
    started.push(req.token);
    if (req.token === 1n) await released; // ignores its signal
  };
  // No client: a Session reaches the sidecar only through its call.
  const worker = new Worker(undefined as never, "q", "test", reconcile, { concurrency: 3 }, log);
  const session = new Session(worker, call as unknown as ClientDuplexStream<WorkRequest, WorkResponse>);
  const open = session.open(new AbortController().signal);
  call.receive({ kind: { $case: "opened", value: { leaseTtl: toDuration(30_000), maxCredits: 100, credits: 3, ackFailuresOnly: true } } });
  await open;
  const lease = (token: bigint): void =>
    call.receive({ kind: { $case: "lease", value: Lease.fromPartial({ key: "a", token, ttl: toDuration(30_000) }) } });
  const revoke = (token: bigint): void =>
    call.receive({ kind: { $case: "cancel", value: { key: "a", token, revoked: true, message: "expired" } } });
  const finishes = (): { token: bigint; outcome: string | undefined }[] =>
    call.written.flatMap((m) => (m.kind?.$case === "finish" ? [{ token: m.kind.value.token, outcome: m.kind.value.outcome?.$case }] : []));

  lease(1n);
  await eventually("the first reconcile to start", () => started.length === 1);
  revoke(1n); // lost; its reconcile goes on
  lease(2n);
  await eventually("the second lease to wait for the key", () => log.has("waiting for the earlier reconcile", "a"));
  assert.equal(worker.freeSlots(), 1, "the waiting lease does not hold its slot");
  revoke(2n); // lost while it waits
  await eventually("the lost waiting lease to be answered", () => finishes().some((f) => f.token === 2n));
  assert.deepEqual(finishes(), [{ token: 2n, outcome: "retry" }]);
  assert.equal(worker.freeSlots(), 2, "the lost waiting lease kept its slot");
  lease(3n);
  await sleep(50);
  assert.deepEqual(started, [1n], "a lease started while an earlier reconcile of its key ran");
  release();
  await eventually("the third lease to start once the first reconcile returned", () => started.length === 2);
  assert.deepEqual(started, [1n, 3n], "the lease lost while it waited was started");
  await eventually("the third lease to finish", () => finishes().some((f) => f.token === 3n));
  assert.deepEqual(finishes(), [
    { token: 2n, outcome: "retry" },
    { token: 1n, outcome: "retry" },
    { token: 3n, outcome: "success" },
  ]);
  call.cancel();
});

test("leases the sidecar asks back abort their reconcile and are logged at debug, one line each; a revoked one is a lost-lease warning", async () => {
  // A sidecar that stops, or whose shard slots move to another replica (up
  // to 4,096 at once), asks back every lease it holds: never at info.
  const call = new FakeCall();
  const log = new RecordingLogger();
  const signals = new Map<bigint, AbortSignal>();
  const { opened: released, open: release } = gate();
  const reconcile = async (req: { token: bigint; signal: AbortSignal }): Promise<void> => {
    signals.set(req.token, req.signal);
    await released;
  };
  const moved = 16;
  const worker = new Worker(undefined as never, "q", "test", reconcile, { concurrency: moved + 2 }, log);
  const session = new Session(worker, call as unknown as ClientDuplexStream<WorkRequest, WorkResponse>);
  const open = session.open(new AbortController().signal);
  call.receive({ kind: { $case: "opened", value: { leaseTtl: toDuration(30_000), maxCredits: 100, credits: moved + 2, ackFailuresOnly: true } } });
  await open;
  const key = (token: bigint): string => `ns/k${token}`;
  for (let token = 1n; token <= BigInt(moved + 2); token++) {
    call.receive({ kind: { $case: "lease", value: Lease.fromPartial({ key: key(token), token, ttl: toDuration(30_000) }) } });
  }
  await eventually("every reconcile to start", () => signals.size === moved + 2);
  const before = log.lines.length;
  for (let token = 1n; token <= BigInt(moved); token++) {
    call.receive({ kind: { $case: "cancel", value: { key: key(token), token, revoked: false, message: "shard slot moved" } } });
  }
  const extended = BigInt(moved + 1);
  call.receive({
    kind: { $case: "extended", value: { key: key(extended), token: extended, ttl: toDuration(30_000), deadline: undefined, cancel: true, code: 0, message: "" } },
  });
  const asked = log.lines.slice(before);
  assert.equal(asked.length, moved + 1, JSON.stringify(asked));
  asked.forEach((line, i) => {
    const token = BigInt(i + 1);
    assert.equal(line.level, "debug", JSON.stringify(line));
    assert.equal(line.fields?.["key"], key(token));
    assert.equal(signals.get(token)?.reason?.name, "StopRequestedError");
  });

  const revoked = BigInt(moved + 2);
  call.receive({ kind: { $case: "cancel", value: { key: key(revoked), token: revoked, revoked: true, message: "leadership lost" } } });
  const lost = log.lines.slice(before + moved + 1);
  assert.equal(lost.length, 1, JSON.stringify(lost));
  assert.equal(lost[0]?.level, "warn");
  assert.ok(lost[0]?.message.includes("lease lost") && lost[0]?.fields?.["key"] === key(revoked), JSON.stringify(lost));
  assert.equal(signals.get(revoked)?.reason?.name, "LeaseLostError");
  release();
  call.cancel();
});

/**
 * Runs one lease (ns/a, token 1, ttlMs) through a session of a worker with
 * one slot; `meanwhile` runs once the lease is sent. Resolves with the log
 * once the lease is finished.
 */
async function oneLease(
  ttlMs: number,
  reconcile: (req: Request) => Promise<void>,
  meanwhile: (call: FakeCall) => Promise<void> = async () => {},
): Promise<RecordingLogger> {
  const call = new FakeCall();
  const log = new RecordingLogger();
  const worker = new Worker(undefined as never, "q", "test", reconcile, { concurrency: 1 }, log);
  const session = new Session(worker, call as unknown as ClientDuplexStream<WorkRequest, WorkResponse>);
  const open = session.open(new AbortController().signal);
  // The stream's TTL is long: its extends (a third of it) never come during the test.
  call.receive({ kind: { $case: "opened", value: { leaseTtl: toDuration(30_000), maxCredits: 100, credits: 1, ackFailuresOnly: true } } });
  await open;
  call.receive({ kind: { $case: "lease", value: Lease.fromPartial({ key: "ns/a", token: 1n, ttl: toDuration(ttlMs) }) } });
  await meanwhile(call);
  await eventually("the lease to be finished", () => call.written.some((m) => m.kind?.$case === "finish"));
  call.cancel();
  return log;
}

/** One loss is one warning (naming the key and why) when it is seen; the discarded result is a debug line. */
function assertOneLossWarning(log: RecordingLogger, why: string): void {
  const loud = log.lines.filter((l) => l.level !== "debug" && l.fields?.["key"] === "ns/a");
  assert.equal(loud.length, 1, JSON.stringify(loud));
  assert.equal(loud[0]?.level, "warn", JSON.stringify(loud));
  assert.equal(loud[0]?.fields?.["why"], why, JSON.stringify(loud));
  assert.ok(
    log.lines.some((l) => l.level === "debug" && l.message.includes("result discarded") && l.fields?.["key"] === "ns/a"),
    JSON.stringify(log.lines),
  );
}

test("a lease revoked while its reconcile runs is one warning; the reconcile returning after it is logged at debug", async () => {
  const { opened: released, open: release } = gate();
  let started = false;
  const log = await oneLease(
    30_000,
    async () => {
      started = true;
      await released; // ignores its signal, and returns after the loss
    },
    async (call) => {
      await eventually("the reconcile to start", () => started);
      call.receive({ kind: { $case: "cancel", value: { key: "ns/a", token: 1n, revoked: true, message: "leadership lost" } } });
      release();
    },
  );
  assertOneLossWarning(log, "leadership lost");
});

test("a lease whose expiry timer fires while its reconcile runs is one warning; the reconcile returning after it is logged at debug", async () => {
  const log = await oneLease(50, async (req) => {
    await new Promise((resolve) => req.leaseLost.addEventListener("abort", resolve));
  });
  assertOneLossWarning(log, "expired");
});

test("a reconcile that returns past its deadline, before the expiry timer could fire, is one warning; the discard is logged at debug", async () => {
  // The event loop is blocked past the deadline: the timer cannot fire
  // before the result is seen.
  const log = await oneLease(50, async () => blockFor(100));
  assertOneLossWarning(log, "expired");
});

test("a reconcile whose lease ended during a write is finished as lost, with one warning, its signals aborted with why \"lease ended during write\"", async () => {
  // A write under the lease was made, but the sidecar ended the lease before
  // the API server answered (LeaseEndedDuringWriteError, here as the cause of
  // the error thrown, as a reconcile would wrap it): the lease is lost. No
  // outcome is sent (the sidecar would refuse it as stale, a warning), only
  // the lost lease's Finish, whose refusal is expected.
  const call = new FakeCall();
  const log = new RecordingLogger();
  let request: Request | undefined;
  const reconcile = async (req: Request): Promise<void> => {
    request = req;
    const ended = new LeaseEndedDuringWriteError("apply ConfigMap ns/a-child", status.ABORTED, "the write was made, but the lease ended", {
      reason: "LEASE_ENDED_DURING_WRITE",
    });
    throw new Error(`create the child of ${req.key}`, { cause: ended });
  };
  const worker = new Worker(undefined as never, "q", "test", reconcile, { concurrency: 1 }, log);
  const session = new Session(worker, call as unknown as ClientDuplexStream<WorkRequest, WorkResponse>);
  const open = session.open(new AbortController().signal);
  call.receive({ kind: { $case: "opened", value: { leaseTtl: toDuration(30_000), maxCredits: 100, credits: 1, ackFailuresOnly: true } } });
  await open;
  call.receive({ kind: { $case: "lease", value: Lease.fromPartial({ key: "ns/a", token: 7n, ttl: toDuration(30_000) }) } });
  const finishes = (): WorkRequest_Finish[] => call.written.flatMap((m) => (m.kind?.$case === "finish" ? [m.kind.value] : []));
  await eventually("the lease to be finished", () => finishes().length === 1);
  const [finish] = finishes();
  assert.equal(finish?.token, 7n);
  assert.deepEqual(finish?.outcome, { $case: "retry", value: { error: "lease lost before the worker finished" } });
  const loud = log.lines.filter((l) => l.level === "warn" || l.level === "error");
  assert.equal(loud.length, 1, JSON.stringify(loud));
  assert.equal(loud[0]?.level, "warn");
  assert.ok(loud[0]?.message.includes("lease lost"), JSON.stringify(loud));
  assert.deepEqual(loud[0]?.fields, { queue: "q", key: "ns/a", why: "lease ended during write" });
  // The reconcile's signals abort with the loss, and say why as the log does.
  for (const signal of [request?.leaseLost, request?.signal]) {
    assert.ok(signal?.reason instanceof LeaseLostError, `abort reason ${String(signal?.reason)}`);
    assert.equal(signal.reason.why, "lease ended during write");
  }

  const before = log.lines.length;
  call.receive({ kind: { $case: "finishAck", value: { key: "ns/a", token: 7n, code: status.FAILED_PRECONDITION, message: "stale lease token 7" } } });
  assert.deepEqual(
    log.lines.slice(before).filter((l) => l.level === "warn"),
    [],
    "the expected refusal was warned of",
  );
  call.cancel();
});
