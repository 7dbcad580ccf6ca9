"""End to end: examples/users.py with the real sidecar and a real kube-apiserver.

Needs the local control plane: ``hack/control-plane up; eval "$(hack/control-plane env)"``
sets WQS_KUBECONFIG (hack/test-python starts one itself when it is unset).
The control plane runs no kube-controller-manager, so a deleted Namespace
stays Terminating: "deleted" here means it has a deletionTimestamp.
"""

from __future__ import annotations

import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from conftest import REPO, Sidecar, StartSidecar

pytestmark = pytest.mark.k8s

CLIENT_DIR = Path(__file__).resolve().parents[1]
EXAMPLE = CLIENT_DIR / "examples" / "users.py"
SIDECAR_CONFIG = REPO / "deploy" / "overlays" / "users" / "config.yaml"
CRD = REPO / "deploy" / "crds" / "user.yaml"
USERS = ("example.com", "v1", "users")
DISPLAY_NAME_LABEL = "example.com/display-name"


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> k8s.ApiClient:
    """A client of the control plane, with the User CRD installed and established."""
    api = k8s_config.new_client_from_config(config_file=kubeconfig)
    extensions = k8s.ApiextensionsV1Api(api)
    try:
        extensions.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
    except ApiException as err:
        if err.status != 409:
            raise

    def established() -> bool:
        crd = extensions.read_custom_resource_definition("users.example.com")
        return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])

    wait_until(established, "the User CRD to be established")
    return api


