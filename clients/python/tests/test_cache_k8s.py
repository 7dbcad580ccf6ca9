"""Cache reads and leases with objects, against a sidecar whose informer watches a real kube-apiserver."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from conftest import Sidecar, StartSidecar, running
from workqueue_sidecar import (
    CacheNotReadyError,
    Client,
    InvalidArgumentError,
    ReasonKind,
    Request,
    UnknownInformerError,
)

pytestmark = pytest.mark.k8s

CONFIG = """
informers:
  configmaps:
    version: v1
    kind: ConfigMap
    namespace: {namespace}
    indexes:
      by-app: {{ field: data.app }}
queues:
  configmaps:
    primary: configmaps
"""


@pytest.fixture
def namespace(kubeconfig: str) -> Iterator[tuple[k8s.CoreV1Api, str]]:
    """A fresh namespace holding ConfigMaps a, b (label tier=web, data.app=shop) and c (tier=db)."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
    name = f"pycache-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    for cm, tier, app in (("a", "web", "shop"), ("b", "web", "shop"), ("c", "db", "ledger")):
        body = {"metadata": {"name": cm, "labels": {"tier": tier}}, "data": {"app": app}}
        core.create_namespaced_config_map(name, body)
    yield core, name
    core.delete_namespace(name)


@pytest.fixture
def cache_sidecar(start_sidecar: StartSidecar, kubeconfig: str, namespace: tuple[k8s.CoreV1Api, str]) -> Sidecar:
    return start_sidecar(config=CONFIG.format(namespace=namespace[1]), args=["--kubeconfig", kubeconfig])


def names(objects: list[dict[str, Any]]) -> list[str]:
    return [o["metadata"]["name"] for o in objects]


# conformance: C11
async def test_cache_reads_should_serve_the_informer_cache(
    cache_sidecar: Sidecar, namespace: tuple[k8s.CoreV1Api, str]
) -> None:
    core, ns = namespace
    async with Client.connect(cache_sidecar.target) as client:
        cache = client.cache
        a = await cache.get("configmaps", ns, "a", wait=10)
        assert a is not None and a["data"] == {"app": "shop"} and a["metadata"]["labels"] == {"tier": "web"}
        assert await cache.get("configmaps", ns, "missing") is None
        found = await cache.get_object("configmaps", ns, "a")
        assert found is not None
        assert (found.namespace, found.name, found.deleted) == (ns, "a", False)
        assert found.resource_version == a["metadata"]["resourceVersion"]

        assert names(await cache.list("configmaps")) == ["a", "b", "c"]
        assert names(await cache.list("configmaps", namespace=ns, label_selector="tier=web")) == ["a", "b"]
        assert names(await cache.list("configmaps", label_selector="tier!=web")) == ["c"]
        assert names(await cache.list("configmaps", index=("by-app", "ledger"))) == ["c"]
        assert names(await cache.list("configmaps", page_size=1)) == ["a", "b", "c"]  # three pages
        assert [o.name async for o in cache.list_objects("configmaps", page_size=2)] == ["a", "b", "c"]

        # Read-your-writes: wait for the version the API server returned for a write.
        written = await asyncio.to_thread(core.patch_namespaced_config_map, "a", ns, {"data": {"app": "cart"}})
        version = written.metadata.resource_version
        after = await cache.get("configmaps", ns, "a", min_resource_version=version, wait=10)
        assert after is not None and after["data"] == {"app": "cart"}
        with pytest.raises(CacheNotReadyError):
            await cache.get("configmaps", ns, "a", min_resource_version=str(int(version) + 10**9), wait=0.2)

        # A deleted object: gone from get and list, its last state kept as a tombstone.
        await asyncio.to_thread(core.delete_namespaced_config_map, "b", ns)
        deleted = await cache.get_object("configmaps", ns, "b", include_deleted=True)
        for _ in range(100):
            if deleted is not None and deleted.deleted:
                break
            await asyncio.sleep(0.05)
            deleted = await cache.get_object("configmaps", ns, "b", include_deleted=True)
        assert deleted is not None and deleted.deleted and deleted.data["data"] == {"app": "shop"}
        assert await cache.get("configmaps", ns, "b") is None
        assert names(await cache.list("configmaps")) == ["a", "c"]

        with pytest.raises(UnknownInformerError):
            await cache.get("nope", ns, "a")
        with pytest.raises(UnknownInformerError):
            await cache.list("configmaps", index=("nope", "x"))
        with pytest.raises(InvalidArgumentError):
            await cache.get("configmaps", ns, "a", min_resource_version="not-a-number")


async def test_leases_should_carry_the_cached_object_when_asked(
    cache_sidecar: Sidecar, namespace: tuple[k8s.CoreV1Api, str]
) -> None:
    _, ns = namespace
    seen: dict[str, Request] = {}

    async def reconcile(request: Request) -> None:
        seen[request.key] = request

    async with Client.connect(cache_sidecar.target) as client:
        async with running(client, "configmaps", reconcile, concurrency=3, include_object=True):
            for _ in range(200):
                if len(seen) == 3:
                    break
                await asyncio.sleep(0.05)
    assert sorted(seen) == [f"{ns}/a", f"{ns}/b", f"{ns}/c"]
    a = seen[f"{ns}/a"]
    assert (a.namespace, a.name) == (ns, "a")
    assert a.object is not None and a.object.data["data"] == {"app": "shop"} and not a.object.deleted
    assert [(r.kind, r.source) for r in a.reasons] == [(ReasonKind.INITIAL_LIST, "configmaps")]
