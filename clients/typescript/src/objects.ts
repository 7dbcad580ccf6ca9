// Objects: writes to the API server through the sidecar (ObjectService),
// as thin typed wrappers.
import {
  PatchType,
  Propagation,
  type ApplyObjectResponse,
  type CreateObjectResponse,
  type DeleteObjectResponse,
  type ObjectServiceClient,
  type PatchObjectResponse,
  type ResourceType,
  type WrittenObject as WireWrittenObject,
} from "./gen/workqueue/v1/object.js";
import { limits, unary, type CallOptions } from "./rpc.js";

const decoder = new TextDecoder();

/** A Kubernetes type: `{ apiVersion: "v1", kind: "Namespace" }`. */
export interface TypeMeta {
  apiVersion: string;
  kind: string;
}

/** An object as the API server returned it after a write. */
export class WrittenObject {
  readonly resourceVersion: string;
  readonly uid: string;
  /** The object as JSON in UTF-8. */
  readonly raw: Uint8Array;

  constructor(w: WireWrittenObject) {
    this.resourceVersion = w.resourceVersion;
    this.uid = w.uid;
    this.raw = w.json;
  }

  json<T = unknown>(): T {
    return JSON.parse(decoder.decode(this.raw)) as T;
  }
}

/** An object with at least the metadata a write needs. */
export interface ObjectLike {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; [field: string]: unknown };
  /** Any other field of the object (spec, data, ...). */
  [field: string]: unknown;
}

/** The lease a write is made under: the queue, the leased key and the lease's token. */
export interface LeaseRef {
  queue: string;
  key: string;
  token: bigint;
}

export interface WriteOptions extends CallOptions {
  /** The field manager; default the sidecar's. */
  fieldManager?: string;
  /**
   * The lease this write is made under: the sidecar makes it only while that
   * lease is current (StaleLeaseError otherwise), and the key is not leased
   * again until the sidecar's caches have seen the write. A lease that ends
   * while the write is out makes it a LeaseEndedDuringWriteError: the write
   * was made, but the key may be another worker's now.
   */
  lease?: LeaseRef;
}

export interface ApplyOptions extends WriteOptions {
  /** Take fields another manager owns instead of failing with a conflict. */
  force?: boolean;
}

export interface PatchOptions extends WriteOptions {
  /** "merge" (RFC 7386, the default) or "json" (RFC 6902). */
  type?: "merge" | "json";
  /** Patch the status subresource. */
  status?: boolean;
}

export interface DeleteOptions extends CallOptions {
  /** The lease this delete is made under (see WriteOptions.lease). */
  lease?: LeaseRef;
  preconditionUid?: string;
  preconditionResourceVersion?: string;
  propagation?: "background" | "foreground" | "orphan";
}

export interface DeleteResult {
  /** Removed at once; false when finalizers hold it (then `object` has its deletionTimestamp). */
  gone: boolean;
  object: WrittenObject | undefined;
}

function typeOf(obj: ObjectLike, type?: TypeMeta): ResourceType {
  const apiVersion = type?.apiVersion ?? obj.apiVersion;
  const kind = type?.kind ?? obj.kind;
  if (!apiVersion || !kind) throw new TypeError("workqueue: the object needs apiVersion and kind");
  return { apiVersion, kind };
}

function written(op: string, w: WireWrittenObject | undefined): WrittenObject {
  if (w === undefined) throw new Error(`workqueue: ${op}: the sidecar returned no object`);
  return new WrittenObject(w);
}

const propagations = {
  background: Propagation.PROPAGATION_BACKGROUND,
  foreground: Propagation.PROPAGATION_FOREGROUND,
  orphan: Propagation.PROPAGATION_ORPHAN,
};

export class Objects {
  constructor(
    private readonly client: ObjectServiceClient,
    /** The deadline of each call (ms) unless the call gives its own. */
    private readonly callTimeout: number,
  ) {}

