"""bench/clients' Python worker: the asyncio client's queue.run with a handler that returns
success at once, until N reconciles have returned.

    python noop.py TARGET QUEUE N CONCURRENCY

Prints one line: result reconciles=N elapsed_s=... cpu_s=... rss_kib=..., from the first
reconcile's start to the N-th reconcile's return (CPU time of this process over the same span,
VmRSS then).
"""

import asyncio
import sys
import time

from workqueue_sidecar import Client, Request


async def main(target: str, queue: str, n: int, concurrency: int) -> None:
    stop = asyncio.Event()
    done = 0
    t0 = t1 = c0 = c1 = 0.0
    rss = 0

    async def noop(req: Request) -> None:
        nonlocal done, t0, t1, c0, c1, rss
        if done == 0:
            t0, c0 = time.perf_counter(), time.process_time()
        done += 1
        if done == n:
            t1, c1 = time.perf_counter(), time.process_time()
            rss = rss_kib()
            stop.set()

    async with Client.connect(target) as client:
        await client.queue(queue).run(noop, concurrency=concurrency, stop=stop)
    print(f"result reconciles={done} elapsed_s={t1 - t0:.6f} cpu_s={c1 - c0:.6f} rss_kib={rss}")


def rss_kib() -> int:
    """VmRSS from /proc/self/status."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
