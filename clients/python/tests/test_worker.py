"""Client.run over the Work stream, against the real sidecar."""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from dataclasses import dataclass, field

import grpc
import pytest

from conftest import Sidecar, StartSidecar, eventually, running
from workqueue_sidecar import Client, KeyPhase, ReasonKind, Request, Result, UnknownQueueError
from workqueue_sidecar.v1 import workqueue_pb2 as pb
from workqueue_sidecar.worker import _Stream

#: A queue whose retries are slow enough to measure: 200ms, 400ms, 800ms...
SLOW_BACKOFF = """
queues:
  default:
    rate_limiter:
      exponential: { base: 200ms, max: 10s }
"""
#: Leases that expire after one second unless extended.
SHORT_LEASES = """
queues:
  default:
    lease_ttl: 1s
"""


@dataclass
class Calls:
    """What a test reconcile saw: each request and when it started."""

    requests: list[Request] = field(default_factory=list)
    started: list[float] = field(default_factory=list)

    def record(self, request: Request) -> None:
        self.requests.append(request)
        self.started.append(time.monotonic())

    def of(self, key: str) -> list[Request]:
        return [r for r in self.requests if r.key == key]


# conformance: C1
async def test_success_should_forget_the_key(client: Client) -> None:
    calls = Calls()

    async def reconcile(request: Request) -> None:
        calls.record(request)

    await client.add_rate_limited("default", "ns/a")  # one earlier failure, to be forgotten
    async with running(client, "default", reconcile):
        await eventually(lambda: len(calls.requests) == 1)
        await eventually(lambda: _phase(client, "ns/a", KeyPhase.ABSENT))
    [request] = calls.requests
    assert (request.queue, request.key, request.failures) == ("default", "ns/a", 1)
    assert request.object is None
    assert await client.num_requeues("default", "ns/a") == 0


# conformance: C2
async def test_an_exception_should_retry_with_backoff_and_count_failures(start_sidecar: StartSidecar) -> None:
    sidecar = start_sidecar(config=SLOW_BACKOFF)
    calls = Calls()

    async def reconcile(request: Request) -> None:
        calls.record(request)
        if len(calls.requests) <= 2:
            raise RuntimeError(f"attempt {len(calls.requests)} failed")

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile):
            await eventually(lambda: len(calls.requests) == 3)
            await eventually(lambda: _phase(client, "ns/a", KeyPhase.ABSENT))
        assert await client.num_requeues("default", "ns/a") == 0
    first, second, third = calls.requests
    assert (first.failures, first.last_error) == (0, "")
    assert (second.failures, second.last_error) == (1, "attempt 1 failed")
    assert (third.failures, third.last_error) == (2, "attempt 2 failed")
    assert {r.kind for r in second.reasons} == {ReasonKind.RETRY}
    # Backoff: 200ms after the first failure, 400ms after the second.
    assert calls.started[1] - calls.started[0] >= 0.18
    assert calls.started[2] - calls.started[1] >= 0.38


# conformance: C3
async def test_requeue_after_should_bring_the_key_back_after_the_delay(client: Client) -> None:
    calls = Calls()

    async def reconcile(request: Request) -> Result | None:
        calls.record(request)
        return Result(requeue_after=1.0) if len(calls.requests) == 1 else None

    await client.add("default", "ns/a")
    async with running(client, "default", reconcile):
        await eventually(lambda: _phase(client, "ns/a", KeyPhase.WAITING), timeout=0.9)
        await eventually(lambda: len(calls.requests) == 2)
    assert calls.started[1] - calls.started[0] >= 0.98
    assert calls.requests[1].failures == 0
    assert {r.kind for r in calls.requests[1].reasons} == {ReasonKind.REQUEUE_AFTER}


