"""KeyState's shard place, against a sidecar that shares a queue in a shard group (its Lease on a real kube-apiserver)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from conftest import Sidecar, StartSidecar, eventually
from workqueue_sidecar import Client, KeyInfo

pytestmark = pytest.mark.k8s

#: The informer selects nothing: by namespace, a key's slot comes from the key.
CONFIG = """
informers:
  configmaps: {{ version: v1, kind: ConfigMap, namespace: {namespace}, label_selector: none=none }}
queues:
  sharded: {{ primary: configmaps, shard_by: namespace }}
  plain: {{}}
"""
IDENTITY = "r0"
#: A 3 s Lease renewed every 0.5 s, as the sidecar's own replica tests.
FAST_LEASES = [
    "--leader-election-lease-duration=3s",
    "--leader-election-renew-deadline=2s",
    "--leader-election-retry-period=500ms",
]


@pytest.fixture
def namespace(kubeconfig: str) -> Iterator[str]:
    """A fresh namespace for the replica's Lease, deleted with it after the test."""
    core = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=kubeconfig))
    name = f"pyshard-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def sharded_sidecar(namespace: str, kubeconfig: str, start_sidecar: StartSidecar) -> Sidecar:
    """One replica of a shard group; the namespace outlives it, so it can leave."""
    args = ["--kubeconfig", kubeconfig, "--shard-group", "shards", "--leader-election-namespace", namespace]
    args += ["--leader-election-identity", IDENTITY, *FAST_LEASES]
    return start_sidecar(config=CONFIG.format(namespace=namespace), args=args)


# conformance: C14
async def test_key_state_should_name_the_replica_that_owns_the_keys_shard(
    sharded_sidecar: Sidecar, namespace: str
) -> None:
    key = f"{namespace}/a"
    async with Client.connect(sharded_sidecar.target) as client:
        sharded = client.queue("sharded")
        seen: list[KeyInfo] = []

        async def granted_here() -> bool:
            seen.append(await sharded.key_state(key))
            return seen[-1].shard is not None and seen[-1].shard.granted_here

        await eventually(granted_here, timeout=30)
        shard = seen[-1].shard
        assert shard is not None
        assert shard.slot is not None and 0 <= shard.slot < 4096, shard
        assert shard.owner == IDENTITY, shard

        plain = await client.queue("plain").key_state(key)
        assert plain.shard is None
