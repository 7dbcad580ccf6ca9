"""bench/kopf's sidecar side: a no-op ConfigMap reconciler on the project's asyncio client.

    python worker.py --sidecar 127.0.0.1:PORT --queue cms --stamps FILE [--concurrency 4]

The sidecar (started by bench/kopf) holds the informer and the queue; this
process runs ``client.queue(name).run(reconcile, concurrency=...)`` (the Work
stream), and the reconcile only records the call (stamps.py) and returns
success, as the kopf handler does on the other side. Runs until SIGTERM or
SIGINT, then stops as the client's README shows (running reconciles finish,
held keys go back).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from stamps import Stamps
from workqueue_sidecar import Client, Request, Result


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sidecar", required=True, help="the sidecar's gRPC address (host:port or unix:///path)")
    parser.add_argument("--queue", required=True, help="the queue whose primary informer watches the ConfigMaps")
    parser.add_argument("--stamps", required=True, help="the file to append a line per reconcile to")
    parser.add_argument("--concurrency", type=int, default=4, help="reconciles at once (the stream's lease window)")
    args = parser.parse_args()

    stamps = Stamps(args.stamps)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    async def reconcile(req: Request) -> Result | None:
        # enqueued_at is the sidecar's stamp of when the key became ready.
        stamps.reconciled(req.name, req.enqueued_at)
        return None

    async with Client.connect(args.sidecar, worker_name="bench-kopf") as client:
        queue = client.queue(args.queue)
        # run retries what it can; ask once so an unknown queue fails here.
        await queue.len()
        await queue.run(reconcile, concurrency=args.concurrency, stop=stop)


if __name__ == "__main__":
    asyncio.run(main())
