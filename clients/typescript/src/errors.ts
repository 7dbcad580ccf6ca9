// Errors: one class per gRPC status code that means something to a worker,
// all under WorkqueueError, and the two reasons a reconcile's signal aborts.
import { status as Status, type ServiceError } from "@grpc/grpc-js";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";

/** The gRPC status codes, re-exported so callers need not import grpc-js. */
export { Status };

/**
 * An error from the sidecar. `code` is the gRPC status code (`Status.NOT_FOUND`
 * and friends); `op` names the call that failed ("add to queue \"users\"").
 */
export class WorkqueueError extends Error {
  override name = "WorkqueueError";
  readonly code: Status;
  readonly op: string;
  /** The sidecar's own message, without the operation in front. */
  readonly details: string;
  /**
   * The reason of the status's google.rpc.ErrorInfo detail, when it has one:
   * the API server's (`Conflict`, `AlreadyExists`, `Invalid`, ..., domain
   * "k8s.io") or the sidecar's (`STALE_LEASE`, `NO_KUBERNETES`,
   * `LEASE_ENDED_DURING_WRITE`, domain "workqueue-sidecar"); empty otherwise.
   */
  readonly reason: string;
  /** The ErrorInfo's domain; empty without one. */
  readonly domain: string;

  constructor(op: string, code: Status, details: string, options?: ErrorOptions & { reason?: string; domain?: string }) {
    super(`workqueue: ${op}: ${Status[code] ?? code}: ${details || Status[code] || "error"}`, options);
    this.op = op;
    this.code = code;
    this.details = details;
    this.reason = options?.reason ?? "";
    this.domain = options?.domain ?? "";
  }
}

/** FAILED_PRECONDITION with reason NO_KUBERNETES: a write asked of a sidecar without informers. */
export class NoKubernetesError extends WorkqueueError {
  override name = "NoKubernetesError";
}

/** NOT_FOUND: an unknown queue (or, from the cache, an unknown informer or index). */
export class NotFoundError extends WorkqueueError {
  override name = "NotFoundError";
}

/** INVALID_ARGUMENT: an empty or oversized key, a negative delay, a malformed selector; OUT_OF_RANGE: a message past the size limit. */
export class InvalidArgumentError extends WorkqueueError {
  override name = "InvalidArgumentError";
}

/** FAILED_PRECONDITION: the lease token is stale (the lease ended); nothing changed. */
export class StaleLeaseError extends WorkqueueError {
  override name = "StaleLeaseError";
}

/**
 * UNAVAILABLE: the queue is shutting down, the sidecar is not the leader, an
 * informer has not synced, or the sidecar cannot be reached; for a write, the
 * API server is unreachable or answered 429, 500 or 503, or too many writes to
 * it are still unanswered (`reason` TOO_MANY_WRITES_OUT: nothing was sent).
 * Worth retrying.
 */
export class UnavailableError extends WorkqueueError {
  override name = "UnavailableError";
}

/** ABORTED: the sidecar gave up on the call (a conflict on a write, say). */
export class AbortedError extends WorkqueueError {
  override name = "AbortedError";
}

/**
 * ABORTED with reason LEASE_ENDED_DURING_WRITE: a write under a lease was
 * made, but the lease ended before the API server answered it (the sidecar's
 * term as leader or shard owner ended, a shutdown handed the lease back, or
 * the worker's own Done/Finish ended it), so another worker may hold the key
 * by now. Treat it like a lost lease, not a conflict to read again and retry,
 * and do not Done/Finish the lease expecting success.
 */
export class LeaseEndedDuringWriteError extends AbortedError {
  override name = "LeaseEndedDuringWriteError";
}

/** PERMISSION_DENIED or UNAUTHENTICATED: the sidecar (or the API server behind it) refused. */
export class PermissionDeniedError extends WorkqueueError {
  override name = "PermissionDeniedError";
}

/** RESOURCE_EXHAUSTED: a batch over the server's limit, or a full queue. */
export class LimitExceededError extends WorkqueueError {
  override name = "LimitExceededError";
}

/**
 * ABORTED with the API server's reason AlreadyExists (or the code
 * ALREADY_EXISTS): a create found an object of that name. An AbortedError
 * too, as the API server's other conflicts.
 */
export class AlreadyExistsError extends AbortedError {
  override name = "AlreadyExistsError";
}

/** DEADLINE_EXCEEDED: the call's deadline (its timeout, see CallOptions) or a cache read's wait passed. */
export class DeadlineExceededError extends WorkqueueError {
  override name = "DeadlineExceededError";
}

/** CANCELLED: the call's signal aborted (its `cause` is the signal's reason). */
export class CancelledError extends WorkqueueError {
  override name = "CancelledError";
}

/** UNIMPLEMENTED: a sidecar build without that service or call. */
export class UnimplementedError extends WorkqueueError {
  override name = "UnimplementedError";
}

