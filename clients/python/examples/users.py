#!/usr/bin/env python3
# Seed 001's controller on workqueue-sidecar: a Namespace for every User.
#
# For each User (example.com/v1, cluster-scoped, deploy/crds/user.yaml) a
# Namespace ``user-<name>``, owned by it (controller ownerReference) and
# labelled with its display name; a User being deleted has its Namespace
# deleted before it goes. No Kubernetes client: reads come from the sidecar's
# caches and writes go through the sidecar, under the reconcile's lease.
#
# The sidecar (deploy/overlays/users/config.yaml) keeps the User's finalizer
# (queues.users.finalizer): it adds it before a live User's lease goes out and
# removes it when a `deleting` lease ends in success. It hands a User's lease
# out only once its caches have seen the writes made under the previous one,
# so a reconcile never acts on a state older than its own last write.
#
#     python examples/users.py                          # in a pod (deploy/overlays/users)
#     python examples/users.py --sidecar 127.0.0.1:50051

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import os
import re
import signal
from typing import Any

from workqueue_sidecar import Client, NotFoundError, ObjectRef, Request

DISPLAY_NAME = "example.com/display-name"  # a label (sanitized) and an annotation (verbatim)


def label_value(text: str) -> str:
    # A valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends.
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-_.")


async def reconcile(client: Client, req: Request) -> None:
    # The User's Namespace made to match the User, or deleted when the User is
    # being deleted or gone. Raising retries the User with backoff.
    ref = ObjectRef("v1", "Namespace", "", f"user-{req.name}")
    if req.deleting or req.object is None or req.object.deleted:
        try:  # deleting: returning lets the sidecar remove the User's finalizer
            await req.objects.delete(ref)
        except NotFoundError:
            pass
        return
    display_name = req.object.data.get("spec", {}).get("display_name", "")
    labels = {"app.kubernetes.io/managed-by": "users-reconciler", "example.com/user": req.name, DISPLAY_NAME: label_value(display_name)}
    annotations = {DISPLAY_NAME: display_name}
    owners = [req.controller_ref()]
    want = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ref.name, "labels": labels, "annotations": annotations, "ownerReferences": owners}}
    have = await client.cache.get("namespaces", "", ref.name)
    if have is None:
        # Create, not apply: were the cache behind our own last write, this
        # would fail with AlreadyExists (the e2e tests count them: none).
        await req.objects.create(want)
    elif not _covers(have["metadata"], labels, annotations, owners):
        await req.objects.apply(want, force=True)  # edited, or owned by another


def _covers(meta: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], owners: list[Any]) -> bool:
    return (
        (meta.get("labels") or {}).items() >= labels.items()
        and (meta.get("annotations") or {}).items() >= annotations.items()
        and meta.get("ownerReferences") == owners
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description="A Namespace for every User (seed 001), on workqueue-sidecar.")
    # The same variable and default as the Go example: what deploy/base sets.
    parser.add_argument("--sidecar",
                        default=os.environ.get("WORKQUEUE_SIDECAR_TARGET", "unix:///run/workqueue-sidecar/grpc.sock"),
                        help="the sidecar's gRPC address: unix:///path or host:port (env WORKQUEUE_SIDECAR_TARGET)")
    parser.add_argument("--queue", default="users")
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)  # unused (the sidecar writes); hack/demo passes it
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):  # finish running reconciles, then stop
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    async with Client.connect(args.sidecar, worker_name=f"users-py/{os.getpid()}") as client:
        logging.info("reconciling queue %r from %s, %d at a time", args.queue, args.sidecar, args.concurrency)
        await client.queue(args.queue).run(functools.partial(reconcile, client), concurrency=args.concurrency,
                                           include_object=True, stop=stop)
    logging.info("stopped")


if __name__ == "__main__":
    asyncio.run(main())
