"""The Work stream's session (worker._Stream) driven directly, without a sidecar:
what its pool tasks and its one timer do with leases in states the real
sidecar produces only by races."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import grpc
import pytest

from conftest import eventually
from workqueue_sidecar import LeaseEndedDuringWriteError, Request
from workqueue_sidecar.v1 import workqueue_pb2 as pb
from workqueue_sidecar.worker import Reconcile, Worker, _Held, _Stream


def _stream(reconciled: list[str], concurrency: int = 1) -> _Stream:
    async def reconcile(request: Request) -> None:
        reconciled.append(request.key)

    worker = Worker(
        stub=None,
        queue="q",
        reconcile=reconcile,
        concurrency=concurrency,
        include_object=False,
        worker_name="test",
        lease_ttl=None,
        drain_timeout=1.0,
        stop=asyncio.Event(),
    )
    return _Stream(worker)


def _hold(stream: _Stream, key: str, token: int, ttl: float) -> _Held:
    held = _Held(Request("q", key, token=token))
    held.set_deadline(None, ttl)
    stream.held[token] = held
    return held


def _sent(stream: _Stream) -> list[pb.WorkRequest]:
    messages = []
    while not stream.outbox.empty():
        message = stream.outbox.get_nowait()
        assert message is not None
        messages.append(message)
    return messages


async def test_a_lease_ended_before_a_pool_task_takes_it_should_not_start() -> None:
    reconciled: list[str] = []
    stream = _stream(reconciled)
    lost = _hold(stream, "ns/lost", 1, ttl=30)
    lost.lost = "the sidecar revoked the lease"
    _hold(stream, "ns/expired", 2, ttl=0)  # its deadline is now
    cancelled = _hold(stream, "ns/cancelled", 3, ttl=30)
    cancelled.cancel = "the sidecar asked to stop"
    _hold(stream, "ns/ok", 4, ttl=30)
    for held in stream.held.values():
        stream.ready.put_nowait(held)
    task = asyncio.create_task(stream._work())
    try:
        await eventually(lambda: stream.outbox.qsize() == 4, timeout=5)
    finally:
        stream.closing = True
        task.cancel()
    finishes = [m.finish for m in _sent(stream)]
    assert reconciled == ["ns/ok"]
    assert [(f.key, f.WhichOneof("outcome")) for f in finishes] == [
        ("ns/lost", "retry"),
        ("ns/expired", "retry"),
        ("ns/cancelled", "retry"),
        ("ns/ok", "success"),
    ]
    assert finishes[0].retry.error == "lease lost: the sidecar revoked the lease"
    assert finishes[1].retry.error.startswith("lease lost: the lease expired before")
    assert finishes[2].retry.error == "cancelled: the sidecar asked to stop"
    assert not stream.held
    assert stream.lost_finishes.tokens() == {1, 2}


async def test_the_tick_should_extend_due_leases_and_lose_those_past_their_deadline() -> None:
    stream = _stream([])
    stream.extend_every = 0.2
    due = _hold(stream, "ns/due", 1, ttl=0.6)
    due.next_extend = 0.0
    _hold(stream, "ns/not-due", 2, ttl=0.6).next_extend = float("inf")
    past = _hold(stream, "ns/past", 3, ttl=0)
    stream._tick()
    assert [(m.extend.key, m.extend.token) for m in _sent(stream)] == [("ns/due", 1)]
    assert past.lost == "the lease deadline passed without an extension" and past.request.cancelled()
    assert due.lost is None and not due.request.cancelled()
    # It sleeps a sixth of the ttl (half of extend_every), or less when a deadline comes sooner.
    assert stream.tick is not None
    assert 0 < stream.tick_at - asyncio.get_running_loop().time() <= 0.1
    stream.closing = True
    stream.tick.cancel()


def _open(stream: _Stream, ack_failures_only: bool, ttl: int = 30) -> None:
    opened = pb.WorkResponse.Opened(credits=1, max_credits=100, ack_failures_only=ack_failures_only)
    opened.lease_ttl.seconds = ttl
    stream._on_opened(opened)


def _extended(token: int) -> pb.WorkResponse:
    answer = pb.WorkResponse()
    answer.extended.key, answer.extended.token = "ns/held", token
    return answer


async def test_a_lost_finish_should_be_forgotten_once_an_extend_sent_after_it_is_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The sidecar answers only failed Finishes: a lost lease it still held has
    # its Finish applied and never answered, so its token must not stay
    # forever; but a refusal a stall delayed by more than a TTL is still expected.
    stream = _stream([])
    _open(stream, ack_failures_only=True, ttl=30)
    stream.extend_every = 10.0
    _hold(stream, "ns/held", 7, ttl=30).next_extend = 0.0
    stream.lost_finishes.add(1)
    stream._tick()  # an Extend goes out after the Finish of 1
    stream.lost_finishes.add(2)
    assert stream.lost_finishes.tokens() == {1, 2}
    stream._dispatch(_extended(7))
    assert stream.lost_finishes.tokens() == {2}, "the sidecar answered an Extend sent after 1's Finish"
    refused = pb.WorkResponse()
    refused.finish_ack.key, refused.finish_ack.token, refused.finish_ack.code = "ns/lost", 2, 9
    stream._dispatch(refused)
    assert not stream.lost_finishes.tokens()
    assert not [r for r in caplog.records if r.levelname == "WARNING"], "an expected refusal was warned of"
    stream.closing = True
    assert stream.tick is not None
    stream.tick.cancel()


async def test_a_sidecar_answering_every_finish_should_keep_lost_finishes_until_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A sidecar older than Open.ack_failures_only (Opened says false) answers
    # every Finish, as before: a lost lease's token goes with its refusal only.
    stream = _stream([])
    _open(stream, ack_failures_only=False, ttl=30)
    stream.lost_finishes.add(1)
    stream._tick()
    assert stream.lost_finishes.tokens() == {1}
    assert stream.tick is None, "nothing held and nothing to forget: no timer"
    refused = pb.WorkResponse()
    refused.finish_ack.key, refused.finish_ack.token, refused.finish_ack.code = "ns/lost", 1, 9
    applied = pb.WorkResponse()
    applied.finish_ack.key, applied.finish_ack.token = "ns/ok", 2
    stream._dispatch(refused)
    stream._dispatch(applied)
    assert not stream.lost_finishes.tokens()
    assert not [r for r in caplog.records if r.levelname == "WARNING"], "an expected refusal or an OK was warned of"


async def test_leases_asked_back_should_be_cancelled_and_logged_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A lease the sidecar asks back (a Cancel not revoked, an Extended with
    # cancel) stays valid: its reconcile is cancelled and the ask is logged at
    # debug, one line per key, never at info: a sidecar that stops, or whose
    # shard slots move to another replica (up to 4,096 at once), asks back
    # every such lease. A revoked lease is still a lost one, a warning.
    caplog.set_level(logging.DEBUG, logger="workqueue_sidecar")
    stream = _stream([])
    moved = 64
    asked = []
    for token in range(1, moved + 1):
        held = _hold(stream, f"ns/k{token}", token, ttl=30)
        asked.append(held)
        cancel = pb.WorkResponse()
        cancel.cancel.key, cancel.cancel.token, cancel.cancel.message = held.request.key, token, "shard slot moved"
        stream._dispatch(cancel)
    extended = _hold(stream, f"ns/k{moved + 1}", moved + 1, ttl=30)
    asked.append(extended)
    answer = pb.WorkResponse()
    answer.extended.key, answer.extended.token, answer.extended.cancel = extended.request.key, moved + 1, True
    answer.extended.ttl.seconds = 30
    stream._dispatch(answer)

    records = [r for r in caplog.records if r.name.startswith("workqueue_sidecar")]
    assert len(records) == len(asked), [r.getMessage() for r in records]
    for held, record in zip(asked, records, strict=True):
        assert held.cancel is not None and held.lost is None and held.request.cancelled()
        assert record.levelno == logging.DEBUG, (record.levelname, record.getMessage())
        assert repr(held.request.key) in record.getMessage(), record.getMessage()

    caplog.clear()
    revoked = _hold(stream, "ns/revoked", moved + 2, ttl=30)
    cancel = pb.WorkResponse()
    cancel.cancel.key, cancel.cancel.token, cancel.cancel.revoked = "ns/revoked", moved + 2, True
    cancel.cancel.message = "leadership lost"
    stream._dispatch(cancel)
    assert revoked.lost == "leadership lost" and revoked.request.cancelled()
    [record] = [r for r in caplog.records if r.name.startswith("workqueue_sidecar")]
    assert record.levelno == logging.WARNING and "lost" in record.getMessage(), record.getMessage()
    stream.closing = True
    if stream.tick is not None:
        stream.tick.cancel()


async def _finish_one(
    reconcile: Reconcile, meanwhile: Callable[[_Stream], Awaitable[None]] | None = None
) -> tuple[_Stream, pb.WorkRequest.Finish]:
    """Runs one lease (ns/a, token 7) through a pool task whose reconcile is
    ``reconcile``; ``meanwhile`` runs once the task is started. Returns the
    stream and the lease's one Finish."""
    stream = _stream([])
    stream.worker.reconcile = reconcile
    stream.ready.put_nowait(_hold(stream, "ns/a", 7, ttl=30))
    task = asyncio.create_task(stream._work())
    try:
        if meanwhile is not None:
            await meanwhile(stream)
        await eventually(lambda: stream.outbox.qsize() == 1, timeout=5)
    finally:
        stream.closing = True
        task.cancel()
    [message] = _sent(stream)
    return stream, message.finish