# conformance: C4
async def test_a_slow_reconcile_should_keep_its_lease_past_the_ttl(start_sidecar: StartSidecar) -> None:
    sidecar = start_sidecar(config=SHORT_LEASES)
    calls = Calls()
    deadlines = []

    async with Client.connect(sidecar.target) as client:

        async def reconcile(request: Request) -> None:
            calls.record(request)
            for _ in range(7):  # 3.5s, over three lease ttls
                await asyncio.sleep(0.5)
                state = await client.key_state("default", request.key)
                assert state.phase == KeyPhase.HELD, state
                deadlines.append(state.held_until)

        await client.add("default", "ns/slow")
        async with running(client, "default", reconcile):
            await eventually(lambda: _phase(client, "ns/slow", KeyPhase.ABSENT), timeout=10)
        assert len(calls.requests) == 1, "the lease expired and the key was handed out again"
        assert await client.num_requeues("default", "ns/slow") == 0
    assert deadlines[-1] is not None and deadlines[0] is not None
    assert (deadlines[-1] - deadlines[0]).total_seconds() >= 2, "the deadline did not move"


# conformance: C5
async def test_a_lost_lease_should_cancel_its_reconcile(start_sidecar: StartSidecar) -> None:
    sidecar = start_sidecar(config=SHORT_LEASES)
    calls = Calls()
    outcome: list[str] = []

    async def reconcile(request: Request) -> None:
        calls.record(request)
        if len(calls.requests) > 1:
            return
        # Block the event loop past the ttl: no extend goes out, the lease expires.
        time.sleep(1.6)
        try:
            await asyncio.sleep(30)
            outcome.append("finished")
        except asyncio.CancelledError:
            outcome.append(f"cancelled, request.cancelled()={request.cancelled()}")
            raise

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile, concurrency=2):
            await eventually(lambda: len(calls.requests) == 2, timeout=10)
            await eventually(lambda: bool(outcome))
    assert outcome == ["cancelled, request.cancelled()=True"]
    assert {r.kind for r in calls.requests[1].reasons} == {ReasonKind.LEASE_EXPIRED}
    assert calls.requests[1].failures == 1


# conformance: C6
async def test_a_frozen_sidecar_should_cancel_the_reconcile_at_its_lease_deadline(
    start_sidecar: StartSidecar,
) -> None:
    # A sidecar that stops answering (frozen, or cut off) can no longer extend
    # the lease; past the deadline the key may be another worker's, so the
    # worker must stop on its own clock.
    sidecar = start_sidecar(config=SHORT_LEASES)
    started = asyncio.Event()
    cancelled_after: list[float] = []

    async def reconcile(request: Request) -> None:
        started.set()
        begun = time.monotonic()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled_after.append(time.monotonic() - begun)
            raise

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile):
            await asyncio.wait_for(started.wait(), 5)
            sidecar.signal(signal.SIGSTOP)
            try:
                await eventually(lambda: bool(cancelled_after), timeout=5)
            finally:
                sidecar.signal(signal.SIGCONT)
    assert cancelled_after[0] < 2.5, f"cancelled {cancelled_after[0]:.2f}s in, the lease was 1s plus one extension"


@pytest.mark.parametrize("late", ["ignoring its cancellation", "before its cancellation"])
async def test_a_result_after_a_lost_lease_should_be_discarded_with_a_warning(
    start_sidecar: StartSidecar, caplog: pytest.LogCaptureFixture, late: str
) -> None:
    # The result is not sent (another worker may hold the key by now), and
    # one warning says so: a reconcile that seemed to succeed left no trace.
    sidecar = start_sidecar(config=SHORT_LEASES)
    calls = Calls()

    async def reconcile(request: Request) -> None:
        calls.record(request)
        if len(calls.requests) > 1:
            return
        # Block the event loop past the ttl: no extend goes out, the lease expires.
        time.sleep(1.6)
        if late == "ignoring its cancellation":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass  # and returns: success, after the lease was lost
        # Else it returns at once, before the worker's timer saw the deadline pass.

    def warnings() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.levelno >= logging.WARNING and "'ns/a'" in r.getMessage()]

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile):
            # A second reconcile of the key starts only once the first returned
            # and was finished: every warning about the first is in by then.
            await eventually(lambda: len(calls.requests) == 2 and bool(warnings()), timeout=10)
    [record] = warnings()
    assert "discarded" in record.getMessage(), record.getMessage()
    assert "'default'" in record.getMessage() and "'ns/a'" in record.getMessage(), record.getMessage()
    assert "lease" in record.getMessage() and "lost" in record.getMessage(), record.getMessage()
    # The key was handed out again, charged the lost lease, not forgotten by the late success.
    assert calls.requests[1].failures == 1


