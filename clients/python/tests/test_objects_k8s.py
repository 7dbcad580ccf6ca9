"""Writes through the sidecar (client.objects, req.objects) against a real kube-apiserver."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from conftest import Sidecar, StartSidecar, eventually
from workqueue_sidecar import (
    AlreadyExistsError,
    Client,
    ConflictError,
    InvalidArgumentError,
    KeyPhase,
    NotFoundError,
    ObjectRef,
    Propagation,
    Request,
    StaleLeaseError,
    UnknownKindError,
)

pytestmark = pytest.mark.k8s

CONFIG = """
informers:
  configmaps:
    version: v1
    kind: ConfigMap
    namespace: {namespace}
    label_selector: role=owner
queues:
  configmaps:
    primary: configmaps
    settle_timeout: 20s
writes:
  - {{ kind: ConfigMap, namespaces: [{namespace}], lease: optional }}
  # Declared, so that a delete of it reaches discovery (an unknown kind).
  - {{ group: nope.example.com, kind: Nope, lease: optional }}
"""


@pytest.fixture
def namespace(kubeconfig: str) -> Iterator[tuple[k8s.CoreV1Api, str]]:
    """A fresh namespace holding the ConfigMap "owner" (label role=owner, data n=0)."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
    name = f"pyobj-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_config_map(name, {"metadata": {"name": "owner", "labels": {"role": "owner"}}, "data": {"n": "0"}})
    yield core, name
    core.delete_namespace(name)


@pytest.fixture
def writing_sidecar(start_sidecar: StartSidecar, kubeconfig: str, namespace: tuple[k8s.CoreV1Api, str]) -> Sidecar:
    return start_sidecar(config=CONFIG.format(namespace=namespace[1]), args=["--kubeconfig", kubeconfig])


def config_map(ns: str, name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


# conformance: C12
async def test_writes_should_reach_the_api_server_and_map_its_refusals(
    writing_sidecar: Sidecar, namespace: tuple[k8s.CoreV1Api, str]
) -> None:
    core, ns = namespace
    async with Client.connect(writing_sidecar.target) as client:
        objects = client.objects
        applied = await objects.apply(config_map(ns, "a", team="red"), field_manager="pytest")
        assert applied.data["data"] == {"team": "red"} and applied.resource_version and applied.uid
        ref = ObjectRef("v1", "ConfigMap", ns, "a")

        patched = await objects.patch(ref, {"data": {"team": "blue", "size": "3"}})
        assert patched.data["data"] == {"team": "blue", "size": "3"}
        patched = await objects.patch(patched.data, [{"op": "remove", "path": "/data/size"}])
        assert patched.data["data"] == {"team": "blue"}
        on_server = await asyncio.to_thread(core.read_namespaced_config_map, "a", ns)
        assert on_server.data == {"team": "blue"}

        # Conflicts: a stale resourceVersion, an existing name, failed preconditions, another manager's field.
        stale = {"metadata": {"resourceVersion": applied.resource_version}, "data": {"team": "green"}}
        with pytest.raises(ConflictError) as conflict:
            await objects.patch(ref, stale)
        assert type(conflict.value) is ConflictError
        assert (conflict.value.reason, conflict.value.http_status) == ("Conflict", 409)
        with pytest.raises(AlreadyExistsError):
            await objects.create(config_map(ns, "a"))
        with pytest.raises(ConflictError):
            await objects.delete(ref, resource_version=applied.resource_version)
        with pytest.raises(ConflictError):
            await objects.delete(ref, uid="00000000-0000-0000-0000-000000000000")
        with pytest.raises(ConflictError):
            await objects.apply(config_map(ns, "a", team="mine"))
        forced = await objects.apply(config_map(ns, "a", team="mine"), force=True)
        assert forced.data["data"]["team"] == "mine"

        # Invalid, with the API server's causes.
        with pytest.raises(InvalidArgumentError) as invalid:
            await objects.create(config_map(ns, "Not_Valid"))
        assert (invalid.value.reason, invalid.value.http_status) == ("Invalid", 422)
        assert [c.field for c in invalid.value.causes][:1] == ["metadata.name"]

        # Not found, an unknown kind.
        with pytest.raises(NotFoundError):
            await objects.delete(ObjectRef("v1", "ConfigMap", ns, "missing"))
        with pytest.raises(NotFoundError):
            await objects.patch(ObjectRef("v1", "ConfigMap", ns, "missing"), {"data": None})
        with pytest.raises(UnknownKindError):
            await objects.delete(ObjectRef("nope.example.com/v1", "Nope", "", "x"))

        # generateName, then deletes.
        made = await objects.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "g-", "namespace": ns}}
        )
        assert made.data["metadata"]["name"].startswith("g-")
        gone = await objects.delete(made.data, uid=made.uid, propagation=Propagation.BACKGROUND)
        assert (gone.gone, gone.object) == (True, None)
        assert (await objects.delete(ref)).gone


# conformance: C13
async def test_writes_under_a_lease_should_be_fenced_and_settle_the_key(
    writing_sidecar: Sidecar, namespace: tuple[k8s.CoreV1Api, str]
) -> None:
    _, ns = namespace
    owner = ObjectRef("v1", "ConfigMap", ns, "owner")
    async with Client.connect(writing_sidecar.target) as client:
        q = client.queue("configmaps")
        [lease] = await q.get(wait=30, include_object=True)
        assert lease.key == f"{ns}/owner"
        await client.done("configmaps", lease.key, lease.token)
        stale = Request.from_lease("configmaps", lease, client.objects)
        with pytest.raises(StaleLeaseError):
            await stale.objects.patch(owner, {"data": {"n": "7"}})
        with pytest.raises(StaleLeaseError):
            await client.objects.under(stale.lease).delete(owner)
        cached = await client.cache.get("configmaps", ns, "owner")
        assert cached is not None and cached["data"] == {"n": "0"}, "the refused writes were not made"

        # Under a current lease: made, and the key settles when the lease ends.
        await q.add(f"{ns}/owner")
        [lease] = await q.get(wait=30)
        current = Request.from_lease("configmaps", lease, client.objects)
        written = await current.objects.patch(owner, {"data": {"n": "9"}})
        await client.done("configmaps", lease.key, lease.token)
        first = await q.key_state(f"{ns}/owner")
        # The watch may have delivered the write already: then the key is queued
        # again at once (its own write's event made it dirty).
        assert first.phase in (KeyPhase.SETTLING, KeyPhase.QUEUED), first
        if first.phase == KeyPhase.SETTLING:
            assert first.settling_until is not None

        async def queued() -> bool:
            return (await q.key_state(f"{ns}/owner")).phase == KeyPhase.QUEUED

        await eventually(queued, timeout=15)
        after = await client.cache.get("configmaps", ns, "owner")
        assert after is not None and after["data"] == {"n": "9"}, written.resource_version

        # A reconcile writes a child owned by its object, under its lease.
        children: list[dict[str, Any]] = []
        stop = asyncio.Event()

        async def reconcile(req: Request) -> None:
            child = config_map(req.namespace, f"{req.name}-child")
            child["metadata"]["ownerReferences"] = [req.controller_ref()]
            children.append((await req.objects.apply(child)).data)
            stop.set()

        await asyncio.wait_for(q.run(reconcile, include_object=True, stop=stop), 30)
        [child] = children
        [ref] = child["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == ("ConfigMap", "owner", True, True)
