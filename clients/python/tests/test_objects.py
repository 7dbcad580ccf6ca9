"""Writes through the sidecar (client.objects, req.objects) against a standalone sidecar, and their model."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from conftest import Sidecar
from workqueue_sidecar import (
    AlreadyExistsError,
    Cause,
    Client,
    ConflictError,
    ForbiddenError,
    InvalidArgumentError,
    LeaseEndedDuringWriteError,
    NoKubernetesError,
    NotFoundError,
    ObjectRef,
    Request,
    StaleLeaseError,
    SyncClient,
    SyncRequest,
    UnknownKindError,
    controller_ref,
)
from workqueue_sidecar.cached_object import CachedObject
from workqueue_sidecar.errors import error_for, from_rpc_error

CONFIG_MAP: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
REF = ObjectRef("v1", "ConfigMap", "default", "a")


# conformance: C12
async def test_writes_to_a_sidecar_without_kubernetes_should_raise_no_kubernetes(client: Client) -> None:
    for objects in (client.objects, client.objects.under(None)):
        for write in (
            objects.apply(CONFIG_MAP),
            objects.create(CONFIG_MAP),
            objects.patch(REF, {"data": {"x": "1"}}),
            objects.patch(CONFIG_MAP, [{"op": "add", "path": "/data", "value": {}}]),
            objects.delete(REF),
        ):
            with pytest.raises(NoKubernetesError) as raised:
                await write
            assert raised.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert not isinstance(raised.value, StaleLeaseError)

    # Under a lease too: the sidecar's missing Kubernetes is not a stale lease.
    errors: list[Exception] = []
    stop = asyncio.Event()

    async def reconcile(request: Request) -> None:
        try:
            await request.objects.apply(CONFIG_MAP)
        except Exception as err:
            errors.append(err)
        stop.set()

    await client.queue("default").add("default/a")
    await asyncio.wait_for(client.queue("default").run(reconcile, stop=stop), 15)
    assert [type(e) for e in errors] == [NoKubernetesError]


def test_sync_writes_should_raise_the_same(sidecar: Sidecar) -> None:
    stop = threading.Event()
    errors: list[Exception] = []

    def reconcile(request: SyncRequest) -> None:
        try:
            request.objects.delete(REF)
        except Exception as err:
            errors.append(err)
        stop.set()

    with SyncClient.connect(sidecar.target) as client:
        with pytest.raises(NoKubernetesError):
            client.objects.apply(CONFIG_MAP)
        client.queue("default").add("default/a")
        client.queue("default").run(reconcile, stop=stop)
    assert [type(e) for e in errors] == [NoKubernetesError]


async def test_malformed_writes_should_be_refused_before_the_call(client: Client) -> None:
    with pytest.raises(ValueError):
        await client.objects.apply({"metadata": {"name": "a"}})  # no apiVersion, kind
    with pytest.raises(ValueError):
        await client.objects.apply({"apiVersion": "v1", "kind": "ConfigMap"})  # no name
    with pytest.raises(TypeError):
        await client.objects.patch(REF, "not a patch")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):
        Request("default", "ns/a").objects  # built by hand: no lease, no client


def test_refused_writes_should_map_to_exceptions() -> None:
    def obj(code: grpc.StatusCode, message: str = "", reason: str = "", **kw: Any) -> Exception:
        return error_for(code, message or reason, "object", reason=reason, **kw)

    assert type(obj(grpc.StatusCode.ABORTED, reason="Conflict")) is ConflictError
    already = obj(grpc.StatusCode.ABORTED, reason="AlreadyExists")
    assert type(already) is AlreadyExistsError and isinstance(already, ConflictError)
    assert type(obj(grpc.StatusCode.NOT_FOUND, reason="NotFound", http_status=404)) is NotFoundError
    assert type(obj(grpc.StatusCode.NOT_FOUND, "no kind Foo: is its CRD installed?")) is UnknownKindError
    assert type(obj(grpc.StatusCode.PERMISSION_DENIED, reason="Forbidden")) is ForbiddenError
    assert type(obj(grpc.StatusCode.FAILED_PRECONDITION, "stale lease token 3", "STALE_LEASE")) is StaleLeaseError
    # Told apart by the sidecar's ErrorInfo reason, not the words.
    assert type(obj(grpc.StatusCode.FAILED_PRECONDITION, "no writes here", "NO_KUBERNETES")) is NoKubernetesError
    invalid = obj(
        grpc.StatusCode.INVALID_ARGUMENT,
        reason="Invalid",
        http_status=422,
        causes=(Cause("metadata.name", "must be lowercase"),),
    )
    assert type(invalid) is InvalidArgumentError
    assert (invalid.reason, invalid.http_status, invalid.causes) == (
        "Invalid",
        422,
        (Cause("metadata.name", "must be lowercase"),),
    )


def _refusal(code: grpc.StatusCode, message: str, *infos: error_details_pb2.ErrorInfo) -> grpc.aio.AioRpcError:
    """A failed call as the sidecar answers it: the status with its ErrorInfo
    details in the ``grpc-status-details-bin`` trailer."""
    status = status_pb2.Status(code=code.value[0], message=message)
    for info in infos:
        status.details.add().Pack(info)
    trailer = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailer, details=message)


def test_a_write_whose_lease_ended_before_its_answer_should_raise_lease_ended_during_write() -> None:
    message = 'the write was made, but the lease on "default/a" of queue "q" ended before the API server answered it'
    ended = from_rpc_error(
        _refusal(
            grpc.StatusCode.ABORTED,
            message,
            error_details_pb2.ErrorInfo(domain="workqueue-sidecar", reason="LEASE_ENDED_DURING_WRITE"),
        ),
        "object",
    )
    assert type(ended) is LeaseEndedDuringWriteError and isinstance(ended, ConflictError)
    assert (ended.code, ended.message) == (grpc.StatusCode.ABORTED, message)
    # An API server's 409 (with its ErrorInfo, or none) is a plain conflict.
    conflict = from_rpc_error(
        _refusal(
            grpc.StatusCode.ABORTED,
            "the object has been modified",
            error_details_pb2.ErrorInfo(domain="k8s.io", reason="Conflict", metadata={"http_status": "409"}),
        ),
        "object",
    )
    assert type(conflict) is ConflictError
    assert type(from_rpc_error(_refusal(grpc.StatusCode.ABORTED, "conflict"), "object")) is ConflictError


def test_controller_ref_should_name_the_owner() -> None:
    user = {"apiVersion": "example.com/v1", "kind": "User", "metadata": {"name": "alice", "uid": "u-1"}}
    want = {
        "apiVersion": "example.com/v1",
        "kind": "User",
        "name": "alice",
        "uid": "u-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert controller_ref(user) == want
    request = Request("users", "alice", object=CachedObject(user, "1", False, "", "alice"))
    assert request.controller_ref() == want
    with pytest.raises(ValueError):
        Request("users", "alice").controller_ref()
    with pytest.raises(ValueError):
        controller_ref({"kind": "User", "metadata": {"name": "alice"}})


def test_object_refs_should_come_from_objects() -> None:
    assert ObjectRef.of(CONFIG_MAP) == REF
    assert str(REF) == "ConfigMap default/a"
    assert str(ObjectRef("v1", "Namespace", "", "user-a")) == "Namespace user-a"