async def test_a_reconcile_after_a_cancelled_one_should_not_see_its_cancellation(start_sidecar: StartSidecar) -> None:
    # Reconciles run in a pool of concurrency tasks: with one, the task whose
    # reconcile was cancelled (its lease lost) runs the next ones too, and
    # they must start uncancelled (Task.cancelling() is what asyncio.timeout
    # and TaskGroup count on to tell their own cancellations from others').
    sidecar = start_sidecar(config=SHORT_LEASES)
    outcomes: list[str] = []

    async def reconcile(request: Request) -> None:
        task = asyncio.current_task()
        assert task is not None
        if not outcomes:
            outcomes.append(f"{request.key} started")
            time.sleep(1.6)  # the loop blocked past the ttl: the lease is lost
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                outcomes.append(f"{request.key} cancelled")
                raise
        outcomes.append(f"{request.key} cancelling={task.cancelling()}")
        async with asyncio.timeout(5):
            await asyncio.sleep(0.01)

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        await client.add("default", "ns/b")
        async with running(client, "default", reconcile, concurrency=1):
            await eventually(lambda: len(outcomes) == 4, timeout=10)
            await eventually(lambda: _phase(client, "ns/b", KeyPhase.ABSENT))
    assert outcomes[:2] == ["ns/a started", "ns/a cancelled"]
    assert sorted(outcomes[2:]) == ["ns/a cancelling=0", "ns/b cancelling=0"]


async def test_sidecar_sigterm_should_cancel_a_running_reconcile(start_sidecar: StartSidecar) -> None:
    sidecar = start_sidecar(args=["--grace-period", "1s"])
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile):
            await asyncio.wait_for(started.wait(), 5)
            sidecar.signal(signal.SIGTERM)
            # Held leases may run for the grace period, then they are handed back.
            await asyncio.wait_for(cancelled.wait(), 6)
            assert await asyncio.to_thread(sidecar.process.wait, 10) == 0
    assert "queue drained" in sidecar.log()


async def test_shut_down_without_drain_should_cancel_and_retry(sidecar: Sidecar, client: Client) -> None:
    started = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.sleep(60)

    await client.add("default", "ns/a")
    async with running(client, "default", reconcile):
        await asyncio.wait_for(started.wait(), 5)
        await client.shut_down("default")
        await eventually(lambda: _failures(client, "ns/a", 1))
        # The shut-down queue ends every new stream at once: the worker backs
        # off (0.1s doubling, jittered) instead of reopening in a tight loop.
        await asyncio.sleep(2)
    log = sidecar.log()
    attempts = log.count("work stream opened") + log.count("work stream refused")
    assert 2 <= attempts <= 8
    state = await client.key_state("default", "ns/a")
    assert state.phase != KeyPhase.HELD
    assert state.last_error.startswith("cancelled: ")


# conformance: C7
async def test_graceful_stop_should_finish_running_reconciles(client: Client) -> None:
    started = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.sleep(0.5)

    await client.add("default", "ns/a")
    async with running(client, "default", reconcile, drain_timeout=5) as stop:
        await asyncio.wait_for(started.wait(), 5)
        stop.set()
    # run() returned after the reconcile finished and its Finish was applied.
    assert (await client.key_state("default", "ns/a")).phase == KeyPhase.ABSENT
    assert await client.num_requeues("default", "ns/a") == 0


async def test_graceful_stop_should_hand_held_keys_back(client: Client) -> None:
    started: set[str] = set()
    done: set[str] = set()

    async def reconcile(request: Request) -> None:
        started.add(request.key)
        if request.key == "ns/stuck":
            await asyncio.sleep(60)
        done.add(request.key)

    await client.add("default", "ns/stuck")
    async with running(client, "default", reconcile, concurrency=2, drain_timeout=0.3) as stop:
        await eventually(lambda: "ns/stuck" in started)
        stop.set()
        began = time.monotonic()
        await client.add("default", "ns/late")
    assert time.monotonic() - began < 5
    stuck = await client.key_state("default", "ns/stuck")
    assert stuck.phase in (KeyPhase.QUEUED, KeyPhase.WAITING), stuck
    assert ReasonKind.LEASE_RELEASED in {r.kind for r in stuck.reasons}
    # Given up at the stop, not failed: a clean stop counts no failure.
    assert stuck.failures == 0, stuck
    # Nothing new started once stop was set, and nothing is left held.
    assert "ns/late" not in started
    late = await client.key_state("default", "ns/late")
    assert late.phase != KeyPhase.HELD and late.failures == 0, late
    assert (await client.len("default")).held == 0


