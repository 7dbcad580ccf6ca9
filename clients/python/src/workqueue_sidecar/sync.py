"""The synchronous API for scripts: the asyncio client on an event loop in a thread of its own."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import FrameType, TracebackType
from typing import Any, Self, TypeVar

import grpc

from ._wire import Seconds
from .cache import Cache
from .cached_object import CachedObject
from .client import Client
from .introspection import DrainReport, KeyInfo, QueueLength, RateLimitedKey
from .lease import Extension, Lease
from .objects import Deletion, LeaseRef, ObjectRef, Objects, Propagation, Written
from .request import Request, Result

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How SyncClient calls a coroutine on its event loop from any thread.
_Call = Callable[[Coroutine[Any, Any, Any]], Any]


class SyncObjects:
    """The blocking face of ``Objects``: the same writes, without ``await``."""

    def __init__(self, objects: Objects, call: _Call) -> None:
        self._objects = objects
        self._call = call

    @property
    def lease(self) -> LeaseRef | None:
        """The lease the writes name; None for writes outside a lease."""
        return self._objects.lease

    def under(self, lease: LeaseRef | None) -> SyncObjects:
        """The same writes, made under ``lease``."""
        return SyncObjects(self._objects.under(lease), self._call)

    def apply(self, obj: Mapping[str, Any], *, field_manager: str = "", force: bool = False) -> Written:
        written: Written = self._call(self._objects.apply(obj, field_manager=field_manager, force=force))
        return written

    def create(self, obj: Mapping[str, Any], *, field_manager: str = "") -> Written:
        written: Written = self._call(self._objects.create(obj, field_manager=field_manager))
        return written

    def patch(
        self,
        target: ObjectRef | Mapping[str, Any],
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        status: bool = False,
        field_manager: str = "",
    ) -> Written:
        written: Written = self._call(
            self._objects.patch(target, patch, status=status, field_manager=field_manager)
        )
        return written

    def delete(
        self,
        target: ObjectRef | Mapping[str, Any],
        *,
        uid: str = "",
        resource_version: str = "",
        propagation: Propagation = Propagation.DEFAULT,
    ) -> Deletion:
        deletion: Deletion = self._call(
            self._objects.delete(target, uid=uid, resource_version=resource_version, propagation=propagation)
        )
        return deletion


@dataclasses.dataclass(frozen=True)
class SyncRequest(Request):
    """The Request a ``SyncClient.run`` reconcile function gets: ``objects``
    writes under its lease without ``await`` (``req.objects.apply(obj)``).
    Annotate a plain reconcile function's argument with it for the types."""

    @property
    def objects(self) -> SyncObjects:  # type: ignore[override]
        """Writes under this request's lease, blocking (see ``Request.objects``)."""
        if self._objects is None:
            raise RuntimeError("this Request did not come from a worker, so it cannot write: use client.objects")
        objects: SyncObjects = self._objects
        return objects


#: What SyncClient.run calls for each key, in a worker thread.
SyncReconcile = Callable[[SyncRequest], Result | None]

#: How often a running SyncClient.run looks at its threading.Event.
STOP_POLL_INTERVAL = 0.1