  /** Server-side apply of `obj` (its apiVersion, kind, metadata.name and namespace say what). */
  async apply(obj: ObjectLike, options: ApplyOptions = {}): Promise<WrittenObject> {
    const type = typeOf(obj);
    const name = obj.metadata?.name ?? "";
    const op = `apply ${type.kind} ${JSON.stringify(name)}`;
    const res = await unary<ApplyObjectResponse>(op, limits(this.callTimeout, options), (md, co, cb) =>
      this.client.applyObject(
        {
          type,
          namespace: obj.metadata?.namespace ?? "",
          name,
          json: Buffer.from(JSON.stringify(obj)),
          fieldManager: options.fieldManager ?? "",
          force: options.force ?? false,
          lease: options.lease,
        },
        md,
        co,
        cb,
      ),
    );
    return written(op, res.object);
  }

  /** Patches an object; `patch` is a merge patch object, or a JSON patch array with `type: "json"`. */
  async patch(type: TypeMeta, namespace: string, name: string, patch: unknown, options: PatchOptions = {}): Promise<WrittenObject> {
    const op = `patch ${type.kind} ${JSON.stringify(name)}`;
    const res = await unary<PatchObjectResponse>(op, limits(this.callTimeout, options), (md, co, cb) =>
      this.client.patchObject(
        {
          type: { apiVersion: type.apiVersion, kind: type.kind },
          namespace,
          name,
          patchType: options.type === "json" ? PatchType.PATCH_TYPE_JSON : PatchType.PATCH_TYPE_MERGE,
          patch: Buffer.from(JSON.stringify(patch)),
          status: options.status ?? false,
          fieldManager: options.fieldManager ?? "",
          lease: options.lease,
        },
        md,
        co,
        cb,
      ),
    );
    return written(op, res.object);
  }

  /** Creates `obj`; AlreadyExistsError when it exists. */
  async create(obj: ObjectLike, options: WriteOptions = {}): Promise<WrittenObject> {
    const type = typeOf(obj);
    const op = `create ${type.kind} ${JSON.stringify(obj.metadata?.name ?? "")}`;
    const res = await unary<CreateObjectResponse>(op, limits(this.callTimeout, options), (md, co, cb) =>
      this.client.createObject(
        {
          type,
          namespace: obj.metadata?.namespace ?? "",
          json: Buffer.from(JSON.stringify(obj)),
          fieldManager: options.fieldManager ?? "",
          lease: options.lease,
        },
        md,
        co,
        cb,
      ),
    );
    return written(op, res.object);
  }

  /** Deletes an object. */
  async delete(type: TypeMeta, namespace: string, name: string, options: DeleteOptions = {}): Promise<DeleteResult> {
    const res = await unary<DeleteObjectResponse>(`delete ${type.kind} ${JSON.stringify(name)}`, limits(this.callTimeout, options), (md, co, cb) =>
      this.client.deleteObject(
        {
          type: { apiVersion: type.apiVersion, kind: type.kind },
          namespace,
          name,
          preconditionUid: options.preconditionUid ?? "",
          preconditionResourceVersion: options.preconditionResourceVersion ?? "",
          propagation: options.propagation === undefined ? Propagation.PROPAGATION_UNSPECIFIED : propagations[options.propagation],
          lease: options.lease,
        },
        md,
        co,
        cb,
      ),
    );
    return { gone: res.gone, object: res.object === undefined ? undefined : new WrittenObject(res.object) };
  }
}

/** A controller ownerReference, as a child's `metadata.ownerReferences` entry. */
export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: true;
  blockOwnerDeletion: true;
}

/**
 * The controller ownerReference of a child of `owner` (the lease's object,
 * `req.object.json()`, or any object with apiVersion, kind, name and uid):
 * the garbage collector deletes the child with its owner, and a queue whose
 * trigger is `by: owner` hears of the child's changes.
 */
export function controllerRef(owner: { apiVersion?: string; kind?: string; metadata?: { name?: string; uid?: string } }): OwnerReference {
  const { apiVersion, kind } = owner;
  const name = owner.metadata?.name;
  const uid = owner.metadata?.uid;
  if (!apiVersion || !kind || !name || !uid) {
    throw new TypeError("controllerRef: the owner needs apiVersion, kind, metadata.name and metadata.uid");
  }
  return { apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true };
}
