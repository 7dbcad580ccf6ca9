// Request and Result: what a reconcile is given and what it returns.
import type { LeaseRef } from "./objects.js";
import { ReasonKind as WireReasonKind, type Lease, type Reason as WireReason } from "./gen/workqueue/v1/workqueue.js";
import { leaseExpired } from "./lease.js";
import { CachedObject } from "./object.js";

/** Why a key was queued (the proto's ReasonKind without its prefix). */
export type ReasonKind =
  | "UNSPECIFIED"
  | "MANUAL"
  | "INITIAL_LIST"
  | "RESYNC"
  | "ADDED"
  | "UPDATED"
  | "DELETED"
  | "RETRY"
  | "REQUEUE_AFTER"
  | "LEASE_EXPIRED"
  | "LEASE_RELEASED"
  | "TRIGGER"
  | "SHUTDOWN_RETURNED";

const reasonKinds: Record<number, ReasonKind> = {
  [WireReasonKind.REASON_KIND_MANUAL]: "MANUAL",
  [WireReasonKind.REASON_KIND_INITIAL_LIST]: "INITIAL_LIST",
  [WireReasonKind.REASON_KIND_RESYNC]: "RESYNC",
  [WireReasonKind.REASON_KIND_ADDED]: "ADDED",
  [WireReasonKind.REASON_KIND_UPDATED]: "UPDATED",
  [WireReasonKind.REASON_KIND_DELETED]: "DELETED",
  [WireReasonKind.REASON_KIND_RETRY]: "RETRY",
  [WireReasonKind.REASON_KIND_REQUEUE_AFTER]: "REQUEUE_AFTER",
  [WireReasonKind.REASON_KIND_LEASE_EXPIRED]: "LEASE_EXPIRED",
  [WireReasonKind.REASON_KIND_LEASE_RELEASED]: "LEASE_RELEASED",
  [WireReasonKind.REASON_KIND_TRIGGER]: "TRIGGER",
  [WireReasonKind.REASON_KIND_SHUTDOWN_RETURNED]: "SHUTDOWN_RETURNED",
};

/** One cause for a key being queued. */
export interface Reason {
  kind: ReasonKind;
  /** The informer's name, or the reason text given to an add; often empty. */
  source: string;
  /** Free-form detail for people; often empty. */
  detail: string;
}

export function reasonFromWire(r: WireReason): Reason {
  return { kind: reasonKinds[r.kind] ?? "UNSPECIFIED", source: r.source, detail: r.detail };
}

/** What a reconcile returns: nothing (or `{}`) for success, or when to see the key again. */
export interface Result {
  /** Done for now; queue the key again after this many milliseconds (failures forgotten). */
  requeueAfter?: number;
}

/** One key to reconcile, under a lease the worker holds and extends while the reconcile runs. */
export interface Request {
  readonly queue: string;
  /** "namespace/name", or "name" for a cluster-scoped object. */
  readonly key: string;
  /** The part of the key before "/"; empty for a cluster-scoped key. */
  readonly namespace: string;
  /** The part of the key after "/". */
  readonly name: string;
  readonly priority: number;
  /** How many times the key has failed since it was last forgotten. */
  readonly failures: number;
  /** The error text of the key's last failed attempt; empty when none. */
  readonly lastError: string;
  /** Why the key was queued, merged over every add since it was last handed out. */
  readonly reasons: readonly Reason[];
  /** When the key entered the ready queue for this round (sidecar's clock). */
  readonly enqueuedAt: Date | undefined;
  /** The lease's current deadline by this machine's clock; extends move it. */
  readonly deadline: Date;
  /** The lease's fencing token. */
  readonly token: bigint;
  /** This lease, to pass to writes as `{ lease: req.lease }`: fenced by it, and the key settles until the caches have them. */
  readonly lease: LeaseRef;
  /** The object is being deleted (it has a deletionTimestamp); on a queue with a declared finalizer, return success once cleaned up. */
  readonly deleting: boolean;
  /** When deleting, its deletionTimestamp. */
  readonly deletionTimestamp: Date | undefined;
  /** The key's object from the queue's primary informer, with `includeObject`. */
  readonly object: CachedObject | undefined;
  /**
   * Aborts when the lease is lost (reason: LeaseLostError; the result will be
   * discarded) or when the sidecar asks to stop (reason: StopRequestedError;
   * the lease still holds, so return soon and the result counts), whichever
   * comes first: a signal aborts once, so a lease lost after a stop request
   * leaves the reason StopRequestedError. `leaseLost` tells the loss apart.
   */
  readonly signal: AbortSignal;
  /**
   * Aborts when the lease is lost, and only then (reason: LeaseLostError),
   * also after a stop request already aborted `signal`: from then on the
   * result is discarded and the key may be another worker's.
   */
  readonly leaseLost: AbortSignal;
  /**
   * True while the lease holds, read when asked: `leaseLost` has not aborted
   * and the deadline has not passed by this machine's clock. A signal aborts
   * from a timer, and timers fire late after the process was stopped (SIGSTOP,
   * a paused VM); this does not wait for them. Call it before a side effect
   * late in a long reconcile.
   */
  leaseValid(): boolean;
  /** True when a reason of this kind is among the request's reasons. */
  has(kind: ReasonKind): boolean;
}

/** Splits a key into namespace and name like client-go's SplitMetaNamespaceKey. */
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf("/");
  return slash < 0 ? { namespace: "", name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** The Request for a lease: its fields, plus the live deadline and signal of the worker's lease. */
export function requestFromLease(
  queue: string,
  l: Lease,
  live: { deadline(): number; signal: AbortSignal; leaseLost: AbortSignal },
): Request {
  const { namespace, name } = splitKey(l.key);
  const reasons = l.reasons.map(reasonFromWire);
  return {
    queue,
    key: l.key,
    namespace,
    name,
    priority: l.priority,
    failures: l.failures,
    lastError: l.lastError,
    reasons,
    enqueuedAt: l.enqueuedAt,
    get deadline() {
      return new Date(live.deadline());
    },
    token: l.token,
    lease: { queue, key: l.key, token: l.token },
    deleting: l.deleting,
    deletionTimestamp: l.deletionTimestamp,
    object: l.object === undefined ? undefined : new CachedObject(l.object),
    signal: live.signal,
    leaseLost: live.leaseLost,
    leaseValid: () => !live.leaseLost.aborted && !leaseExpired(live.deadline(), Date.now()),
    has: (kind: ReasonKind) => reasons.some((r) => r.kind === kind),
  };
}
