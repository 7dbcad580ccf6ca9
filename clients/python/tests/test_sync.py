"""SyncClient and run_sync: plain functions in threads, without asyncio in the test."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import Sidecar, StartSidecar
from workqueue_sidecar import KeyPhase, Request, Result, SyncClient, run_sync

#: Leases that expire after one second unless extended.
SHORT_LEASES = """
queues:
  default:
    lease_ttl: 1s
"""


def test_sync_client_should_run_plain_functions(sidecar: Sidecar) -> None:
    stop = threading.Event()
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()

    def reconcile(request: Request) -> Result | None:
        with lock:
            first_time = request.key not in {key for key, _ in seen}
            seen.append((request.key, request.failures))
            if request.key == "ns/again" and first_time:
                return Result(requeue_after=0.1)
            if request.key == "ns/flaky" and request.failures == 0:
                raise ValueError("flaky")
            if len(seen) == 5:
                stop.set()
            return None

    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/a", "ns/flaky", "ns/again")
        client.run("default", reconcile, concurrency=2, stop=stop)
        assert sorted(seen) == [("ns/a", 0), ("ns/again", 0), ("ns/again", 0), ("ns/flaky", 0), ("ns/flaky", 1)]
        assert client.len("default").held == 0
        assert client.num_requeues("default", "ns/flaky") == 0
        assert client.key_state("default", "ns/a").phase == KeyPhase.ABSENT


def test_reconcile_threads_should_call_the_client_they_run_on(sidecar: Sidecar) -> None:
    stop = threading.Event()
    holders: list[str] = []

    with SyncClient.connect(sidecar.target, worker_name="sync-worker") as client:

        def reconcile(request: Request) -> None:
            state = client.key_state(request.queue, request.key)
            holders.append(f"{state.phase.name} by {state.holder}")
            stop.set()

        client.add("default", "ns/a")
        client.run("default", reconcile, stop=stop)
    # A Work stream holds its leases as "worker#stream-id".
    assert [h.split("#")[0] for h in holders] == ["HELD by sync-worker"]


def test_run_sync_should_stop_from_another_thread(sidecar: Sidecar) -> None:
    stop = threading.Event()
    done: list[str] = []

    def reconcile(request: Request) -> None:
        done.append(request.key)

    worker = threading.Thread(target=run_sync, args=(sidecar.target, "default", reconcile), kwargs={"stop": stop})
    worker.start()
    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/a", "ns/b")
        deadline = time.monotonic() + 10
        while len(done) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    stop.set()
    worker.join(10)
    assert not worker.is_alive()
    assert sorted(done) == ["ns/a", "ns/b"]


def test_a_sync_reconcile_should_see_cancelled_and_keep_its_lease_until_it_returns(sidecar: Sidecar) -> None:
    stop = threading.Event()
    started = threading.Event()
    returned = threading.Event()

    def reconcile(request: Request) -> None:
        started.set()
        while not request.cancelled():
            time.sleep(0.02)
        time.sleep(0.3)  # wind down; the lease must still be held meanwhile
        returned.set()
        raise RuntimeError("stopped early")

    worker = threading.Thread(target=run_sync, args=(sidecar.target, "default", reconcile), kwargs={"stop": stop})
    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/a")
        worker.start()
        assert started.wait(10)
        client.shut_down("default")  # without drain: the sidecar asks holders to stop
        time.sleep(0.15)
        assert not returned.is_set()
        assert client.key_state("default", "ns/a").phase == KeyPhase.HELD
        assert returned.wait(10)
        deadline = time.monotonic() + 10
        while client.key_state("default", "ns/a").phase == KeyPhase.HELD and time.monotonic() < deadline:
            time.sleep(0.02)
        state = client.key_state("default", "ns/a")
        assert (state.failures, state.last_error) == (1, "stopped early")
    stop.set()
    worker.join(10)
    assert not worker.is_alive()


def test_a_sync_reconcile_running_past_drain_timeout_should_keep_its_lease_until_it_returns(
    start_sidecar: StartSidecar,
) -> None:
    # A thread cannot be interrupted: past drain_timeout the worker can only
    # say so (request.cancelled()). Were the lease given up then, or left
    # unextended, another worker would reconcile the key while the function
    # still runs here.
    sidecar = start_sidecar(config=SHORT_LEASES)
    stop = threading.Event()
    started = threading.Event()
    cancelled = threading.Event()
    returned = threading.Event()
    elsewhere = threading.Event()

    def reconcile(request: Request) -> None:
        started.set()
        while not request.cancelled():
            time.sleep(0.02)
        cancelled.set()
        # Runs on for six lease ttls, and longer than drain_timeout plus the
        # 5s a stopping worker used to give a cancelled reconcile to unwind;
        # it stops at once if the key turns up at the other worker.
        elsewhere.wait(6)
        returned.set()

    def reconcile_elsewhere(request: Request) -> None:
        elsewhere.set()

    first = threading.Thread(
        target=run_sync,
        args=(sidecar.target, "default", reconcile),
        kwargs={"stop": stop, "drain_timeout": 0.3},
    )
    other_stop = threading.Event()
    other = threading.Thread(
        target=run_sync,
        args=(sidecar.target, "default", reconcile_elsewhere),
        kwargs={"stop": other_stop, "worker_name": "other"},
    )
    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/a")
        first.start()
        try:
            assert started.wait(10)
            other.start()
            stop.set()
            first.join(30)
            assert not first.is_alive()
            assert cancelled.is_set(), "the stop past drain_timeout did not cancel the request"
            assert not elsewhere.is_set(), "another worker reconciled ns/a while its function still ran here"
            assert returned.is_set(), "run_sync returned before the function did"
            # Its result was sent once it returned: success, the key forgotten.
            state = client.key_state("default", "ns/a")
            assert (state.phase, state.failures) == (KeyPhase.ABSENT, 0), state
        finally:
            stop.set()
            other_stop.set()
            elsewhere.set()
            for thread in (first, other):
                if thread.ident is not None:  # started
                    thread.join(30)


# conformance: C7
def test_one_key_should_never_be_reconciled_twice_at_once_in_a_sync_run(start_sidecar: StartSidecar) -> None:
    # The sidecar stalls past the lease: the worker loses it while the thread
    # of its first reconcile still runs (a thread cannot be interrupted), and
    # the key comes back to the free thread. It waits for the first to return.
    sidecar = start_sidecar(config=SHORT_LEASES)
    stop = threading.Event()
    lock = threading.Lock()
    #: [start, end] of each reconcile of the key, by time.monotonic().
    runs: list[list[float]] = []

    def reconcile(request: Request) -> None:
        with lock:
            n = len(runs)
            runs.append([time.monotonic(), float("inf")])
        if n == 0:
            time.sleep(3)  # cancelled or not
        with lock:
            runs[n][1] = time.monotonic()

    def done() -> bool:
        with lock:
            return len(runs) >= 2 and runs[1][1] != float("inf")

    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/a")
        worker = threading.Thread(
            target=client.run, args=("default", reconcile), kwargs={"concurrency": 2, "stop": stop}
        )
        worker.start()
        try:
            deadline = time.monotonic() + 10
            while not runs and time.monotonic() < deadline:
                time.sleep(0.02)
            assert runs, "ns/a was not reconciled"
            sidecar.signal(signal.SIGSTOP)
            try:
                time.sleep(2)
            finally:
                sidecar.signal(signal.SIGCONT)
            deadline = time.monotonic() + 20
            while not done() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert done(), runs
        finally:
            stop.set()
            worker.join(15)
        assert not worker.is_alive()
    first, second = runs[:2]
    assert second[0] >= first[1], (
        f"ns/a's second reconcile started {first[1] - second[0]:.3f}s before its first returned"
    )


def test_sync_run_should_stop_gracefully_on_sigterm(sidecar: Sidecar) -> None:
    """A pod's container gets SIGTERM: the worker finishes its running reconcile and exits 0."""
    program = Path(__file__).parent / "programs" / "sync_worker.py"
    worker = subprocess.Popen(
        [sys.executable, str(program), "--sidecar", sidecar.target, "--hold", "1.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        with SyncClient.connect(sidecar.target) as client:
            client.add("default", "ns/a")
            assert worker.stdout is not None
            line = worker.stdout.readline()
            assert line.strip() == "started ns/a", line
            worker.send_signal(signal.SIGTERM)
            out, _ = worker.communicate(timeout=20)
            assert worker.returncode == 0, out
            assert "finished ns/a" in out and "stopped" in out, out
            state = client.key_state("default", "ns/a")
            assert state.phase == KeyPhase.ABSENT, "the running reconcile finished with success"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