class SyncClient:
    """A blocking client: the same calls as ``Client``, without ``await``::

        with SyncClient.connect("127.0.0.1:50051") as client:
            client.add("default", "ns/name")
            client.run("default", reconcile, concurrency=4, stop=stop_event)

    The asyncio client runs on an event loop in a thread of its own; any
    thread may call, including the reconcile functions that ``run`` calls.
    """

    def __init__(
        self,
        target: str,
        *,
        worker_name: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="workqueue-sidecar", daemon=True)
        self._thread.start()
        self._client = self._call(_connect(target, worker_name, credentials))
        #: Reads from the sidecar's informer caches.
        self.cache = SyncCache(self._client.cache, self._call)
        #: Writes to Kubernetes through the sidecar, outside any lease (in a
        #: reconcile, write with ``req.objects`` instead).
        self.objects = SyncObjects(self._client.objects, self._call)

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        worker_name: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> SyncClient:
        """A client for the sidecar at ``host:port`` or ``unix:///path``; TLS with ``credentials``."""
        return cls(target, worker_name=worker_name, credentials=credentials)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel and ends the event loop's thread."""
        if self._loop.is_closed():
            return
        try:
            self._call(self._client.close())
            self._call(self._loop.shutdown_default_executor())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("SyncClient called from its own event loop; use the asyncio Client there")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()  # KeyboardInterrupt while waiting, say
            raise

    @property
    def worker_name(self) -> str:
        return self._client.worker_name

    def wait_ready(self, timeout: Seconds | None = None) -> None:
        self._call(self._client.wait_ready(timeout))

    def queue(self, name: str, *, priority: int | None = None, reason: str = "") -> SyncQueue:
        """A handle on the queue ``name``: ``client.queue("users").add("alice")``."""
        return SyncQueue(self, name, priority=priority, reason=reason)

    def add(self, queue: str, *keys: str, priority: int | None = None, reason: str = "") -> None:
        self._call(self._client.add(queue, *keys, priority=priority, reason=reason))

    def add_after(
        self, queue: str, *keys: str, delay: Seconds, priority: int | None = None, reason: str = ""
    ) -> None:
        self._call(self._client.add_after(queue, *keys, delay=delay, priority=priority, reason=reason))

    def add_rate_limited(
        self, queue: str, *keys: str, priority: int | None = None, reason: str = ""
    ) -> list[RateLimitedKey]:
        return self._call(self._client.add_rate_limited(queue, *keys, priority=priority, reason=reason))

    def forget(self, queue: str, key: str) -> None:
        self._call(self._client.forget(queue, key))

    def num_requeues(self, queue: str, key: str) -> int:
        return self._call(self._client.num_requeues(queue, key))

    def len(self, queue: str) -> QueueLength:
        return self._call(self._client.len(queue))

    def key_state(self, queue: str, key: str) -> KeyInfo:
        return self._call(self._client.key_state(queue, key))

    def shut_down(self, queue: str, *, drain: bool = False, drain_timeout: Seconds | None = None) -> DrainReport:
        return self._call(self._client.shut_down(queue, drain=drain, drain_timeout=drain_timeout))

    def get(
        self,
        queue: str,
        *,
        max_keys: int = 1,
        wait: Seconds = 0,
        lease_ttl: Seconds | None = None,
        include_object: bool = False,
    ) -> builtins.list[Lease]:
        return self._call(
            self._client.get(
                queue, max_keys=max_keys, wait=wait, lease_ttl=lease_ttl, include_object=include_object
            )
        )

    def done(self, queue: str, key: str, token: int) -> None:
        self._call(self._client.done(queue, key, token))

    def finish(
        self, queue: str, key: str, token: int, result: Result | None = None, *, error: str | None = None
    ) -> None:
        self._call(self._client.finish(queue, key, token, result, error=error))

    def extend(self, queue: str, key: str, token: int, ttl: Seconds | None = None) -> Extension:
        return self._call(self._client.extend(queue, key, token, ttl))

    def run(
        self,
        queue: str,
        reconcile: SyncReconcile,
        *,
        concurrency: int = 1,
        include_object: bool = False,
        stop: threading.Event | None = None,
        lease_ttl: Seconds | None = None,
        drain_timeout: Seconds = 30.0,
    ) -> None:
        """Like ``Client.run``, with a plain function run in a pool of ``concurrency``
        threads, until ``stop`` is set (from another thread or a signal handler).
        Ctrl-C (KeyboardInterrupt) in the calling thread stops it the same way;
        a second Ctrl-C stops at once. Called from the main thread, it also
        stops gracefully on SIGTERM (what a pod receives), as on Ctrl-C; the
        previous SIGTERM handler is back when it returns.

        A thread cannot be interrupted: when the sidecar asks to cancel, the lease
        is lost or the worker is stopping, ``request.cancelled()`` turns True; a
        long reconcile should check it now and then and raise if it stops early
        (returning is success). Until it returns its lease stays held and
        extended, past ``drain_timeout`` too (``run`` returns after it, and its
        outcome counts), unless the lease is lost (the stream to the sidecar
        broke, the sidecar revoked it).
        """
        stop = stop or threading.Event()
        with _stop_on_sigterm(stop):
            self._run_until_stopped(
                queue,
                reconcile,
                concurrency=concurrency,
                include_object=include_object,
                stop=stop,
                lease_ttl=lease_ttl,
                drain_timeout=drain_timeout,
            )

    def _run_until_stopped(
        self,
        queue: str,
        reconcile: SyncReconcile,
        *,
        concurrency: int,
        include_object: bool,
        stop: threading.Event,
        lease_ttl: Seconds | None,
        drain_timeout: Seconds,
    ) -> None:
        running = asyncio.run_coroutine_threadsafe(
            _run_in_threads(
                self._client,
                queue,
                reconcile,
                concurrency=concurrency,
                include_object=include_object,
                stop=stop,
                lease_ttl=lease_ttl,
                drain_timeout=drain_timeout,
            ),
            self._loop,
        )
        try:
            running.result()
        except KeyboardInterrupt:
            logger.info("interrupted: stopping (again to stop at once)")
            stop.set()
            try:
                running.result()
            except KeyboardInterrupt:
                running.cancel()
                raise


