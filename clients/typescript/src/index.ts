// workqueue-sidecar's TypeScript worker client.
//
// - client.ts   connect(), Client: the connection and its service handles
// - queue.ts    Queue: client-go's workqueue calls and run(), the worker
// - worker.ts   the reconnect loop and concurrency slots behind run()
// - session.ts  one Work stream: leases, extends, finishes, graceful stop
// - lease.ts    the deadline rules, as pure functions
// - request.ts  Request, Result, Reason: what a reconcile sees and returns
// - cache.ts    typed reads of the informer caches
// - objects.ts  writes through the sidecar (apply, patch, create, delete)
// - errors.ts   WorkqueueError and a subclass per meaningful gRPC code
// - signals.ts  abortOnSignals(): SIGTERM/SIGINT as an AbortSignal
export { Cache, type GetOptions, type ListOptions } from "./cache.js";
export { Client, connect, type ConnectOptions } from "./client.js";
export {
  AbortedError,
  AlreadyExistsError,
  CancelledError,
  DeadlineExceededError,
  InvalidArgumentError,
  LeaseEndedDuringWriteError,
  LeaseLostError,
  LimitExceededError,
  NoKubernetesError,
  NotFoundError,
  PermissionDeniedError,
  StaleLeaseError,
  Status,
  StopRequestedError,
  UnavailableError,
  UnimplementedError,
  WorkqueueError,
  type LeaseLostWhy,
} from "./errors.js";
export { extendInterval, leaseDeadline, leaseExpired } from "./lease.js";
export { MAX_LOGGED_ERROR_CHARS, type Logger } from "./log.js";
export { CachedObject } from "./object.js";
export {
  controllerRef,
  Objects,
  WrittenObject,
  type OwnerReference,
  type ApplyOptions,
  type DeleteOptions,
  type DeleteResult,
  type LeaseRef,
  type ObjectLike,
  type PatchOptions,
  type TypeMeta,
  type WriteOptions,
} from "./objects.js";
export { Queue, type AddOptions, type DrainReport, type KeyInfo, type KeyPhase, type QueueLength, type RateLimitedKey, type ShardPlace } from "./queue.js";
export { splitKey, type Reason, type ReasonKind, type Request, type Result } from "./request.js";
export { DEFAULT_CALL_TIMEOUT_MS, type CallOptions } from "./rpc.js";
export { abortOnSignals } from "./signals.js";
export { DEFAULT_STOP_TIMEOUT_MS, type Reconcile, type RunOptions } from "./worker.js";
