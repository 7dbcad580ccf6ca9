// Client: the connection to one sidecar, and the handles on its services.
import { credentials as grpcCredentials, type ChannelCredentials } from "@grpc/grpc-js";
import { hostname } from "node:os";

import { Cache } from "./cache.js";
import { errorForCode, Status } from "./errors.js";
import { CacheServiceClient } from "./gen/workqueue/v1/cache.js";
import { ObjectServiceClient } from "./gen/workqueue/v1/object.js";
import { WorkQueueServiceClient } from "./gen/workqueue/v1/workqueue.js";
import { defaultLogger, type Logger } from "./log.js";
import { Objects } from "./objects.js";
import { Queue } from "./queue.js";
import { checkTimeout, DEFAULT_CALL_TIMEOUT_MS } from "./rpc.js";

export interface ConnectOptions {
  /** Shown by keyState as the holder of this client's leases; default "hostname/pid" (in a pod, the pod's name). */
  workerName?: string;
  /** Wait up to this many ms for the connection before resolving (UnavailableError after); default: connect lazily. */
  waitReadyMs?: number;
  /** TLS credentials for a sidecar started with --tls-cert; default plaintext. */
  credentials?: ChannelCredentials;
  /** Where the client logs; default warnings to stderr. */
  logger?: Logger;
  /**
   * The deadline of each unary call in ms (a call's own `timeout` overrides
   * it; a cache read's or a drain's wait comes on top); default 30 000.
   * Work streams have none.
   */
  callTimeout?: number;
}

/** A connection to a sidecar. Calls reconnect by themselves; `close()` when done. */
export class Client {
  /** Reads of the sidecar's informer caches. */
  readonly cache: Cache;
  /** Writes to the API server through the sidecar. */
  readonly objects: Objects;
  readonly workerName: string;
  /** The deadline of each unary call (ms), unless the call gives its own. */
  readonly callTimeout: number;
  private readonly queues: WorkQueueServiceClient;
  private readonly log: Logger;
  /** Aborted by close(): this client's running workers stop on it. */
  private readonly closing = new AbortController();

  /** Use {@link connect}. */
  constructor(readonly target: string, options: ConnectOptions = {}) {
    this.callTimeout = options.callTimeout ?? DEFAULT_CALL_TIMEOUT_MS;
    checkTimeout("callTimeout", this.callTimeout);
    const creds = options.credentials ?? grpcCredentials.createInsecure();
    this.queues = new WorkQueueServiceClient(target, creds);
    const channelOverride = this.queues.getChannel();
    this.cache = new Cache(new CacheServiceClient(target, creds, { channelOverride }), this.callTimeout);
    this.objects = new Objects(new ObjectServiceClient(target, creds, { channelOverride }), this.callTimeout);
    this.workerName = options.workerName ?? `${hostname()}/${process.pid}`;
    this.log = options.logger ?? defaultLogger();
  }

  /** A handle on the named queue ("default" when the sidecar runs without a config file). */
  queue(name: string): Queue {
    return new Queue(this.queues, name, this.workerName, this.log, this.closing.signal, this.callTimeout);
  }

  /** Resolves once connected; UnavailableError after ms. */
  waitReady(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queues.waitForReady(Date.now() + ms, (err) => {
        if (err) reject(errorForCode(`connect to ${this.target}`, Status.UNAVAILABLE, err.message, err));
        else resolve();
      });
    });
  }

  /**
   * Closes the connection. Running workers stop as if their signal aborted
   * (running reconciles get their stop timeout, their results count) and
   * their `run` resolves; new calls fail at once.
   */
  close(): void {
    this.closing.abort();
    this.queues.close();
  }
}

/**
 * Connects to a sidecar: `"unix:///var/run/wq/sock"` or `"127.0.0.1:50051"`.
 * Plaintext unless `credentials` say otherwise.
 */
export async function connect(target: string, options: ConnectOptions = {}): Promise<Client> {
  if (target.trim() === "") throw new TypeError("workqueue: connect: empty target");
  const client = new Client(target, options);
  if (options.waitReadyMs !== undefined) {
    try {
      await client.waitReady(options.waitReadyMs);
    } catch (err) {
      client.close();
      throw err;
    }
  }
  return client;
}