# conformance: C7
async def test_close_should_stop_running_workers_and_let_their_reconciles_finish(sidecar: Sidecar) -> None:
    finished: list[str] = []
    started = asyncio.Event()

    async def reconcile(request: Request) -> None:
        started.set()
        await asyncio.sleep(0.3)
        finished.append(request.key)

    client = Client.connect(sidecar.target)
    await client.add("default", "ns/a")
    run = asyncio.create_task(client.run("default", reconcile))
    await asyncio.wait_for(started.wait(), 5)
    await client.close()
    await asyncio.wait_for(run, 5)  # run returned: close() stopped it
    assert finished == ["ns/a"], "the running reconcile finished and counted"
    async with Client.connect(sidecar.target) as other:
        state = await other.key_state("default", "ns/a")
        assert state.phase == KeyPhase.ABSENT and state.failures == 0, state


# conformance: C9
async def test_concurrency_should_limit_reconciles_running_at_once(client: Client) -> None:
    running_now = 0
    most = 0
    finished: list[str] = []

    async def reconcile(request: Request) -> None:
        nonlocal running_now, most
        running_now += 1
        most = max(most, running_now)
        await asyncio.sleep(0.1)
        running_now -= 1
        finished.append(request.key)

    keys = [f"ns/k{i}" for i in range(12)]
    await client.add("default", *keys)
    async with running(client, "default", reconcile, concurrency=3):
        await eventually(lambda: len(finished) == len(keys))
    assert most == 3
    assert sorted(finished) == sorted(keys)


async def test_one_key_should_never_be_reconciled_twice_at_once_in_a_run(start_sidecar: StartSidecar) -> None:
    # The sidecar stalls past the lease: the worker loses it, the sidecar
    # expires it, and the key comes back to this worker's free slot while
    # its first reconcile, which ignores its cancellation, still runs. The
    # second waits for the first to return.
    sidecar = start_sidecar(config=SHORT_LEASES)
    #: [start, end] of each reconcile of the key, by time.monotonic().
    runs: list[list[float]] = []

    async def reconcile(request: Request) -> None:
        n = len(runs)
        runs.append([time.monotonic(), float("inf")])
        try:
            if n == 0:
                until = runs[0][0] + 3
                while (left := until - time.monotonic()) > 0:
                    try:
                        await asyncio.sleep(left)
                    except asyncio.CancelledError:
                        pass  # ignores its cancellation, lease lost or not
        finally:
            runs[n][1] = time.monotonic()

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile, concurrency=2):
            await eventually(lambda: len(runs) == 1, timeout=10)
            sidecar.signal(signal.SIGSTOP)
            try:
                await asyncio.sleep(2)
            finally:
                sidecar.signal(signal.SIGCONT)
            await eventually(lambda: len(runs) == 2 and runs[1][1] != float("inf"), timeout=20)
    first, second = runs[:2]
    assert second[0] >= first[1], (
        f"ns/a's second reconcile started {first[1] - second[0]:.3f}s before its first returned"
    )


