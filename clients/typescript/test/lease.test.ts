// Unit tests of the lease rules (no sidecar).
import assert from "node:assert/strict";
import { test } from "node:test";

import { errorForCode, fromGrpc } from "../src/errors.js";
import { jitter } from "../src/lease.js";
import {
  AbortedError,
  extendInterval,
  InvalidArgumentError,
  LeaseEndedDuringWriteError,
  leaseDeadline,
  leaseExpired,
  NotFoundError,
  PermissionDeniedError,
  splitKey,
  StaleLeaseError,
  Status,
  UnavailableError,
  WorkqueueError,
} from "../src/index.js";
import { requestFromLease } from "../src/request.js";
import { fromDuration, toDuration } from "../src/time.js";
import { refusal } from "./refusal.js";

test("a lease's deadline is the sidecar's when that is earlier than arrival plus ttl", () => {
  const arrived = 1_000_000;
  assert.equal(leaseDeadline(arrived, new Date(arrived + 500), 1_000), arrived + 500);
});

test("a lease's deadline is arrival plus ttl when the sidecar's clock is ahead", () => {
  const arrived = 1_000_000;
  assert.equal(leaseDeadline(arrived, new Date(arrived + 60_000), 1_000), arrived + 1_000);
});

test("a lease's deadline without a sidecar deadline is arrival plus ttl", () => {
  assert.equal(leaseDeadline(5, undefined, 10), 15);
  assert.equal(leaseDeadline(5, new Date(Number.NaN), 10), 15);
});

test("a lease read after its sidecar deadline is expired at once", () => {
  const now = 2_000_000;
  const deadline = leaseDeadline(now, new Date(now - 1), 30_000);
  assert.ok(leaseExpired(deadline, now));
});

test("a lease is not held at its deadline, and is before it", () => {
  assert.ok(leaseExpired(100, 100));
  assert.ok(leaseExpired(100, 101));
  assert.ok(!leaseExpired(100, 99));
});

test("leases are extended every third of the ttl, never more often than every 10 ms", () => {
  assert.equal(extendInterval(30_000), 10_000);
  assert.equal(extendInterval(1_000), 333);
  assert.equal(extendInterval(6), 10);
});

test("reconnect delays are spread by 20% either way", () => {
  assert.equal(jitter(1_000, () => 0), 800);
  assert.equal(jitter(1_000, () => 0.5), 1_000);
  assert.ok(jitter(1_000, () => 0.999_999) < 1_200);
});

test("durations convert both ways in milliseconds", () => {
  assert.deepEqual(toDuration(1_500), { seconds: 1n, nanos: 500_000_000 });
  assert.deepEqual(toDuration(0.25), { seconds: 0n, nanos: 250_000 });
  assert.equal(fromDuration({ seconds: 2n, nanos: 1_000_000 }), 2_001);
  assert.equal(fromDuration(undefined), undefined);
  assert.throws(() => toDuration(-1), RangeError);
});

test("each status code maps to its error class, keeping the code", () => {
  const cases: [Status, new (...args: never[]) => WorkqueueError][] = [
    [Status.NOT_FOUND, NotFoundError],
    [Status.INVALID_ARGUMENT, InvalidArgumentError],
    [Status.FAILED_PRECONDITION, StaleLeaseError],
    [Status.UNAVAILABLE, UnavailableError],
    [Status.PERMISSION_DENIED, PermissionDeniedError],
    [Status.UNAUTHENTICATED, PermissionDeniedError],
  ];
  for (const [code, Class] of cases) {
    const err = errorForCode("add to queue \"q\"", code, "why");
    assert.ok(err instanceof Class, `${Status[code]}: ${err.name}`);
    assert.equal(err.code, code);
    assert.equal(err.details, "why");
  }
  const other = errorForCode("op", Status.INTERNAL, "boom");
  assert.equal(other.constructor, WorkqueueError);
  assert.equal(other.code, Status.INTERNAL);
});

/**
 * A failed call as grpc-js rejects it when the sidecar answers `code`, with
 * an ErrorInfo of `domain` and `reason` (when given) in the status details
 * (the grpc-status-details-bin trailer, a google.rpc.Status).
 */
test("a write whose lease ended before the API server answered is a LeaseEndedDuringWriteError, an AbortedError too", () => {
  const message = 'the write was made, but the lease on "default/a" of queue "q" ended before the API server answered it';
  const ended = fromGrpc(
    "patch ConfigMap default/a",
    refusal(Status.ABORTED, message, { domain: "workqueue-sidecar", reason: "LEASE_ENDED_DURING_WRITE" }),
  );
  assert.ok(ended instanceof LeaseEndedDuringWriteError, `${ended.name}`);
  assert.ok(ended instanceof AbortedError);
  assert.equal(ended.name, "LeaseEndedDuringWriteError");
  assert.deepEqual([ended.code, ended.details, ended.reason, ended.domain], [Status.ABORTED, message, "LEASE_ENDED_DURING_WRITE", "workqueue-sidecar"]);
  // The API server's 409, with its own ErrorInfo or none, is a plain conflict.
  for (const conflict of [
    refusal(Status.ABORTED, "the object has been modified", { domain: "k8s.io", reason: "Conflict" }),
    refusal(Status.ABORTED, "the object has been modified"),
  ]) {
    const err = fromGrpc("patch ConfigMap default/a", conflict);
    assert.equal(err.constructor, AbortedError, `${err.name}`);
  }
});

test("keys split like client-go's SplitMetaNamespaceKey", () => {
  assert.deepEqual(splitKey("ns/name"), { namespace: "ns", name: "name" });
  assert.deepEqual(splitKey("cluster-scoped"), { namespace: "", name: "cluster-scoped" });
});

// conformance: C6
test("leaseValid reads the clock against the deadline when asked, before any timer aborts a signal", () => {
  let deadline = Date.now() + 60_000;
  const lost = new AbortController();
  const lease = { key: "ns/a", token: 7n, reasons: [] } as unknown as Parameters<typeof requestFromLease>[1];
  const req = requestFromLease("q", lease, { deadline: () => deadline, signal: lost.signal, leaseLost: lost.signal });
  assert.equal(req.leaseValid(), true);
  deadline = Date.now() - 1; // passed, and no timer has run
  assert.equal(req.leaseValid(), false);
  assert.equal(req.signal.aborted, false, "the signal still waits for its timer");
  deadline = Date.now() + 60_000; // extended
  assert.equal(req.leaseValid(), true);
  lost.abort(new Error("lost"));
  assert.equal(req.leaseValid(), false);
});