@dataclass
class Cluster:
    """The Users and Namespaces of one test, named with a prefix of its own."""

    api: k8s.ApiClient
    prefix: str

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    def user_name(self, i: int) -> str:
        return f"{self.prefix}-{i:02d}"

    def create_user(self, name: str, display_name: str) -> None:
        body = {"apiVersion": "example.com/v1", "kind": "User", "metadata": {"name": name}, "spec": {"display_name": display_name}}
        self.custom.create_cluster_custom_object(*USERS, body)

    def user(self, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.custom.get_cluster_custom_object(*USERS, name)
            return found
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def namespace(self, user: str) -> k8s.V1Namespace | None:
        try:
            return self.core.read_namespace(f"user-{user}")
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def reconciled(self, user: str, display_name: str) -> bool:
        """The User has the finalizer, and its Namespace is owned by it and labelled with its display name."""
        found = self.user(user)
        namespace = self.namespace(user)
        if found is None or namespace is None or namespace.metadata.deletion_timestamp is not None:
            return False
        owners = [o for o in namespace.metadata.owner_references or [] if o.controller]
        return (
            "example.com/namespace" in (found["metadata"].get("finalizers") or [])
            and [o.uid for o in owners] == [found["metadata"]["uid"]]
            and (namespace.metadata.labels or {}).get(DISPLAY_NAME_LABEL) == display_name.replace(" ", "-")
            and (namespace.metadata.annotations or {}).get(DISPLAY_NAME_LABEL) == display_name
        )

    def clean_up(self) -> None:
        for user in self.custom.list_cluster_custom_object(*USERS)["items"]:
            name = user["metadata"]["name"]
            if not name.startswith(self.prefix):
                continue
            try:
                self.custom.patch_cluster_custom_object(*USERS, name, {"metadata": {"finalizers": []}})
                self.custom.delete_cluster_custom_object(*USERS, name)
            except ApiException as err:
                if err.status != 404:
                    raise
            try:
                self.core.delete_namespace(f"user-{name}")
            except ApiException as err:
                if err.status != 404:
                    raise


@pytest.fixture
def cluster(kube: k8s.ApiClient) -> Iterator[Cluster]:
    made = Cluster(kube, f"py{secrets.token_hex(3)}")
    yield made
    made.clean_up()


@pytest.fixture
def users_sidecar(start_sidecar: StartSidecar, kubeconfig: str, kube: k8s.ApiClient) -> Sidecar:
    return start_sidecar(config=SIDECAR_CONFIG.read_text(), args=["--kubeconfig", kubeconfig])


StartExample = Callable[..., subprocess.Popen[bytes]]


@pytest.fixture
def start_example(users_sidecar: Sidecar, tmp_path: Path) -> Iterator[StartExample]:
    """Starts examples/users.py against the test's sidecar; its log goes to tmp_path."""
    started: list[subprocess.Popen[bytes]] = []

    def start(concurrency: int = 4) -> subprocess.Popen[bytes]:
        log = (tmp_path / f"users-{len(started)}.log").open("wb")
        command = [sys.executable, str(EXAMPLE), "--sidecar", users_sidecar.target]
        process = subprocess.Popen([*command, "--concurrency", str(concurrency)], stdout=log, stderr=log)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
    for log in sorted(tmp_path.glob("users-*.log")):
        print(f"--- {log.name}\n{log.read_text()}")


def stale_creates(tmp_path: Path) -> int:
    """Creates that failed with AlreadyExists in the examples' logs: each one a
    reconcile that read a cache older than its own last write."""
    return sum(log.read_text().lower().count("already exists") for log in tmp_path.glob("users-*.log"))


def test_users_should_get_owned_namespaces_that_follow_them(cluster: Cluster, start_example: StartExample, tmp_path: Path) -> None:
    worker = start_example()
    names = [cluster.user_name(i) for i in range(20)]
    for i, name in enumerate(names):
        cluster.create_user(name, f"User {i}")
    wait_until(lambda: all(cluster.reconciled(n, f"User {i}") for i, n in enumerate(names)), "20 owned Namespaces")

    # A new display name: the Namespace's label follows.
    renamed = names[3]
    cluster.custom.patch_cluster_custom_object(*USERS, renamed, {"spec": {"display_name": "Renamed Person"}})
    wait_until(lambda: cluster.reconciled(renamed, "Renamed Person"), "the label to follow the display name")

    # A deleted User: its Namespace is deleted, then its finalizer removed, so the User goes.
    gone = names[5]
    cluster.custom.delete_cluster_custom_object(*USERS, gone)
    wait_until(lambda: cluster.user(gone) is None, "the deleted User to disappear")
    namespace = cluster.namespace(gone)
    assert namespace is None or namespace.metadata.deletion_timestamp is not None

    # The Namespace of a deleted User is not made again, and the others stay.
    time.sleep(1)
    namespace = cluster.namespace(gone)
    assert namespace is None or namespace.metadata.deletion_timestamp is not None
    assert all(cluster.reconciled(n, f"User {i}") for i, n in enumerate(names) if n not in (renamed, gone))
    assert worker.poll() is None, "the example exited"
    assert stale_creates(tmp_path) == 0


def test_the_workers_own_writes_should_never_be_read_stale(cluster: Cluster, start_example: StartExample, tmp_path: Path) -> None:
    """Users renamed every few milliseconds from their creation on, so each
    reconcile's write is followed at once by another lease of the same key
    (the rename, the sidecar's finalizer, the Namespace's own event): every
    Namespace ends with the last display name, and no reconcile acts on a
    cache older than its own last write (it would create the Namespace again
    and fail with AlreadyExists; the stale-read guard makes that none). It
    cannot show the guard is needed (a local API server's watch nearly always
    beats the next lease, and a sidecar with the guard off passed it too):
    tests/k8s_stale_read_guard.rs is the test that fails without it."""
    users, renames = 10, 20
    start_example()
    names = [cluster.user_name(i) for i in range(users)]

    def create_and_rename(name: str) -> None:
        cluster.create_user(name, "Name 0")
        for i in range(1, renames + 1):
            time.sleep(random.uniform(0, 0.015))
            cluster.custom.patch_cluster_custom_object(*USERS, name, {"spec": {"display_name": f"Name {i}"}})

    with ThreadPoolExecutor(users) as pool:
        list(pool.map(create_and_rename, names))
    wait_until(lambda: all(cluster.reconciled(n, f"Name {renames}") for n in names), "the last display names")
    assert stale_creates(tmp_path) == 0


def test_a_killed_worker_should_leave_no_user_unreconciled(cluster: Cluster, start_example: StartExample, tmp_path: Path) -> None:
    names = [cluster.user_name(i) for i in range(20)]
    for i, name in enumerate(names):
        cluster.create_user(name, f"User {i}")
    first = start_example(concurrency=1)
    wait_until(lambda: any(cluster.namespace(n) is not None for n in names), "the first Namespace", interval=0.01)
    first.kill()  # SIGKILL, mid-run: its held lease goes back to the queue when the stream breaks
    first.wait(10)
    done_at_kill = sum(cluster.namespace(n) is not None for n in names)
    print(f"killed the worker with {done_at_kill} of {len(names)} Namespaces made")

    start_example()
    wait_until(lambda: all(cluster.reconciled(n, f"User {i}") for i, n in enumerate(names)), "every User reconciled")
    assert stale_creates(tmp_path) == 0


def wait_until(check: Callable[[], bool], what: str, timeout: float = 60.0, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)
