"""A worker process for the stalled-worker test: reconciles the queue "default"
until killed, appending to ``--log`` one line per reconcile: "success KEY PID
START_NS END_NS" when it committed, "abandon KEY PID" when its lease no longer
held at commit time (``request.lease_valid()``, as the README asks)."""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from workqueue_sidecar import Client, Request, Result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sidecar", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--hold", type=float, default=0.4)
    parser.add_argument("--lease-ttl", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    pid = os.getpid()

    def record(line: str) -> None:
        # One write per line with O_APPEND keeps the two processes' lines whole.
        fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    async def reconcile(request: Request) -> Result:
        start = time.time_ns()
        try:
            await asyncio.sleep(args.hold)
        except asyncio.CancelledError:
            record(f"abandon {request.key} {pid}")
            raise
        if not request.lease_valid():
            record(f"abandon {request.key} {pid}")
            raise RuntimeError("the lease ended before the commit")
        record(f"success {request.key} {pid} {start} {time.time_ns()}")
        return Result(requeue_after=0.01)

    async with Client.connect(args.sidecar, worker_name=f"stall-{pid}") as client:
        await client.run("default", reconcile, concurrency=args.concurrency, lease_ttl=args.lease_ttl)


if __name__ == "__main__":
    asyncio.run(main())
