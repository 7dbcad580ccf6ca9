"""A worker process stopped (SIGSTOP) for longer than its leases must never
commit a reconcile while another worker holds the same key: two worker
processes (tests/programs/stall_worker.py) on one queue, the first (4 at a
time) stopped three times for 3 s with 1 s leases, the second taking one key
at a time, so that keys keep being leased to the stopped one; the successful
reconciles each recorded must not overlap on a key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from conftest import Sidecar
from workqueue_sidecar import SyncClient

PROGRAM = Path(__file__).parent / "programs" / "stall_worker.py"
LEASE_TTL = 1.0
CYCLES = 3


def start_worker(sidecar: Sidecar, log: Path, concurrency: int) -> subprocess.Popen[str]:
    command = [sys.executable, str(PROGRAM), "--sidecar", sidecar.target, "--log", str(log)]
    command += ["--lease-ttl", str(LEASE_TTL), "--concurrency", str(concurrency)]
    return subprocess.Popen(command, text=True)


# conformance: C6
def test_a_stopped_worker_should_never_commit_while_another_holds_the_key(sidecar: Sidecar, tmp_path: Path) -> None:
    log = tmp_path / "reconciles.log"
    with SyncClient.connect(sidecar.target) as client:
        client.add("default", "ns/k0", "ns/k1", "ns/k2", "ns/k3")
    workers = [start_worker(sidecar, log, 4)]
    try:
        time.sleep(1.5)  # the first worker holds leases
        workers.append(start_worker(sidecar, log, 1))
        time.sleep(1.5)
        first = workers[0]
        for _ in range(CYCLES):
            first.send_signal(signal.SIGSTOP)
            time.sleep(3 * LEASE_TTL)  # its leases expire; the second worker takes their keys
            first.send_signal(signal.SIGCONT)
            time.sleep(1.5)
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGCONT)
            worker.kill()
            worker.wait()

    commits: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    abandoned = by_first = 0
    for line in log.read_text().splitlines():
        fields = line.split()
        if fields[0] == "abandon":
            abandoned += 1
            continue
        assert fields[0] == "success" and len(fields) == 5, line
        key, pid, start, end = fields[1], int(fields[2]), int(fields[3]), int(fields[4])
        commits[key].append((start, end, pid))
        by_first += pid == workers[0].pid
    overlaps = []
    for key, spans in commits.items():
        spans.sort()
        for earlier, later in zip(spans, spans[1:]):
            if later[0] < earlier[1]:
                overlaps.append((key, earlier, later))
    total = sum(len(spans) for spans in commits.values())
    print(f"{total} successful reconciles ({by_first} by the stopped worker), {abandoned} abandoned", file=sys.stderr)
    assert not overlaps, f"successful reconciles overlap (key, (start, end, pid) twice): {overlaps}"
    assert total > 0 and by_first > 0, f"the scenario did not run: {total} commits, {by_first} by the stopped worker"
    assert os.path.exists(log)