async def test_a_lease_lost_while_waiting_for_the_earlier_reconcile_of_its_key_should_not_start(
    start_sidecar: StartSidecar, caplog: pytest.LogCaptureFixture
) -> None:
    # As above, and the sidecar stalls again while the second lease waits for
    # the first reconcile: that lease is lost before it started, so it never
    # starts; the third waits in turn and runs once the first returned.
    sidecar = start_sidecar(config=SHORT_LEASES)
    release = asyncio.Event()
    #: Each reconcile of the key: its request, and [start, end] by time.monotonic().
    runs: list[tuple[Request, list[float]]] = []

    async def reconcile(request: Request) -> None:
        n = len(runs)
        runs.append((request, [time.monotonic(), float("inf")]))
        try:
            while n == 0 and not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    pass  # ignores its cancellation
        finally:
            runs[n][1][1] = time.monotonic()

    def waiting() -> int:
        return sum("waiting for the earlier reconcile of 'ns/a'" in r.getMessage() for r in caplog.records)

    async def stall() -> None:
        sidecar.signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(2)
        finally:
            sidecar.signal(signal.SIGCONT)

    async with Client.connect(sidecar.target) as client:
        await client.add("default", "ns/a")
        async with running(client, "default", reconcile, concurrency=2):
            await eventually(lambda: len(runs) == 1, timeout=10)
            await stall()
            await eventually(lambda: waiting() == 1, timeout=20)
            await stall()  # the waiting lease is lost
            await eventually(lambda: waiting() == 2, timeout=20)
            assert len(runs) == 1
            release.set()
            await eventually(lambda: len(runs) == 2 and runs[1][1][1] != float("inf"), timeout=20)
            await eventually(lambda: _phase(client, "ns/a", KeyPhase.ABSENT))
    assert len(runs) == 2
    (_, first), (second_request, second) = runs
    assert second[0] >= first[1], f"the second reconcile started {first[1] - second[0]:.3f}s before the first returned"
    # Two leases expired: the first reconcile's, and the one never started.
    assert second_request.failures == 2, second_request
    # The Finish of the lease lost while waiting went out during the stall:
    # the sidecar's refusal, late by more than a TTL, was expected.
    refused = [r.getMessage() for r in caplog.records if "refused by the sidecar" in r.getMessage()]
    assert not [r for r in caplog.records if r.levelname == "WARNING" and "refused by the sidecar" in r.getMessage()], refused


# conformance: C8
async def test_a_broken_stream_should_cancel_reconciles_and_reconnect(start_sidecar: StartSidecar) -> None:
    first = start_sidecar()
    seen: list[str] = []
    cancelled = asyncio.Event()

    async def reconcile(request: Request) -> None:
        seen.append(request.key)
        if request.key == "ns/before":
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise

    async with Client.connect(first.target) as client:
        await client.add("default", "ns/before")
        async with running(client, "default", reconcile):
            await eventually(lambda: seen == ["ns/before"])
            first.process.kill()
            await asyncio.wait_for(cancelled.wait(), 5)
            # A sidecar comes back on the same address; the worker finds it.
            second = _restart_on(start_sidecar, first)
            async with Client.connect(second.target) as other:
                await other.add("default", "ns/after")
                await eventually(lambda: "ns/after" in seen, timeout=20)
                await eventually(lambda: _phase(other, "ns/after", KeyPhase.ABSENT))


# conformance: C9
async def test_reconciles_that_ignore_cancellation_should_keep_their_slots_across_a_reconnect(
    start_sidecar: StartSidecar,
) -> None:
    first = start_sidecar()
    running_now = 0
    most = 0
    release = asyncio.Event()
    seen: list[str] = []

    async def reconcile(request: Request) -> None:
        nonlocal running_now, most
        seen.append(request.key)
        running_now += 1
        most = max(most, running_now)
        try:
            if request.key.startswith("ns/stubborn"):
                while not release.is_set():
                    try:
                        await release.wait()
                    except asyncio.CancelledError:
                        pass  # ignores its cancellation, as some code does
        finally:
            running_now -= 1

    async with Client.connect(first.target) as client:
        await client.add("default", "ns/stubborn-1")
        async with running(client, "default", reconcile, concurrency=2):
            await eventually(lambda: "ns/stubborn-1" in seen)
            first.process.kill()
            second = _restart_on(start_sidecar, first)
            async with Client.connect(second.target) as other:
                await other.add("default", "ns/stubborn-2", "ns/next")
                await eventually(lambda: "ns/stubborn-2" in seen, timeout=20)
                # One slot held by each stubborn reconcile: ns/next waits.
                await asyncio.sleep(0.5)
                assert "ns/next" not in seen and most == 2, (seen, most)
                release.set()
                await eventually(lambda: "ns/next" in seen, timeout=10)
    assert most <= 2, most


