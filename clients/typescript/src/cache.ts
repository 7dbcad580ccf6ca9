// Cache: typed reads of the sidecar's informer caches (CacheService).
import type { CacheServiceClient, GetObjectResponse, ListObjectsResponse } from "./gen/workqueue/v1/cache.js";
import { CachedObject } from "./object.js";
import { limits, unary, type CallOptions } from "./rpc.js";
import { toDuration } from "./time.js";

/** The call's deadline is `waitMs` plus the call timeout: a read that waits is not cut short. */
export interface GetOptions extends CallOptions {
  /** Read-your-writes: wait until the cache has seen this resourceVersion (with `waitMs`). */
  minResourceVersion?: string;
  /** How long to wait for the informer's initial list and for minResourceVersion; 0 fails at once. */
  waitMs?: number;
  /** Also return the last known state of a deleted object (getObject only). */
  includeDeleted?: boolean;
}

export interface ListOptions extends CallOptions {
  /** Only this namespace; empty or absent for all. */
  namespace?: string;
  /** A Kubernetes label selector ("app=web,tier!=db"). */
  labelSelector?: string;
  /** An index of the informer (its name in the sidecar config) ... */
  index?: string;
  /** ... and the value to look up in it. */
  value?: string;
  minResourceVersion?: string;
  waitMs?: number;
  /** Objects per page (the sidecar caps it); 0 for the sidecar's default. */
  pageSize?: number;
}

export class Cache {
  constructor(
    private readonly client: CacheServiceClient,
    /** The deadline of each call (ms) unless the call gives its own; a read's wait comes on top. */
    private readonly callTimeout: number,
  ) {}

  /** The cached object parsed as T, or undefined when the cache does not hold it. */
  async get<T = unknown>(informer: string, namespace: string, name: string, options: GetOptions = {}): Promise<T | undefined> {
    const o = await this.getObject(informer, namespace, name, { ...options, includeDeleted: false });
    return o?.json<T>();
  }

  /** The cached object with its resourceVersion, or undefined. */
  async getObject(informer: string, namespace: string, name: string, options: GetOptions = {}): Promise<CachedObject | undefined> {
    const limit = limits(this.callTimeout, options, options.waitMs ?? 0);
    const res = await unary<GetObjectResponse>(`get from informer ${JSON.stringify(informer)}`, limit, (md, co, cb) =>
      this.client.getObject(
        {
          informer,
          namespace,
          name,
          minResourceVersion: options.minResourceVersion ?? "",
          wait: options.waitMs === undefined ? undefined : toDuration(options.waitMs),
          includeDeleted: options.includeDeleted ?? false,
        },
        md,
        co,
        cb,
      ),
    );
    return res.object === undefined ? undefined : new CachedObject(res.object);
  }

  /** Every matching object parsed as T, in namespace/name order, all pages read. */
  async list<T = unknown>(informer: string, options: ListOptions = {}): Promise<T[]> {
    const out: T[] = [];
    for await (const o of this.listObjects(informer, options)) out.push(o.json<T>());
    return out;
  }

  /** The matching objects one by one, fetching pages as it goes. */
  async *listObjects(informer: string, options: ListOptions = {}): AsyncGenerator<CachedObject> {
    let pageToken = "";
    let minResourceVersion = options.minResourceVersion ?? "";
    do {
      // Each page is a call of its own, with a deadline of its own.
      const limit = limits(this.callTimeout, options, options.waitMs ?? 0);
      const res = await unary<ListObjectsResponse>(`list informer ${JSON.stringify(informer)}`, limit, (md, co, cb) =>
        this.client.listObjects(
          {
            informer,
            namespace: options.namespace ?? "",
            labelSelector: options.labelSelector ?? "",
            indexName: options.index ?? "",
            indexValue: options.value ?? "",
            minResourceVersion,
            wait: options.waitMs === undefined ? undefined : toDuration(options.waitMs),
            pageSize: options.pageSize ?? 0,
            pageToken,
          },
          md,
          co,
          cb,
        ),
      );
      for (const o of res.objects) yield new CachedObject(o);
      pageToken = res.nextPageToken;
      minResourceVersion = ""; // the first page waited for it
    } while (pageToken !== "");
  }
}