@contextlib.contextmanager
def _stop_on_sigterm(stop: threading.Event) -> Iterator[None]:
    """Sets ``stop`` on SIGTERM while the block runs, when in the main thread
    (only it may install signal handlers); restores the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        logger.info("SIGTERM: stopping (finishing running reconciles, handing back the rest)")
        stop.set()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SyncQueue:
    """The blocking face of ``Queue``: one queue's calls without its name."""

    def __init__(self, client: SyncClient, name: str, *, priority: int | None = None, reason: str = "") -> None:
        self._client = client
        #: The queue's name.
        self.name = name
        self.priority = priority
        self.reason = reason

    def __repr__(self) -> str:
        return f"SyncQueue({self.name!r})"

    def add(self, *keys: str, priority: int | None = None, reason: str | None = None) -> None:
        self._client.add(self.name, *keys, priority=self._priority(priority), reason=self._reason(reason))

    def add_after(self, *keys: str, delay: Seconds, priority: int | None = None, reason: str | None = None) -> None:
        self._client.add_after(
            self.name, *keys, delay=delay, priority=self._priority(priority), reason=self._reason(reason)
        )

    def add_rate_limited(
        self, *keys: str, priority: int | None = None, reason: str | None = None
    ) -> builtins.list[RateLimitedKey]:
        return self._client.add_rate_limited(
            self.name, *keys, priority=self._priority(priority), reason=self._reason(reason)
        )

    def forget(self, key: str) -> None:
        self._client.forget(self.name, key)

    def num_requeues(self, key: str) -> int:
        return self._client.num_requeues(self.name, key)

    def len(self) -> QueueLength:
        return self._client.len(self.name)

    def key_state(self, key: str) -> KeyInfo:
        return self._client.key_state(self.name, key)

    def shut_down(self, *, drain: bool = False, drain_timeout: Seconds | None = None) -> DrainReport:
        return self._client.shut_down(self.name, drain=drain, drain_timeout=drain_timeout)

    def get(
        self, *, max_keys: int = 1, wait: Seconds = 0, lease_ttl: Seconds | None = None, include_object: bool = False
    ) -> builtins.list[Lease]:
        return self._client.get(
            self.name, max_keys=max_keys, wait=wait, lease_ttl=lease_ttl, include_object=include_object
        )

    def run(
        self,
        reconcile: SyncReconcile,
        *,
        concurrency: int = 1,
        include_object: bool = False,
        stop: threading.Event | None = None,
        lease_ttl: Seconds | None = None,
        drain_timeout: Seconds = 30.0,
    ) -> None:
        """Like ``SyncClient.run`` for this queue."""
        self._client.run(
            self.name,
            reconcile,
            concurrency=concurrency,
            include_object=include_object,
            stop=stop,
            lease_ttl=lease_ttl,
            drain_timeout=drain_timeout,
        )

    def _priority(self, priority: int | None) -> int | None:
        return self.priority if priority is None else priority

    def _reason(self, reason: str | None) -> str:
        return self.reason if reason is None else reason