# conformance: C10
async def test_run_should_raise_for_an_unknown_queue(client: Client) -> None:
    async def reconcile(request: Request) -> None:
        raise AssertionError("no key should come")

    with pytest.raises(UnknownQueueError):
        await asyncio.wait_for(client.run("nope", reconcile), 5)


async def test_run_should_refuse_a_plain_function(client: Client) -> None:
    def reconcile(request: Request) -> None:
        pass

    with pytest.raises(TypeError, match="SyncClient"):
        await client.run("default", reconcile)  # type: ignore[arg-type]


class _Aborted(BaseException):
    """Not an Exception: what some libraries raise to unwind."""


async def test_a_base_exception_should_retry_and_keep_the_workers_slot(client: Client) -> None:
    calls = Calls()

    async def reconcile(request: Request) -> None:
        calls.record(request)
        if len(calls.of(request.key)) == 1 and request.key == "ns/a":
            raise _Aborted("unwound")

    await client.add("default", "ns/a")
    async with running(client, "default", reconcile, concurrency=1):
        await eventually(lambda: len(calls.of("ns/a")) == 2)
        # The one slot is still there for a key added afterwards.
        await client.add("default", "ns/b")
        await eventually(lambda: len(calls.of("ns/b")) == 1)
    retried = calls.of("ns/a")[1]
    assert (retried.failures, retried.last_error) == (1, "unwound")


async def test_a_reconcile_returning_nonsense_should_retry(client: Client) -> None:
    async def reconcile(request: Request) -> Result | None:
        return "done"  # type: ignore[return-value]

    await client.add("default", "ns/a")
    async with running(client, "default", reconcile):
        await eventually(lambda: _failures(client, "ns/a", 1))
        # Read while the worker runs: once it stops, a lease it holds on a
        # retry ends with "the worker holding the lease went away" instead.
        state = await client.key_state("default", "ns/a")
    assert "not a Result" in state.last_error


async def test_only_a_refused_finish_should_be_answered_and_it_is_still_logged(
    client: Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The stream opens with ack_failures_only: applied Finishes cost no
    # FinishAck, and one the sidecar refuses (its lease was ended by a unary
    # Done: a stale token) is answered and warned of as before.
    acks: list[pb.WorkResponse.FinishAck] = []
    dispatch = _Stream._dispatch

    def recording(stream: _Stream, message: pb.WorkResponse) -> None:
        if message.WhichOneof("kind") == "finish_ack":
            acks.append(message.finish_ack)
        dispatch(stream, message)

    monkeypatch.setattr(_Stream, "_dispatch", recording)
    reconciled: list[str] = []

    async def reconcile(request: Request) -> None:
        if request.key == "ns/done-elsewhere":
            await client.done(request.queue, request.key, request.token)
        reconciled.append(request.key)

    for key in ("ns/a", "ns/b", "ns/done-elsewhere", "ns/c"):
        await client.add("default", key)
    async with running(client, "default", reconcile):
        await eventually(lambda: len(reconciled) == 4 and len(acks) >= 1)
        for key in ("ns/a", "ns/b", "ns/c"):
            await eventually(lambda: _phase(client, key, KeyPhase.ABSENT))
        await asyncio.sleep(0.2)  # an ack of an applied Finish would have come by now
    assert [(ack.key, ack.code) for ack in acks] == [("ns/done-elsewhere", grpc.StatusCode.FAILED_PRECONDITION.value[0])]
    assert "only failed finishes answered" in caplog.text
    assert "finish of 'ns/done-elsewhere' refused by the sidecar (code 9)" in caplog.text


def _restart_on(start_sidecar: StartSidecar, old: Sidecar) -> Sidecar:
    old.process.wait(5)
    return start_sidecar(tcp=old.address)


async def _phase(client: Client, key: str, phase: KeyPhase) -> bool:
    return (await client.key_state("default", key)).phase == phase


async def _failures(client: Client, key: str, failures: int) -> bool:
    return (await client.key_state("default", key)).failures >= failures
