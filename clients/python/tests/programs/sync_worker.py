"""A worker process for tests: SyncClient.run on a queue, each reconcile taking
``--hold`` seconds; prints "started KEY" and "finished KEY" as it goes."""

from __future__ import annotations

import argparse
import sys
import time

from workqueue_sidecar import Request, SyncClient


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sidecar", required=True)
    parser.add_argument("--queue", default="default")
    parser.add_argument("--hold", type=float, default=1.0)
    args = parser.parse_args()

    def reconcile(request: Request) -> None:
        print(f"started {request.key}", flush=True)
        time.sleep(args.hold)
        print(f"finished {request.key}", flush=True)

    with SyncClient.connect(args.sidecar) as client:
        client.run(args.queue, reconcile)
    print("stopped", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