class SyncCache:
    """The blocking face of ``Cache``."""

    def __init__(self, cache: Cache, call: Callable[[Coroutine[Any, Any, Any]], Any]) -> None:
        self._cache = cache
        self._call = call

    def get(
        self, informer: str, namespace: str, name: str, *, min_resource_version: str = "", wait: Seconds | None = None
    ) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self._call(
            self._cache.get(informer, namespace, name, min_resource_version=min_resource_version, wait=wait)
        )
        return found

    def get_object(
        self,
        informer: str,
        namespace: str,
        name: str,
        *,
        min_resource_version: str = "",
        wait: Seconds | None = None,
        include_deleted: bool = False,
    ) -> CachedObject | None:
        found: CachedObject | None = self._call(
            self._cache.get_object(
                informer,
                namespace,
                name,
                min_resource_version=min_resource_version,
                wait=wait,
                include_deleted=include_deleted,
            )
        )
        return found

    def list(
        self,
        informer: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        index: tuple[str, str] | None = None,
        min_resource_version: str = "",
        wait: Seconds | None = None,
        page_size: int = 0,
    ) -> builtins.list[dict[str, Any]]:
        found: builtins.list[dict[str, Any]] = self._call(
            self._cache.list(
                informer,
                namespace=namespace,
                label_selector=label_selector,
                index=index,
                min_resource_version=min_resource_version,
                wait=wait,
                page_size=page_size,
            )
        )
        return found


def run_sync(
    target: str,
    queue: str,
    reconcile: SyncReconcile,
    *,
    concurrency: int = 1,
    include_object: bool = False,
    stop: threading.Event | None = None,
    worker_name: str | None = None,
    lease_ttl: Seconds | None = None,
    drain_timeout: Seconds = 30.0,
    credentials: grpc.ChannelCredentials | None = None,
) -> None:
    """Connects to ``target`` (TLS with ``credentials``) and runs ``reconcile`` for
    ``queue`` until ``stop`` is set."""
    with SyncClient.connect(target, worker_name=worker_name, credentials=credentials) as client:
        client.run(
            queue,
            reconcile,
            concurrency=concurrency,
            include_object=include_object,
            stop=stop,
            lease_ttl=lease_ttl,
            drain_timeout=drain_timeout,
        )


async def _connect(target: str, worker_name: str | None, credentials: grpc.ChannelCredentials | None) -> Client:
    # The channel must be made inside the loop that will use it.
    return Client.connect(target, worker_name=worker_name, credentials=credentials)


async def _run_in_threads(
    client: Client,
    queue: str,
    reconcile: SyncReconcile,
    *,
    concurrency: int,
    include_object: bool,
    stop: threading.Event,
    lease_ttl: Seconds | None,
    drain_timeout: Seconds,
) -> None:
    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()

    async def watch_stop() -> None:
        while not stop.is_set():
            await asyncio.sleep(STOP_POLL_INTERVAL)
        stopped.set()

    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"reconcile-{queue}") as pool:

        def sync_call(coroutine: Coroutine[Any, Any, Any]) -> Any:
            # From a reconcile thread onto the client's loop, and back.
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

        async def in_thread(request: Request) -> Result | None:
            # The same request (its cancellation and deadline shared), writing
            # without await from the thread.
            objects = None if request._objects is None else SyncObjects(request._objects, sync_call)
            fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request) if f.init}
            sync_request = SyncRequest(**{**fields, "_objects": objects})
            call = loop.run_in_executor(pool, reconcile, sync_request)
            try:
                return await asyncio.shield(call)
            except asyncio.CancelledError:
                # A thread cannot be interrupted: request.cancelled() is now True,
                # and the lease stays held (and extended) until the function
                # returns; what it returns or raises is the outcome.
                result = await call
                task = asyncio.current_task()
                if task is not None:
                    task.uncancel()
                return result

        watcher = asyncio.create_task(watch_stop())
        try:
            await client.run(
                queue,
                in_thread,
                concurrency=concurrency,
                include_object=include_object,
                stop=stopped,
                lease_ttl=lease_ttl,
                drain_timeout=drain_timeout,
            )
        finally:
            watcher.cancel()
