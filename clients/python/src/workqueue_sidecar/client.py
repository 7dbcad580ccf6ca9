"""The asyncio client: a channel to the sidecar, its queue calls, cache reads and the worker loop."""

from __future__ import annotations

import asyncio
import os
import socket
from types import TracebackType
from typing import Any, Self

import grpc

from ._wire import Seconds, from_duration, from_timestamp, seconds, to_duration
from .cache import Cache
from .errors import from_rpc_error
from .introspection import DrainReport, KeyInfo, QueueLength, RateLimitedKey
from .lease import Extension, Lease
from .objects import Objects
from .queue import Queue
from .request import Result
from .v1 import workqueue_pb2 as pb
from .v1 import workqueue_pb2_grpc
from .worker import Reconcile, Worker

#: The sidecar accepts and sends messages up to 16 MiB (a full batch of keys,
#: a page of cached objects); gRPC's default receive limit is 4 MiB.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


def default_worker_name() -> str:
    """``host/pid``: in a pod the host name is the pod's name."""
    return f"{socket.gethostname()}/{os.getpid()}"


class Client:
    """A connection to one sidecar.

    ``target`` is ``host:port`` (e.g. ``127.0.0.1:50051``) or ``unix:///path/to/socket``::

        async with Client.connect("unix:///var/run/wq/sock") as client:
            users = client.queue("users")
            await users.add("alice")
            await users.run(reconcile, concurrency=4, stop=stop)

    Queue calls raise the subclasses of ``WorkqueueError`` (``UnknownQueueError``,
    ``StaleLeaseError``, ``ShuttingDownError``, ...).
    """

    def __init__(self, channel: grpc.aio.Channel, *, worker_name: str | None = None) -> None:
        self._channel = channel
        self._stub: Any = workqueue_pb2_grpc.WorkQueueServiceStub(channel)
        #: Shown by key_state as the holder of this client's leases.
        self.worker_name = worker_name or default_worker_name()
        #: Reads from the sidecar's informer caches.
        self.cache = Cache(channel)
        #: Writes to Kubernetes through the sidecar, outside any lease (in a
        #: reconcile, write with ``req.objects`` instead).
        self.objects = Objects(channel)
        #: Workers running on this client, stopped by close(): each one's
        #: ``stop``, and an event set once its ``run`` has returned.
        #: Keyed by neither: runs may share one ``stop``.
        self._running: set[tuple[asyncio.Event, asyncio.Event]] = set()

    @classmethod
    def connect(
        cls,
        target: str,
        *,
        worker_name: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> Client:
        """A client for the sidecar at ``target``; the connection is made on first use.

        The connection is plaintext, as the sidecar serves loopback and a socket
        shared inside the pod, unless ``credentials`` are given: TLS, e.g. from
        ``tls_credentials(ca_file=...)`` (with ``cert_file``/``key_file`` for mTLS).
        """
        options: list[tuple[str, str | int]] = [
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
        if target.startswith("unix:"):
            # gRPC sends the socket's path as the :authority, which the sidecar's
            # HTTP/2 server refuses as malformed (RST_STREAM, PROTOCOL_ERROR).
            options.append(("grpc.default_authority", "localhost"))
        if credentials is not None:
            return cls(grpc.aio.secure_channel(target, credentials, options=options), worker_name=worker_name)
        return cls(grpc.aio.insecure_channel(target, options=options), worker_name=worker_name)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Stops this client's running workers as their ``stop`` would (running
        reconciles get their ``drain_timeout``, their results count), waits for
        them, then closes the channel; other calls still running are cancelled."""
        running = list(self._running)
        for stop, _ in running:
            stop.set()
        for _, returned in running:
            await returned.wait()
        await self._channel.close()

    async def wait_ready(self, timeout: Seconds | None = None) -> None:
        """Waits until the channel is connected (the sidecar is up); TimeoutError after ``timeout``."""
        limit = None if timeout is None else seconds(timeout)
        await asyncio.wait_for(self._channel.channel_ready(), limit)

    async def _unary(self, method: Any, request: Any) -> Any:
        try:
            return await method(request)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err) from err

    def queue(self, name: str, *, priority: int | None = None, reason: str = "") -> Queue:
        """A handle on the queue ``name``: ``await client.queue("users").add("alice")``.
        ``priority`` and ``reason`` become the defaults of its adds."""
        return Queue(self, name, priority=priority, reason=reason)

    # -- client-go's operations (also on the queue handle, without the name) ----

    async def add(self, queue: str, *keys: str, priority: int | None = None, reason: str = "") -> None:
        """Queues keys now (client-go Add). A queued key keeps the higher priority; a
        held key is marked dirty and queued again when its lease ends."""
        await self._unary(self._stub.Add, pb.AddRequest(queue=queue, keys=keys, priority=priority, reason=reason))

    async def add_after(
        self, queue: str, *keys: str, delay: Seconds, priority: int | None = None, reason: str = ""
    ) -> None:
        """Queues keys once ``delay`` (seconds or timedelta) has passed (client-go AddAfter)."""
        request = pb.AddAfterRequest(
            queue=queue, keys=keys, delay=to_duration(delay), priority=priority, reason=reason
        )
        await self._unary(self._stub.AddAfter, request)

    async def add_rate_limited(
        self, queue: str, *keys: str, priority: int | None = None, reason: str = ""
    ) -> list[RateLimitedKey]:
        """Counts a failure for each key and queues it after its backoff (client-go AddRateLimited)."""
        request = pb.AddRateLimitedRequest(queue=queue, keys=keys, priority=priority, reason=reason)
        response: pb.AddRateLimitedResponse = await self._unary(self._stub.AddRateLimited, request)
        return [RateLimitedKey.from_proto(k) for k in response.keys]

    async def forget(self, queue: str, key: str) -> None:
        """Clears a key's failure count (client-go Forget)."""
        await self._unary(self._stub.Forget, pb.ForgetRequest(queue=queue, key=key))

    async def num_requeues(self, queue: str, key: str) -> int:
        """How many times a key has failed since it was last forgotten (client-go NumRequeues)."""
        response: pb.NumRequeuesResponse = await self._unary(
            self._stub.NumRequeues, pb.NumRequeuesRequest(queue=queue, key=key)
        )
        return response.num_requeues

    async def len(self, queue: str) -> QueueLength:
        """The queue's counts: ready (client-go Len), waiting, held, dirty, ready per priority."""
        response: pb.LenResponse = await self._unary(self._stub.Len, pb.LenRequest(queue=queue))
        return QueueLength.from_proto(response)

    async def key_state(self, queue: str, key: str) -> KeyInfo:
        """Where one key is (absent, queued, waiting, held) with its failures and reasons."""
        response: pb.KeyStateResponse = await self._unary(
            self._stub.KeyState, pb.KeyStateRequest(queue=queue, key=key)
        )
        return KeyInfo.from_proto(response)

    async def shut_down(self, queue: str, *, drain: bool = False, drain_timeout: Seconds | None = None) -> DrainReport:
        """Stops the queue handing out keys (client-go ShutDown / ShutDownWithDrain)."""
        request = pb.ShutDownRequest(
            queue=queue, drain=drain, drain_timeout=None if drain_timeout is None else to_duration(drain_timeout)
        )
        response: pb.ShutDownResponse = await self._unary(self._stub.ShutDown, request)
        return DrainReport(response.finished, response.returned)

    # -- leases by hand (run() does all of this for you) ------------------------

    async def get(
        self,
        queue: str,
        *,
        max_keys: int = 1,
        wait: Seconds = 0,
        lease_ttl: Seconds | None = None,
        include_object: bool = False,
    ) -> list[Lease]:
        """Leases up to ``max_keys`` ready keys, waiting up to ``wait`` for one (client-go Get).
        An empty list means nothing became ready in time."""
        request = pb.GetRequest(
            queue=queue,
            worker=self.worker_name,
            max_keys=max_keys,
            wait=to_duration(wait),
            lease_ttl=None if lease_ttl is None else to_duration(lease_ttl),
            include_object=include_object,
        )
        response: pb.GetResponse = await self._unary(self._stub.Get, request)
        return [Lease.from_proto(lease) for lease in response.leases]

    async def done(self, queue: str, key: str, token: int) -> None:
        """Ends a lease without touching the failure count (client-go Done)."""
        await self._unary(self._stub.Done, pb.DoneRequest(queue=queue, key=key, token=token))

    async def finish(
        self, queue: str, key: str, token: int, result: Result | None = None, *, error: str | None = None
    ) -> None:
        """Ends a lease with an outcome: ``error`` given is a retry with backoff; otherwise
        ``result`` (None is success, ``Result(requeue_after=...)`` requeues)."""
        request = pb.FinishRequest(queue=queue, key=key, token=token)
        if error is not None:
            request.retry.error = error
        elif result is not None and result.requeue_after is not None:
            request.requeue_after.delay.CopyFrom(to_duration(result.requeue_after))
        else:
            request.success.SetInParent()
        await self._unary(self._stub.Finish, request)

    async def extend(self, queue: str, key: str, token: int, ttl: Seconds | None = None) -> Extension:
        """Moves a lease's deadline to now + ``ttl`` (the queue's default when None)."""
        request = pb.ExtendRequest(
            queue=queue, key=key, token=token, ttl=None if ttl is None else to_duration(ttl)
        )
        response: pb.ExtendResponse = await self._unary(self._stub.Extend, request)
        return Extension(
            deadline=from_timestamp(response.deadline, response.HasField("deadline")),
            ttl=from_duration(response.ttl),
            cancel=response.cancel,
        )

    # -- the worker loop ----------------------------------------------------------

    async def run(
        self,
        queue: str,
        reconcile: Reconcile,
        *,
        concurrency: int = 1,
        include_object: bool = False,
        stop: asyncio.Event | None = None,
        lease_ttl: Seconds | None = None,
        drain_timeout: Seconds = 30.0,
    ) -> None:
        """Reconciles keys of ``queue`` until ``stop`` is set (or this task is cancelled).

        Up to ``concurrency`` calls of ``await reconcile(request)`` run at once, each
        as its own task, over one Work stream. Returning None or ``Result()`` is
        success; ``Result(requeue_after=s)`` brings the key back after ``s``
        seconds; raising retries the key with backoff, ``str(exc)`` kept as its
        last error. Leases are extended while reconcile runs; its task is cancelled
        when the sidecar asks or the lease is lost. When ``stop`` is set no new
        reconcile starts, running ones get ``drain_timeout`` seconds to finish,
        then are cancelled; one that still runs keeps its lease (extended) and
        run waits for it, so its key is not handed to another worker meanwhile.
        Then keys still held go back to the queue. A broken stream is reopened with
        backoff. Raises ``UnknownQueueError`` (and other errors that retrying
        cannot fix) at once.
        """
        stop = stop or asyncio.Event()
        worker = Worker(
            self._stub,
            queue,
            reconcile,
            concurrency=concurrency,
            include_object=include_object,
            worker_name=self.worker_name,
            lease_ttl=lease_ttl,
            drain_timeout=drain_timeout,
            stop=stop,
            objects=self.objects,
        )
        entry = (stop, asyncio.Event())
        self._running.add(entry)
        try:
            await worker.run()
        finally:
            self._running.discard(entry)
            entry[1].set()
