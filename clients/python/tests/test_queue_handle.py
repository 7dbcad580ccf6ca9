"""The queue handle (client.queue(name)), enum names and the Request's fields, against the real sidecar."""

from __future__ import annotations

import asyncio
import threading

from conftest import Sidecar, running
from workqueue_sidecar import (
    Client,
    KeyPhase,
    Propagation,
    Queue,
    ReasonKind,
    Request,
    SyncClient,
    SyncRequest,
    UnknownQueueError,
)
import pytest


async def test_a_queue_handle_should_name_its_queue_once(client: Client) -> None:
    q = client.queue("default", reason="backfill")
    assert isinstance(q, Queue) and q.name == "default" and repr(q) == "Queue('default')"
    await q.add("ns/a", "ns/b")
    await q.add("ns/urgent", priority=10, reason="page")
    await q.add_after("ns/later", delay=60)
    [backoff] = await q.add_rate_limited("ns/failed")
    assert (backoff.key, backoff.failures) == ("ns/failed", 1)
    assert await q.num_requeues("ns/failed") == 1
    await q.forget("ns/failed")
    assert await q.num_requeues("ns/failed") == 0

    length = await q.len()
    assert length.held == 0 and length.ready + length.waiting == 5
    assert length.ready_by_priority[10] == 1
    a = await q.key_state("ns/a")
    assert a.phase == KeyPhase.QUEUED
    assert [(r.kind, r.source) for r in a.reasons] == [(ReasonKind.MANUAL, "backfill")]
    urgent = await q.key_state("ns/urgent")
    assert (urgent.priority, [r.source for r in urgent.reasons]) == (10, ["page"])

    [lease] = await q.get(wait=1)
    assert lease.key == "ns/urgent"
    await client.done("default", lease.key, lease.token)

    seen: list[str] = []

    async def reconcile(request: Request) -> None:
        seen.append(request.key)

    async with running(client, "default", reconcile):
        for _ in range(200):
            if len(seen) >= 2:
                break
            await asyncio.sleep(0.02)
    assert sorted(seen)[:2] == ["ns/a", "ns/b"]

    report = await q.shut_down(drain=True, drain_timeout=1)
    assert (report.finished, report.returned) == (0, 0)
    with pytest.raises(UnknownQueueError):
        await client.queue("nope").add("x")


async def test_queue_handle_run_should_reconcile_its_queue(client: Client) -> None:
    q = client.queue("default")
    stop = asyncio.Event()
    seen: list[Request] = []

    async def reconcile(request: Request) -> None:
        seen.append(request)
        stop.set()

    await q.add("web/frontend")
    await asyncio.wait_for(q.run(reconcile, stop=stop), 15)
    [request] = seen
    assert (request.queue, request.key, request.namespace, request.name) == ("default", "web/frontend", "web", "frontend")
    assert (request.deleting, request.deletion_timestamp) == (False, None)
    assert request.lease.queue == "default" and request.lease.key == "web/frontend" and request.lease.token > 0
    assert request.objects.lease == request.lease


def test_a_sync_queue_handle_should_work_the_same(sidecar: Sidecar) -> None:
    stop = threading.Event()
    seen: list[SyncRequest] = []

    def reconcile(request: SyncRequest) -> None:
        seen.append(request)
        stop.set()

    with SyncClient.connect(sidecar.target) as client:
        q = client.queue("default")
        q.add("cluster-scoped")
        assert q.key_state("cluster-scoped").phase == KeyPhase.QUEUED
        assert q.len().ready == 1
        q.run(reconcile, stop=stop)
        assert q.key_state("cluster-scoped").phase == KeyPhase.ABSENT
        assert q.num_requeues("cluster-scoped") == 0
    [request] = seen
    assert isinstance(request, SyncRequest)
    assert (request.namespace, request.name) == ("", "cluster-scoped")
    assert request.objects.lease == request.lease


def test_enums_should_print_as_their_names() -> None:
    assert str(KeyPhase.HELD) == "HELD" and f"{KeyPhase.SETTLING}" == "SETTLING"
    assert repr(KeyPhase.HELD) == "KeyPhase.HELD"
    assert str(ReasonKind.INITIAL_LIST) == "INITIAL_LIST" and f"{ReasonKind.RETRY:>6}" == " RETRY"
    assert str(Propagation.FOREGROUND) == "FOREGROUND"
    assert int(KeyPhase.HELD) == 4 and KeyPhase(5) is KeyPhase.SETTLING  # still the wire values


async def test_key_info_should_print_its_phase_by_name(client: Client) -> None:
    await client.queue("default").add("ns/a")
    info = await client.queue("default").key_state("ns/a")
    assert "phase=KeyPhase.QUEUED" in repr(info) and "ReasonKind.MANUAL" in repr(info)
    assert f"{info.phase}" == "QUEUED" and info.settling_until is None
