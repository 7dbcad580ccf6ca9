"""Writes to Kubernetes through the sidecar (ObjectService): apply, patch, create, delete of any kind."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import grpc

from ._enum import NamedIntEnum
from .errors import from_rpc_error
from .v1 import object_pb2 as pb
from .v1 import object_pb2_grpc

#: A JSON object as this client takes and gives it.
JSONObject = dict[str, Any]


class Propagation(NamedIntEnum):
    """What happens to the objects a deleted object owns (the proto's Propagation)."""

    #: The resource's default (for most, BACKGROUND).
    DEFAULT = pb.PROPAGATION_UNSPECIFIED
    #: The object goes at once; the garbage collector deletes its dependents afterwards.
    BACKGROUND = pb.PROPAGATION_BACKGROUND
    #: The object stays, with a foregroundDeletion finalizer, until its blocking dependents are gone.
    FOREGROUND = pb.PROPAGATION_FOREGROUND
    #: The dependents are kept, their owner references to it removed.
    ORPHAN = pb.PROPAGATION_ORPHAN


@dataclass(frozen=True)
class ObjectRef:
    """Names one object: its apiVersion and kind, its namespace (empty for a
    cluster-scoped one) and its name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any] | ObjectRef) -> ObjectRef:
        """The reference of an object given as a dict (e.g. read from the cache)."""
        if isinstance(obj, ObjectRef):
            return obj
        metadata = obj.get("metadata") or {}
        return cls(obj.get("apiVersion", ""), obj.get("kind", ""), metadata.get("namespace", ""), metadata.get("name", ""))

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"

    def _type(self) -> pb.ResourceType:
        return pb.ResourceType(api_version=self.api_version, kind=self.kind)


@dataclass(frozen=True)
class Written:
    """An object as the API server returned it after a write."""

    #: The whole object.
    data: JSONObject
    #: Its metadata.resourceVersion: pass it to a cache read as
    #: ``min_resource_version`` to read this write back from the cache.
    resource_version: str
    #: Its metadata.uid.
    uid: str

    @classmethod
    def from_proto(cls, message: pb.WrittenObject) -> Written:
        data = json.loads(message.json) if message.json else {}
        return cls(data, message.resource_version, message.uid)


@dataclass(frozen=True)
class Deletion:
    """What a delete did."""

    #: True when the object was removed at once; False when it still exists,
    #: marked for deletion, because finalizers (or foreground propagation) hold it.
    gone: bool
    #: The object marked for deletion (with its deletionTimestamp); None when gone.
    object: Written | None


@dataclass(frozen=True)
class LeaseRef:
    """The lease a write is made under: the queue, the key and the lease's token."""

    queue: str
    key: str
    token: int

    def _proto(self) -> pb.LeaseRef:
        return pb.LeaseRef(queue=self.queue, key=self.key, token=self.token)


class Objects:
    """Writes Kubernetes objects through the sidecar, with its credentials, so a
    worker needs no Kubernetes client library. Objects are dicts in and out.

    ``client.objects`` writes without naming a lease. Inside a reconcile use
    ``req.objects``: its writes name the request's lease, so the sidecar makes
    them only while the lease is current (``StaleLeaseError`` once it ended)
    and does not hand the key out again until its caches have seen them (the
    next reconcile never reads a cache older than its own last write).

    Refusals raise: ``ConflictError`` (409: a stale resourceVersion, a failed
    precondition, fields another manager owns; ``AlreadyExistsError`` is one),
    ``NotFoundError`` (404), ``ForbiddenError`` (403), ``InvalidArgumentError``
    (400, 422, with the API server's ``causes``), ``UnknownKindError``,
    ``StaleLeaseError``, ``NoKubernetesError``, and
    ``LeaseEndedDuringWriteError`` (a ``ConflictError`` too: the write was
    made, but its lease ended before the API server answered it).
    """

    def __init__(self, channel: grpc.aio.Channel, lease: LeaseRef | None = None) -> None:
        self._stub: Any = object_pb2_grpc.ObjectServiceStub(channel)
        #: The lease the writes name; None for writes outside a lease.
        self.lease = lease

    def under(self, lease: LeaseRef | None) -> Objects:
        """The same writes, made under ``lease`` (e.g. a ``Request``'s ``lease``)."""
        bound = copy.copy(self)
        bound.lease = lease
        return bound

    def _lease(self) -> pb.LeaseRef | None:
        return None if self.lease is None else self.lease._proto()

    async def _call(self, method: Any, request: Any) -> Any:
        try:
            return await method(request)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err, "object") from err

    async def apply(
        self, obj: Mapping[str, Any], *, field_manager: str = "", force: bool = False
    ) -> Written:
        """Server-side applies ``obj``: the fields it sets become owned by the field
        manager (the sidecar's unless ``field_manager``), others' are left alone.
        ``obj`` carries apiVersion, kind and metadata.name (and namespace). A field
        another manager owns raises ``ConflictError`` unless ``force``."""
        ref = _ref_of(obj, need_name=True)
        request = pb.ApplyObjectRequest(
            type=ref._type(),
            namespace=ref.namespace,
            name=ref.name,
            json=_encode(obj),
            field_manager=field_manager,
            force=force,
            lease=self._lease(),
        )
        response: pb.ApplyObjectResponse = await self._call(self._stub.ApplyObject, request)
        return Written.from_proto(response.object)

    async def create(self, obj: Mapping[str, Any], *, field_manager: str = "") -> Written:
        """Creates ``obj`` (apiVersion, kind, metadata with a name or generateName);
        ``AlreadyExistsError`` when one of that name exists."""
        ref = _ref_of(obj, need_name=False)
        request = pb.CreateObjectRequest(
            type=ref._type(),
            namespace=ref.namespace,
            json=_encode(obj),
            field_manager=field_manager,
            lease=self._lease(),
        )
        response: pb.CreateObjectResponse = await self._call(self._stub.CreateObject, request)
        return Written.from_proto(response.object)

    async def patch(
        self,
        target: ObjectRef | Mapping[str, Any],
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        status: bool = False,
        field_manager: str = "",
    ) -> Written:
        """Patches the object ``target`` names (an ``ObjectRef``, or the object
        itself as a dict), or its status subresource with ``status=True``. A dict
        ``patch`` is a JSON merge patch (``None`` deletes a field); a list is a
        JSON patch (``[{"op": "test", "path": ..., "value": ...}, ...]``)."""
        ref = _ref_of(target, need_name=True)
        if isinstance(patch, Mapping):
            patch_type = pb.PATCH_TYPE_MERGE
        elif isinstance(patch, Sequence) and not isinstance(patch, (str, bytes)):
            patch_type = pb.PATCH_TYPE_JSON
        else:
            raise TypeError(f"a patch is a dict (merge patch) or a list (JSON patch), got {type(patch).__name__}")
        request = pb.PatchObjectRequest(
            type=ref._type(),
            namespace=ref.namespace,
            name=ref.name,
            patch_type=patch_type,
            patch=_encode(patch),
            status=status,
            field_manager=field_manager,
            lease=self._lease(),
        )
        response: pb.PatchObjectResponse = await self._call(self._stub.PatchObject, request)
        return Written.from_proto(response.object)

    async def delete(
        self,
        target: ObjectRef | Mapping[str, Any],
        *,
        uid: str = "",
        resource_version: str = "",
        propagation: Propagation = Propagation.DEFAULT,
    ) -> Deletion:
        """Deletes the object ``target`` names, only if it still has ``uid`` and
        ``resource_version`` when given (``ConflictError`` otherwise).
        ``NotFoundError`` when there is no such object."""
        ref = _ref_of(target, need_name=True)
        request = pb.DeleteObjectRequest(
            type=ref._type(),
            namespace=ref.namespace,
            name=ref.name,
            precondition_uid=uid,
            precondition_resource_version=resource_version,
            propagation=cast(pb.Propagation, int(propagation)),
            lease=self._lease(),
        )
        response: pb.DeleteObjectResponse = await self._call(self._stub.DeleteObject, request)
        written = Written.from_proto(response.object) if response.HasField("object") else None
        return Deletion(response.gone, written)


