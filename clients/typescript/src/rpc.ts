// One unary call as a Promise, its failure as a WorkqueueError: bounded by a
// deadline (a stopped or unreachable sidecar never answers, and a call
// without one waits for as long as TCP does) and cancelled by an AbortSignal.
import { Metadata, type CallOptions as GrpcCallOptions, type ClientUnaryCall, type ServiceError } from "@grpc/grpc-js";

import { errorForCode, fromGrpc, Status } from "./errors.js";

/** How long a unary call may take by default (ms), the Java client's callTimeout. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

/** Options every unary call takes (queue calls, cache reads, writes). */
export interface CallOptions {
  /**
   * This call's deadline in ms, instead of the client's `callTimeout`; a call
   * that asks the sidecar to wait (a cache read's `waitMs`, a drain's
   * timeout) gets that wait on top. `Infinity`: no deadline. Past it the
   * call rejects with DeadlineExceededError.
   */
  timeout?: number;
  /** Aborting it cancels the call: it rejects with CancelledError (CANCELLED). */
  signal?: AbortSignal;
}

/** Throws unless ms is a usable timeout: a positive number of milliseconds, or Infinity. */
export function checkTimeout(what: string, ms: number): void {
  if (!(typeof ms === "number" && ms > 0)) throw new RangeError(`workqueue: ${what} must be a positive number of milliseconds (or Infinity), not ${ms}`);
}

/**
 * The limits of one call: `options.timeout` or else `defaultTimeout`, plus
 * `waitMs`, the time the call asks the sidecar to wait (undefined: a wait
 * the client cannot know, so no deadline unless the call gives one).
 */
export function limits(defaultTimeout: number, options: CallOptions = {}, waitMs: number | undefined = 0): { timeout: number; signal: AbortSignal | undefined } {
  if (options.timeout !== undefined) checkTimeout("a call's timeout", options.timeout);
  const own = options.timeout ?? (waitMs === undefined ? Infinity : defaultTimeout);
  return { timeout: own + Math.max(0, waitMs ?? 0), signal: options.signal };
}

type Invoke<Res> = (metadata: Metadata, options: Partial<GrpcCallOptions>, callback: (err: ServiceError | null, res: Res) => void) => ClientUnaryCall;

export function unary<Res>(op: string, limit: { timeout: number; signal: AbortSignal | undefined }, invoke: Invoke<Res>): Promise<Res> {
  const { timeout, signal } = limit;
  const cancelled = (): Error =>
    errorForCode(op, Status.CANCELLED, "the call's signal aborted", signal?.reason);
  if (signal?.aborted) return Promise.reject(cancelled());
  return new Promise((resolve, reject) => {
    const deadline = Number.isFinite(timeout) ? Date.now() + timeout : undefined;
    let onAbort: (() => void) | undefined;
    const call = invoke(new Metadata(), deadline === undefined ? {} : { deadline }, (err, res) => {
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
      if (!err) resolve(res);
      else if (err.code !== Status.CANCELLED) reject(fromGrpc(op, err));
      else if (signal?.aborted) reject(cancelled());
      // The sidecar (tonic) ends a call past the deadline it was sent with
      // CANCELLED "Timeout expired", often before grpc-js's own timer says
      // DEADLINE_EXCEEDED: it is the deadline all the same.
      else if (deadline !== undefined && Date.now() >= deadline) reject(errorForCode(op, Status.DEADLINE_EXCEEDED, `deadline of ${timeout} ms passed (${err.details})`, err));
      else reject(fromGrpc(op, err));
    });
    if (signal !== undefined) {
      onAbort = () => call.cancel();
      signal.addEventListener("abort", onAbort, { once: true });
    }
  });
}
