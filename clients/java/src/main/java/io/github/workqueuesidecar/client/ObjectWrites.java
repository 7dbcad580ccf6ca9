package io.github.workqueuesidecar.client;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.google.protobuf.ByteString;
import io.grpc.StatusRuntimeException;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import workqueue.v1.Object.ApplyObjectRequest;
import workqueue.v1.Object.CreateObjectRequest;
import workqueue.v1.Object.DeleteObjectRequest;
import workqueue.v1.Object.DeleteObjectResponse;
import workqueue.v1.Object.PatchObjectRequest;
import workqueue.v1.ObjectServiceGrpc;

/**
 * Writes Kubernetes objects through the sidecar (ObjectService), with its credentials: a reconciler
 * needs no Kubernetes client library. Bodies are anything Jackson encodes (a {@code Map}, a {@code
 * JsonNode}, your own type), or JSON text as a {@code String} or {@code byte[]}.
 *
 * <p>Writes under a lease: {@code client.objects().underLease(req.lease())} makes every write of the
 * returned {@code ObjectWrites} name the reconcile's lease. The sidecar makes such a write only while
 * the lease is current ({@link StaleLeaseException}, reason {@code STALE_LEASE}, and nothing
 * written, once it ended; {@link LeaseEndedDuringWriteException} when it ended while the write was
 * out: the write was made, but the key may be another worker's now), and does not lease the key
 * again until the caches have seen the write (the key is {@code SETTLING} meanwhile): the next
 * reconcile never reads a cache older than its own last write.
 *
 * <p>Errors carry the API server's reason and domain ({@link WorkqueueException#reason()}, {@link
 * WorkqueueException#domain()} {@code k8s.io}): a stale resourceVersion or an existing name is
 * {@link ConflictException} ({@code Conflict}, {@code AlreadyExists}), an invalid object {@link
 * InvalidArgumentException} ({@code Invalid}, with {@link WorkqueueException#causes()}), a missing
 * one {@link NotFoundException}; a standalone sidecar refuses every write with {@link
 * NoKubernetesException}.
 */
public final class ObjectWrites {
  /** How a patch is read. */
  public enum PatchType {
    /** A JSON merge patch (RFC 7386). */
    MERGE,
    /** A JSON patch (RFC 6902), an array of operations. */
    JSON
  }

  /** What happens to the objects a deleted object owns. */
  public enum Propagation {
    DEFAULT,
    BACKGROUND,
    FOREGROUND,
    ORPHAN
  }

  /**
   * Whether a delete removed the object at once.
   *
   * @param gone true when the object was removed at once
   * @param object the object marked for deletion (finalizers hold it); empty when gone
   */
  public record Deleted(boolean gone, Optional<WrittenObject> object) {}

  private final WorkqueueClient client;
  private final LeaseRef lease;

  ObjectWrites(WorkqueueClient client) {
    this(client, null);
  }

  private ObjectWrites(WorkqueueClient client, LeaseRef lease) {
    this.client = client;
    this.lease = lease;
  }

  /**
   * The same writes, each made under {@code lease} (typically {@link Request#lease()}): made only
   * while the lease is current, else {@link StaleLeaseException} and not made. Null: no lease.
   */
  public ObjectWrites underLease(LeaseRef lease) {
    return new ObjectWrites(client, lease);
  }

  /** The lease these writes are made under; empty for plain writes. */
  public Optional<LeaseRef> lease() {
    return Optional.ofNullable(lease);
  }

  /** Server-side applies {@code body} with the sidecar's field manager. */
  public WrittenObject apply(ResourceType type, String namespace, String name, Object body) {
    return apply(type, namespace, name, body, "", false);
  }

  /** Server-side applies {@code body}; {@code force} takes fields other managers own. */
  public WrittenObject apply(ResourceType type, String namespace, String name, Object body, String fieldManager, boolean force) {
    ApplyObjectRequest.Builder b = ApplyObjectRequest.newBuilder()
        .setType(type.proto())
        .setNamespace(nz(namespace))
        .setName(name)
        .setJson(json(body))
        .setFieldManager(nz(fieldManager))
        .setForce(force);
    if (lease != null) {
      b.setLease(lease.proto());
    }
    ApplyObjectRequest req = b.build();
    return written(call(op("apply ") + describe(type, namespace, name), () -> stub().applyObject(req)).getObject());
  }