def _ref_of(obj: ObjectRef | Mapping[str, Any], *, need_name: bool) -> ObjectRef:
    if not isinstance(obj, (ObjectRef, Mapping)):
        raise TypeError(f"an object is a dict or an ObjectRef, got {type(obj).__name__}")
    ref = ObjectRef.of(obj)
    if not ref.api_version or not ref.kind:
        raise ValueError(f"the object has no apiVersion or kind: {ref}")
    if need_name and not ref.name:
        raise ValueError(f"the object has no metadata.name: {ref}")
    return ref


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def controller_ref(owner: Mapping[str, Any]) -> JSONObject:
    """The controller ownerReference a child carries to say ``owner`` (an object
    as a dict, e.g. ``req.object.data``) controls it: the owner's apiVersion,
    kind, name and uid, with ``controller`` and ``blockOwnerDeletion`` true.
    Put it in the child's ``metadata.ownerReferences``; the garbage collector
    then deletes the child with its owner."""
    metadata = owner.get("metadata") or {}
    ref = {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": metadata.get("name", ""),
        "uid": metadata.get("uid", ""),
    }
    missing = [field for field, value in ref.items() if not value]
    if missing:
        raise ValueError(f"the owner lacks {', '.join(missing)}")
    return {**ref, "controller": True, "blockOwnerDeletion": True}
