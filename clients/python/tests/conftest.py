"""Fixtures: the real sidecar binary, started per test on 127.0.0.1:0, and clients of it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from workqueue_sidecar import Client, Reconcile

REPO = Path(__file__).resolve().parents[3]
CACHE_DIR = Path(os.environ.get("WQS_CACHE_DIR", Path.home() / ".cache" / "workqueue-sidecar"))
#: How long the sidecar gets to print its listening line.
START_TIMEOUT = 30.0
LISTENING = re.compile(r'listening transport="(?P<transport>tcp|unix)" (?:address|path)=(?P<where>\S+)')


@pytest.fixture(scope="session")
def sidecar_bin() -> Path:
    """The sidecar binary: $WQS_SIDECAR_BIN, else built with cargo (a no-op when current)."""
    given = os.environ.get("WQS_SIDECAR_BIN")
    if given:
        path = Path(given)
        if not os.access(path, os.X_OK):
            pytest.fail(f"WQS_SIDECAR_BIN={given} is not an executable file")
        return path
    target = Path(os.environ.get("CARGO_TARGET_DIR", CACHE_DIR / "target"))
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    build = subprocess.run(
        ["cargo", "build", "--locked", "--bin", "workqueue-sidecar"], cwd=REPO, env=env, check=False
    )
    if build.returncode != 0:
        pytest.fail(f"cargo build --bin workqueue-sidecar failed with status {build.returncode}")
    return target / "debug" / "workqueue-sidecar"


@dataclass
class Sidecar:
    """A running sidecar process and what it printed."""

    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    #: "127.0.0.1:PORT" or the unix socket's path, once listening.
    address: str = ""
    transport: str = ""
    listening: threading.Event = field(default_factory=threading.Event)

    @property
    def target(self) -> str:
        return f"unix://{self.address}" if self.transport == "unix" else self.address

    def log(self) -> str:
        return "".join(self.lines)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it has not exited within 10s; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)
            found = LISTENING.search(line)
            if found and not self.listening.is_set():
                self.transport, self.address = found["transport"], found["where"]
                self.listening.set()


StartSidecar = Callable[..., Sidecar]


@pytest.fixture
def start_sidecar(sidecar_bin: Path, tmp_path: Path) -> Iterator[StartSidecar]:
    """Starts sidecars for one test: ``start_sidecar(config=YAML_TEXT, args=[...], tcp=..., unix=...)``."""
    started: list[Sidecar] = []

    def start(
        config: str | None = None,
        args: list[str] | None = None,
        tcp: str = "127.0.0.1:0",
        unix: str | None = None,
    ) -> Sidecar:
        command = [str(sidecar_bin), "--tcp", tcp, "--admin", "off", "--log-format", "text"]
        command += ["--log", "info,workqueue_sidecar=debug"]
        # The suite tests ShutDown, which a sidecar refuses unless allowed.
        command += ["--allow-shutdown-rpc"]
        if unix is not None:
            command += ["--unix", unix]
        if config is not None:
            path = tmp_path / f"sidecar-{len(started)}.yaml"
            path.write_text(config)
            command += ["--config", str(path)]
        command += args or []
        # The sidecar reads WQS_* variables as flag defaults; none may leak in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("WQS_")}
        process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        sidecar = Sidecar(process)
        started.append(sidecar)
        threading.Thread(target=sidecar._pump, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not sidecar.listening.wait(0.05):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the sidecar did not start ({command}):\n{sidecar.log()}")
        return sidecar

    yield start
    for sidecar in started:
        sidecar.stop()


@pytest.fixture
def sidecar(start_sidecar: StartSidecar) -> Sidecar:
    """A standalone sidecar: one queue named "default" with client-go's defaults."""
    return start_sidecar()


@pytest.fixture
async def client(sidecar: Sidecar) -> AsyncIterator[Client]:
    async with Client.connect(sidecar.target, worker_name="pytest") as connected:
        yield connected


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    """The local control plane's kubeconfig (tests marked k8s); never skipped silently."""
    path = os.environ.get("WQS_KUBECONFIG")
    if not path:
        pytest.fail(
            "WQS_KUBECONFIG is not set: this test needs the local control plane. Run\n"
            '    hack/control-plane up; eval "$(hack/control-plane env)"\n'
            "or hack/test-python, which starts one (hack/test-python --no-k8s leaves these tests out)."
        )
    return path


async def eventually(check: Callable[[], Awaitable[bool]] | Callable[[], bool], timeout: float = 10.0) -> None:
    """Polls ``check`` until it is true; fails the test after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        outcome: Any = check()
        if asyncio.iscoroutine(outcome):
            outcome = await outcome
        if outcome:
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(client: Client, queue: str, reconcile: Reconcile, **options: Any) -> AsyncIterator[asyncio.Event]:
    """Runs ``client.run`` in the background; on exit stops it and waits (at most 15s) for it to return."""
    stop = asyncio.Event()
    task = asyncio.create_task(client.run(queue, reconcile, stop=stop, **options))
    try:
        yield stop
    finally:
        stop.set()
        async with asyncio.timeout(15):
            await task