  /** Patches the object ({@code status} false) or its status subresource. */
  public WrittenObject patch(ResourceType type, String namespace, String name, PatchType patchType, Object patch, boolean status) {
    PatchObjectRequest.Builder b = PatchObjectRequest.newBuilder()
        .setType(type.proto())
        .setNamespace(nz(namespace))
        .setName(name)
        .setPatchType(patchType == PatchType.MERGE ? workqueue.v1.Object.PatchType.PATCH_TYPE_MERGE : workqueue.v1.Object.PatchType.PATCH_TYPE_JSON)
        .setPatch(json(patch))
        .setStatus(status);
    if (lease != null) {
      b.setLease(lease.proto());
    }
    PatchObjectRequest req = b.build();
    return written(call(op("patch ") + describe(type, namespace, name), () -> stub().patchObject(req)).getObject());
  }

  /** A JSON merge patch of the object. */
  public WrittenObject mergePatch(ResourceType type, String namespace, String name, Object patch) {
    return patch(type, namespace, name, PatchType.MERGE, patch, false);
  }

  /** A JSON patch (RFC 6902) of the object: {@code ops} is the array of operations. */
  public WrittenObject jsonPatch(ResourceType type, String namespace, String name, Object ops) {
    return patch(type, namespace, name, PatchType.JSON, ops, false);
  }

  /** Creates the object; {@link ConflictException} (reason {@code AlreadyExists}) when one of that name exists. */
  public WrittenObject create(ResourceType type, String namespace, Object body) {
    CreateObjectRequest.Builder b = CreateObjectRequest.newBuilder().setType(type.proto()).setNamespace(nz(namespace)).setJson(json(body));
    if (lease != null) {
      b.setLease(lease.proto());
    }
    CreateObjectRequest req = b.build();
    return written(call(op("create ") + describe(type, namespace, ""), () -> stub().createObject(req)).getObject());
  }

  /** Deletes the object, whatever its UID and version. */
  public Deleted delete(ResourceType type, String namespace, String name) {
    return delete(type, namespace, name, "", "", Propagation.DEFAULT);
  }

  /** Deletes the object if it still has {@code uid} and {@code resourceVersion} (each empty: any). */
  public Deleted delete(ResourceType type, String namespace, String name, String uid, String resourceVersion, Propagation propagation) {
    DeleteObjectRequest.Builder b = DeleteObjectRequest.newBuilder()
        .setType(type.proto())
        .setNamespace(nz(namespace))
        .setName(name)
        .setPreconditionUid(nz(uid))
        .setPreconditionResourceVersion(nz(resourceVersion))
        .setPropagation(switch (propagation) {
          case DEFAULT -> workqueue.v1.Object.Propagation.PROPAGATION_UNSPECIFIED;
          case BACKGROUND -> workqueue.v1.Object.Propagation.PROPAGATION_BACKGROUND;
          case FOREGROUND -> workqueue.v1.Object.Propagation.PROPAGATION_FOREGROUND;
          case ORPHAN -> workqueue.v1.Object.Propagation.PROPAGATION_ORPHAN;
        });
    if (lease != null) {
      b.setLease(lease.proto());
    }
    DeleteObjectRequest req = b.build();
    DeleteObjectResponse resp = call(op("delete ") + describe(type, namespace, name), () -> stub().deleteObject(req));
    return new Deleted(resp.getGone(), resp.hasObject() ? Optional.of(written(resp.getObject())) : Optional.empty());
  }

  private WrittenObject written(workqueue.v1.Object.WrittenObject o) {
    return new WrittenObject(o, client.options().objectMapper());
  }

  private ByteString json(Object body) {
    if (body instanceof String s) {
      return ByteString.copyFrom(s, StandardCharsets.UTF_8);
    }
    if (body instanceof byte[] b) {
      return ByteString.copyFrom(b);
    }
    try {
      if (body instanceof JsonNode node) {
        return ByteString.copyFrom(client.options().objectMapper().writeValueAsBytes(node));
      }
      return ByteString.copyFrom(client.options().objectMapper().writeValueAsBytes(body));
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("encoding a " + body.getClass().getName() + " as JSON", e);
    }
  }

  private ObjectServiceGrpc.ObjectServiceBlockingStub stub() {
    return client.objectStub.withDeadlineAfter(client.options().callTimeout().toMillis(), TimeUnit.MILLISECONDS);
  }

  private <T> T call(String op, Supplier<T> rpc) {
    try {
      return rpc.get();
    } catch (StatusRuntimeException e) {
      throw Errors.of(op, client.target(), e);
    }
  }

  private String op(String verb) {
    return lease == null ? verb : "under lease " + lease.queue() + "/" + lease.key() + " " + verb;
  }

  private static String describe(ResourceType type, String namespace, String name) {
    return type.kind() + " " + (namespace == null || namespace.isEmpty() ? name : namespace + "/" + name);
  }

  private static String nz(String s) {
    return s == null ? "" : s;
  }
}
