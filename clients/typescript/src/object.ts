// CachedObject: an object from one of the sidecar's informer caches, as a
// lease or a cache read carries it.
import type { CachedObject as WireCachedObject } from "./gen/workqueue/v1/cache.js";

const decoder = new TextDecoder();

/** An object from an informer cache: its identity, version and JSON. */
export class CachedObject {
  /** Empty for a cluster-scoped object. */
  readonly namespace: string;
  readonly name: string;
  /** The object's metadata.resourceVersion. */
  readonly resourceVersion: string;
  /** The object was deleted; this is its last known state. */
  readonly deleted: boolean;
  /** The object as the API server served it, JSON in UTF-8. */
  readonly raw: Uint8Array;

  constructor(wire: WireCachedObject) {
    this.namespace = wire.namespace;
    this.name = wire.name;
    this.resourceVersion = wire.resourceVersion;
    this.deleted = wire.deleted;
    this.raw = wire.json;
  }

  /** The object parsed from its JSON; T is what you expect it to be (not checked). */
  json<T = unknown>(): T {
    return JSON.parse(decoder.decode(this.raw)) as T;
  }
}