async def test_a_lease_lost_while_its_reconcile_runs_should_be_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # One loss is one warning, naming the key, the queue and why, however
    # often the worker hears of it: the reconcile returning after it (here it
    # ignores its cancellation), its result discarded, adds none.
    reconciling = asyncio.Event()

    async def reconcile(request: Request) -> None:
        reconciling.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass  # and returns: a result after the loss

    async def revoke(stream: _Stream) -> None:
        await asyncio.wait_for(reconciling.wait(), 5)
        revoked = pb.WorkResponse()
        revoked.cancel.key, revoked.cancel.token, revoked.cancel.revoked = "ns/a", 7, True
        revoked.cancel.message = "leadership lost"
        stream._dispatch(revoked)

    _, finish = await _finish_one(reconcile, revoke)
    assert finish.retry.error == "lease lost: leadership lost"
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(loud) == 1, [r.getMessage() for r in loud]
    assert all(s in loud[0].getMessage() for s in ("'ns/a'", "queue 'q'", "lost (leadership lost)")), loud[0].getMessage()


async def test_a_reconcile_whose_lease_ended_during_a_write_should_be_finished_as_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A write under the lease was made, but the sidecar ended the lease before
    # the API server answered (LeaseEndedDuringWriteError, here raised from, as
    # a reconcile would wrap it): the lease is lost. No outcome is sent (the
    # sidecar would refuse it as stale, a warning), only the lost lease's
    # Finish, whose refusal is expected; one warning names queue, key and why.
    async def reconcile(request: Request) -> None:
        try:
            raise LeaseEndedDuringWriteError("the write was made, but the lease ended", grpc.StatusCode.ABORTED)
        except LeaseEndedDuringWriteError as err:
            raise RuntimeError(f"create the child of {request.key}") from err

    stream, finish = await _finish_one(reconcile)
    assert (finish.key, finish.token, finish.WhichOneof("outcome")) == ("ns/a", 7, "retry")
    assert finish.retry.error == "lease lost: lease ended during write"
    assert stream.lost_finishes.tokens() == {7}
    loud = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(loud) == 1, [r.getMessage() for r in loud]
    assert loud[0].levelno == logging.WARNING, loud[0].getMessage()
    assert all(s in loud[0].getMessage() for s in ("'ns/a'", "queue 'q'", "lost (lease ended during write)")), loud[0].getMessage()

    caplog.clear()
    refused = pb.WorkResponse()
    refused.finish_ack.key, refused.finish_ack.token, refused.finish_ack.code = "ns/a", 7, 9
    stream._dispatch(refused)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "the expected refusal was warned of"
