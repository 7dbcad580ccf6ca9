#!/usr/bin/env python3
"""The example controller of workqueue-sidecar (seed 001): a Namespace for every User.

The sidecar (config: deploy/overlays/users/config.yaml) watches Users
(example.com/v1, cluster-scoped, deploy/crds/user.yaml) and the Namespaces
made for them, and queues User names on the queue "users". This worker reads
through the sidecar's cache and writes with the ``kubernetes`` package:

- a User gets the finalizer ``example.com/namespace`` and a Namespace
  ``user-<name>`` that it owns (controller ownerReference), labelled with
  its display name;
- a deleted User has its Namespace deleted, then its finalizer removed.

Every step checks before it writes, so reconciling twice changes nothing; a
write that fails (a conflict with a stale cache, say) raises, and the sidecar
retries the User with backoff.

    python examples/users.py                                            # in a pod (deploy/overlays/users)
    python examples/users.py --sidecar 127.0.0.1:50051 --kubeconfig ~/.kube/config
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from workqueue_sidecar import Request, SyncClient

#: Holds a User until its Namespace is deleted.
FINALIZER = "example.com/namespace"
#: The field manager of this reconciler's writes, and its managed-by label value.
FIELD_MANAGER = "users-reconciler"
#: Marks the Namespaces made here; the sidecar's namespaces informer selects on it.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
#: The display name, as a label value (sanitized) and verbatim as an annotation.
DISPLAY_NAME_LABEL = "example.com/display-name"
DISPLAY_NAME_ANNOTATION = "example.com/display-name"
#: Names the owning User on its Namespace.
USER_LABEL = "example.com/user"
USERS = ("example.com", "v1", "users")

log = logging.getLogger("users")


def namespace_for(user: str) -> str:
    return f"user-{user}"


def label_value(text: str) -> str:
    """A valid label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", text)[:63].strip("-_.")


@dataclass
class UsersReconciler:
    """Reconciles one User: its finalizer and its Namespace, or its deletion."""

    sidecar: SyncClient
    core: k8s.CoreV1Api
    custom: k8s.CustomObjectsApi
    users_informer: str = "users"
    namespaces_informer: str = "namespaces"

    def __call__(self, request: Request) -> None:
        user = self.sidecar.cache.get(self.users_informer, "", request.name, wait=10)
        if user is None:
            return  # gone: its finalizer saw its Namespace deleted
        meta = user["metadata"]
        finalizers: list[str] = meta.get("finalizers") or []
        if meta.get("deletionTimestamp"):
            if FINALIZER in finalizers:
                self.finalize(user, [f for f in finalizers if f != FINALIZER])
            return
        if FINALIZER not in finalizers:
            self.set_finalizers(user, [*finalizers, FINALIZER])
        self.apply_namespace(user)

    def finalize(self, user: dict[str, Any], kept: list[str]) -> None:
        name = namespace_for(user["metadata"]["name"])
        try:
            self.core.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise RuntimeError(f"deleting namespace {name}: {err.status} {err.reason}") from err
        self.set_finalizers(user, kept)
        log.info("user %s deleted: namespace %s deleted, finalizer removed", user["metadata"]["name"], name)

    def set_finalizers(self, user: dict[str, Any], finalizers: list[str]) -> None:
        """Writes the finalizers on the condition that the User is still at the
        version read from the cache (else 409, and the sidecar retries)."""
        meta = user["metadata"]
        patch = {"metadata": {"resourceVersion": meta["resourceVersion"], "finalizers": finalizers}}
        try:
            self.custom.patch_cluster_custom_object(*USERS, meta["name"], patch)
        except ApiException as err:
            raise RuntimeError(f"setting the finalizers of user {meta['name']}: {err.status} {err.reason}") from err

    def apply_namespace(self, user: dict[str, Any]) -> None:
        meta = user["metadata"]
        display_name: str = user.get("spec", {}).get("display_name", "")
        name = namespace_for(meta["name"])
        labels = {
            MANAGED_BY_LABEL: FIELD_MANAGER,
            USER_LABEL: meta["name"],
            DISPLAY_NAME_LABEL: label_value(display_name),
        }
        annotations = {DISPLAY_NAME_ANNOTATION: display_name}
        owner = {
            "apiVersion": "example.com/v1",
            "kind": "User",
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        current = self.sidecar.cache.get(self.namespaces_informer, "", name)
        if current is not None and _up_to_date(current["metadata"], labels, annotations, meta["uid"]):
            return
        wanted = {"labels": labels, "annotations": annotations, "ownerReferences": [owner]}
        try:
            try:
                self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, **wanted}})
            except ApiException as err:
                if err.status != 409:
                    raise
                self.core.patch_namespace(name, {"metadata": wanted}, field_manager=FIELD_MANAGER)
        except ApiException as err:
            raise RuntimeError(f"writing namespace {name}: {err.status} {err.reason}") from err
        log.info("user %s: namespace %s labelled %r", meta["name"], name, labels[DISPLAY_NAME_LABEL])


def _up_to_date(meta: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], uid: str) -> bool:
    have_labels = meta.get("labels") or {}
    have_annotations = meta.get("annotations") or {}
    owners = [o for o in meta.get("ownerReferences") or [] if o.get("controller")]
    return (
        all(have_labels.get(k) == v for k, v in labels.items())
        and all(have_annotations.get(k) == v for k, v in annotations.items())
        and [o.get("uid") for o in owners] == [uid]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # The same variable and default as the Go example: what deploy/base sets.
    parser.add_argument("--sidecar",
                        default=os.environ.get("WORKQUEUE_SIDECAR_TARGET", "unix:///run/workqueue-sidecar/grpc.sock"),
                        help="the sidecar's gRPC address: unix:///path or host:port (env WORKQUEUE_SIDECAR_TARGET)")
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                        help="kubeconfig for writes; without it, the pod's service account")
    parser.add_argument("--queue", default="users")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    if args.kubeconfig:
        k8s_config.load_kube_config(config_file=args.kubeconfig)
    else:
        k8s_config.load_incluster_config()
    api = k8s.ApiClient()
    stop = threading.Event()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        log.info("SIGTERM: finishing running reconciles, then stopping")
        stop.set()

    signal.signal(signal.SIGTERM, on_sigterm)
    with SyncClient.connect(args.sidecar, worker_name=f"users-py/{os.getpid()}") as sidecar:
        reconciler = UsersReconciler(sidecar, k8s.CoreV1Api(api), k8s.CustomObjectsApi(api))
        log.info("reconciling queue %r from %s, %d at a time", args.queue, args.sidecar, args.concurrency)
        sidecar.run(args.queue, reconciler, concurrency=args.concurrency, stop=stop)
    log.info("stopped")


if __name__ == "__main__":
    main()