const byCode: Partial<Record<Status, typeof WorkqueueError>> = {
  [Status.NOT_FOUND]: NotFoundError,
  [Status.INVALID_ARGUMENT]: InvalidArgumentError,
  // A message past the sidecar's size limit (a write body over 3 MiB).
  [Status.OUT_OF_RANGE]: InvalidArgumentError,
  [Status.FAILED_PRECONDITION]: StaleLeaseError,
  [Status.UNAVAILABLE]: UnavailableError,
  [Status.ABORTED]: AbortedError,
  [Status.PERMISSION_DENIED]: PermissionDeniedError,
  [Status.UNAUTHENTICATED]: PermissionDeniedError,
  [Status.RESOURCE_EXHAUSTED]: LimitExceededError,
  [Status.ALREADY_EXISTS]: AlreadyExistsError,
  [Status.DEADLINE_EXCEEDED]: DeadlineExceededError,
  [Status.CANCELLED]: CancelledError,
  [Status.UNIMPLEMENTED]: UnimplementedError,
};

/**
 * Refusals that share their code with others, told apart by their ErrorInfo
 * reason (the sidecar's own, or the API server's): the code and the class.
 */
const byReason: Record<string, readonly [Status, typeof WorkqueueError]> = {
  NO_KUBERNETES: [Status.FAILED_PRECONDITION, NoKubernetesError],
  LEASE_ENDED_DURING_WRITE: [Status.ABORTED, LeaseEndedDuringWriteError],
  AlreadyExists: [Status.ABORTED, AlreadyExistsError],
};

/** The error for a status code: the subclass for its reason or code when one has one, else the base class. */
export function errorForCode(
  op: string,
  code: number,
  details: string,
  cause?: unknown,
  info: { reason: string; domain: string } = { reason: "", domain: "" },
): WorkqueueError {
  const [reasonCode, ReasonClass] = byReason[info.reason] ?? [];
  const Class = (reasonCode === code ? ReasonClass : byCode[code as Status]) ?? WorkqueueError;
  return new Class(op, code as Status, details, { ...(cause === undefined ? {} : { cause }), ...info });
}

/**
 * The reason and domain of the google.rpc.ErrorInfo in a status's details
 * (the `grpc-status-details-bin` trailer: a google.rpc.Status whose field 3
 * holds Any messages), read field by field.
 */
export function errorInfo(statusDetails: Uint8Array | undefined): { reason: string; domain: string } {
  const none = { reason: "", domain: "" };
  if (statusDetails === undefined) return none;
  try {
    const status = new BinaryReader(statusDetails);
    while (status.pos < status.len) {
      const [field, wire] = status.tag();
      if (field !== 3 || wire !== WireType.LengthDelimited) {
        status.skip(wire);
        continue;
      }
      const any = new BinaryReader(status.bytes());
      let typeUrl = "";
      let value: Uint8Array | undefined;
      while (any.pos < any.len) {
        const [f, w] = any.tag();
        if (f === 1) typeUrl = any.string();
        else if (f === 2) value = any.bytes();
        else any.skip(w);
      }
      if (!typeUrl.endsWith("/google.rpc.ErrorInfo") || value === undefined) continue;
      const info = new BinaryReader(value);
      const found = { ...none };
      while (info.pos < info.len) {
        const [f, w] = info.tag();
        if (f === 1) found.reason = info.string();
        else if (f === 2) found.domain = info.string();
        else info.skip(w);
      }
      return found;
    }
  } catch {
    // Details that do not decode are no reason to hide the error itself.
  }
  return none;
}

function isServiceError(err: unknown): err is ServiceError {
  return err instanceof Error && typeof (err as Partial<ServiceError>).code === "number" && "details" in err;
}

/** Turns what a grpc-js call failed with into a WorkqueueError naming op. */
export function fromGrpc(op: string, err: unknown): WorkqueueError {
  if (err instanceof WorkqueueError) return err;
  if (isServiceError(err)) {
    const raw = err.metadata?.get("grpc-status-details-bin")[0];
    const details = typeof raw === "string" ? undefined : raw;
    return errorForCode(op, err.code, err.details, err, errorInfo(details));
  }
  const message = err instanceof Error ? err.message : String(err);
  return new WorkqueueError(op, Status.UNKNOWN, message, { cause: err });
}

/** Why a lease was lost: the reason carried by {@link LeaseLostError}. */
export type LeaseLostWhy =
  /** Its deadline passed without an extend that moved it. */
  | "expired"
  /** The sidecar revoked it (Cancel with revoked, or an extend refused as stale). */
  | "revoked"
  /** The Work stream broke (the sidecar restarted, the connection dropped). */
  | "stream broke"
  /** The worker stopped and the reconcile outlived the stop timeout. */
  | "stop timeout"
  /**
   * The reconcile threw a {@link LeaseEndedDuringWriteError} (or an error
   * with one in its `cause` chain): a write under the lease was made, but the
   * lease ended on the sidecar before the API server answered it.
   */
  | "lease ended during write";

/**
 * The abort reason of a reconcile whose lease ended without the worker: the
 * key is back in the queue and whatever the reconcile returns is discarded.
 */
export class LeaseLostError extends Error {
  override name = "LeaseLostError";
  readonly why: LeaseLostWhy;

  constructor(key: string, why: LeaseLostWhy) {
    super(`lease lost (${why}) for key ${JSON.stringify(key)}`);
    this.why = why;
  }
}

/**
 * The abort reason of a reconcile the sidecar asked to stop (the queue was
 * shut down without drain, or the sidecar lost leadership). The lease is
 * still valid: return soon and the result counts.
 */
export class StopRequestedError extends Error {
  override name = "StopRequestedError";

  constructor(key: string, message: string) {
    super(`the sidecar asks to stop working on key ${JSON.stringify(key)}${message ? `: ${message}` : ""}`);
  }
}
