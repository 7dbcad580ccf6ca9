"""The unary queue calls and their errors, against the real sidecar."""

from __future__ import annotations

import tempfile
from datetime import datetime, timezone

import pytest

from conftest import Sidecar, StartSidecar
from workqueue_sidecar import (
    Client,
    InvalidArgumentError,
    KeyPhase,
    ReasonKind,
    Result,
    ShuttingDownError,
    StaleLeaseError,
    UnknownQueueError,
)


async def test_add_len_and_key_state_should_describe_the_queue(client: Client) -> None:
    await client.add("default", "ns/a", "ns/b", reason="backfill")
    await client.add("default", "ns/c", priority=10)
    await client.add_after("default", "ns/later", delay=60)

    length = await client.len("default")
    assert (length.ready, length.waiting, length.held, length.dirty) == (3, 1, 0, 0)
    assert length.ready_by_priority == {10: 1, 0: 2}

    a = await client.key_state("default", "ns/a")
    assert a.phase == KeyPhase.QUEUED
    assert [(r.kind, r.source) for r in a.reasons] == [(ReasonKind.MANUAL, "backfill")]
    assert a.queued_since is not None and a.waiting_until is None
    later = await client.key_state("default", "ns/later")
    assert later.phase == KeyPhase.WAITING
    assert later.waiting_until is not None and later.waiting_until > datetime.now(timezone.utc)
    assert (await client.key_state("default", "ns/unknown")).phase == KeyPhase.ABSENT


async def test_add_rate_limited_and_forget_should_count_failures(client: Client) -> None:
    first = await client.add_rate_limited("default", "ns/a")
    second = await client.add_rate_limited("default", "ns/a")
    assert [(k.key, k.failures) for k in first + second] == [("ns/a", 1), ("ns/a", 2)]
    assert second[0].delay > first[0].delay
    assert await client.num_requeues("default", "ns/a") == 2
    await client.forget("default", "ns/a")
    assert await client.num_requeues("default", "ns/a") == 0


async def test_leases_by_hand_should_be_fenced_by_their_token(client: Client) -> None:
    await client.add("default", "ns/a")
    [lease] = await client.get("default", wait=1, lease_ttl=5)
    assert lease.key == "ns/a" and lease.token != 0
    assert lease.object is None
    assert 0 < lease.ttl.total_seconds() <= 5
    held = await client.key_state("default", "ns/a")
    assert (held.phase, held.holder) == (KeyPhase.HELD, "pytest")

    extension = await client.extend("default", "ns/a", lease.token, ttl=10)
    assert not extension.cancel and extension.ttl.total_seconds() > 5
    await client.finish("default", "ns/a", lease.token, Result(requeue_after=30))
    assert (await client.key_state("default", "ns/a")).phase == KeyPhase.WAITING

    # The lease has ended: every call with its token is refused and changes nothing.
    with pytest.raises(StaleLeaseError):
        await client.finish("default", "ns/a", lease.token)
    with pytest.raises(StaleLeaseError):
        await client.done("default", "ns/a", lease.token)
    with pytest.raises(StaleLeaseError) as raised:
        await client.extend("default", "ns/a", lease.token)
    assert raised.value.code is not None and raised.value.code.name == "FAILED_PRECONDITION"
    assert (await client.key_state("default", "ns/a")).phase == KeyPhase.WAITING


async def test_finish_with_an_error_should_retry_and_keep_the_error(client: Client) -> None:
    await client.add("default", "ns/a")
    [lease] = await client.get("default", wait=1)
    await client.finish("default", "ns/a", lease.token, error="upstream said no")
    state = await client.key_state("default", "ns/a")
    assert (state.failures, state.last_error) == (1, "upstream said no")


async def test_get_should_return_nothing_when_no_key_becomes_ready(client: Client) -> None:
    assert await client.get("default", wait=0.1) == []


# conformance: C10
async def test_errors_should_map_to_their_exceptions(client: Client) -> None:
    with pytest.raises(UnknownQueueError, match="nope"):
        await client.add("nope", "ns/a")
    with pytest.raises(InvalidArgumentError):
        await client.add("default", "")
    with pytest.raises(ValueError):
        await client.add_after("default", "ns/a", delay=-1)


async def test_shut_down_with_drain_should_report_and_refuse_adds(client: Client) -> None:
    await client.add("default", "ns/a")
    await client.get("default", wait=1)
    report = await client.shut_down("default", drain=True, drain_timeout=0.2)
    assert (report.finished, report.returned) == (0, 1)
    with pytest.raises(ShuttingDownError):
        await client.add("default", "ns/b")


async def test_a_unix_socket_target_should_work(start_sidecar: StartSidecar) -> None:
    # A short path: unix socket paths are limited to about 100 bytes.
    with tempfile.TemporaryDirectory() as scratch:
        sidecar: Sidecar = start_sidecar(tcp="off", unix=f"{scratch}/wq.sock")
        assert sidecar.target == f"unix://{scratch}/wq.sock"
        async with Client.connect(sidecar.target) as client:
            await client.wait_ready(5)
            await client.add("default", "ns/a")
            assert (await client.len("default")).ready == 1
