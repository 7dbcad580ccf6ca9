"""The worker loop behind Client.run: one Work stream, each lease reconciled as a task.

A ``Worker`` keeps one stream open (reopening it with backoff when it breaks);
a ``_Stream`` is one such stream. Its reader task dispatches what the sidecar
sends, its writer task is the only one that writes (gRPC allows one write at a
time), and each lease gets a task that runs the reconcile, extends the lease
while it runs, and sends the Finish.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from dataclasses import dataclass, field
from typing import Any

import grpc

from ._wire import Seconds, from_duration, from_timestamp, seconds, to_duration
from .errors import from_rpc_error
from .lease import Lease
from .objects import Objects
from .request import Request, Result
from .v1 import workqueue_pb2 as pb

logger = logging.getLogger(__name__)

#: What Client.run calls for each key.
Reconcile = Callable[[Request], Awaitable[Result | None]]

#: First and longest wait before reopening a broken stream; doubles between.
RECONNECT_INITIAL = 0.1
RECONNECT_MAX = 10.0
#: A lease is extended after this fraction of the stream's lease ttl, so two
#: extends can be lost or late before it expires.
EXTEND_FRACTION = 1 / 3
#: How long the sidecar gets to end the stream after the worker half-closed.
CLOSE_TIMEOUT = 5.0
#: How long cancelled reconciles get to unwind before the stream moves on.
UNWIND_TIMEOUT = 5.0
#: Status codes of a Work stream that reconnecting cannot fix: run() raises them.
FATAL_CODES = frozenset(
    {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED}
)


class _StreamBroken(Exception):
    """The stream ended without the worker asking; reopen it."""


@dataclass
class _Held:
    """A lease this stream is working on."""

    request: Request
    #: When the lease ends by this process's monotonic clock (loop.time()),
    #: unless an extension moves it: past it, the worker stops on the key,
    #: because the sidecar may already have handed it to another worker.
    deadline: float = 0.0
    #: The reconcile's task, once started.
    task: asyncio.Task[Result | None] | None = None
    #: Why the lease ended on the sidecar's side (revoked, extend refused): the
    #: reconcile is cancelled and no Finish is sent.
    lost: str | None = None
    #: Why the sidecar asked the worker to stop: the reconcile is cancelled and
    #: the lease finished with a retry.
    cancel: str | None = None
    #: The worker is stopping and gave up waiting: no Finish, the key goes back
    #: to the queue when the stream closes.
    abandoned: bool = False

    def interrupt(self) -> None:
        self.request._cancelled.set()
        if self.task is not None:
            self.task.cancel()

    def set_deadline(self, sidecar: datetime | None, ttl: float) -> None:
        """The lease ends at the sidecar's deadline, never later than now + ttl."""
        now = asyncio.get_running_loop().time()
        left = ttl
        if sidecar is not None:
            left = min(left, (sidecar - datetime.now(UTC)).total_seconds())
        self.deadline = now + left
        self.request._deadline.monotonic = self.deadline

    def expired(self) -> bool:
        return asyncio.get_running_loop().time() >= self.deadline


@dataclass
class Worker:
    """Runs ``reconcile`` for keys of one queue until ``stop`` is set."""

    stub: Any
    queue: str
    reconcile: Reconcile
    concurrency: int
    include_object: bool
    worker_name: str
    lease_ttl: Seconds | None
    drain_timeout: Seconds
    stop: asyncio.Event
    #: The client's writes, bound to each lease in its Request.
    objects: Objects | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        seconds(self.drain_timeout)
        call = getattr(self.reconcile, "__call__", None)
        if not (inspect.iscoroutinefunction(self.reconcile) or inspect.iscoroutinefunction(call)):
            raise TypeError(
                f"reconcile must be an async function, got {self.reconcile!r}; "
                "run plain functions with SyncClient.run or run_sync"
            )

    async def run(self) -> None:
        delay = RECONNECT_INITIAL
        while not self.stop.is_set():
            stream = _Stream(self)
            try:
                await stream.serve()
                return
            except _StreamBroken as broken:
                if stream.worked:
                    delay = RECONNECT_INITIAL
                wait = delay * random.uniform(0.5, 1.0)
                logger.warning("work stream of queue %r broke: %s; reopening in %.2fs", self.queue, broken, wait)
            try:
                await asyncio.wait_for(self.stop.wait(), wait)
                return
            except TimeoutError:
                delay = min(delay * 2, RECONNECT_MAX)


@dataclass
class _Stream:
    """One Work stream: Open, leases in, extends and finishes out, half-close at the end."""

    worker: Worker
    #: True once the stream has handed out a lease: a stream that breaks after
    #: that is reopened after the shortest wait, one that breaks before backs
    #: off further (a shut-down queue opens streams and ends them at once).
    worked: bool = False
    #: Messages for the writer task; None half-closes. Unbounded, but each held
    #: lease puts at most one extend per interval and one finish, so it stays
    #: within a few messages per credit.
    outbox: asyncio.Queue[pb.WorkRequest | None] = field(default_factory=asyncio.Queue)
    held: dict[int, _Held] = field(default_factory=dict)
    #: The per-lease tasks (reconcile, extend, finish).
    processes: set[asyncio.Task[None]] = field(default_factory=set)
    #: How often held leases are extended; set from Opened.lease_ttl.
    extend_every: float | None = None
    #: Tokens of lost leases whose Finish was sent: the sidecar's refusal of
    #: them is expected, not worth a warning.
    lost_finishes: set[int] = field(default_factory=set)
    stopping: bool = False
    half_closed: bool = False
    call: Any = None
    reader: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        """Runs the stream until the worker stopped cleanly; raises _StreamBroken to reconnect."""
        w = self.worker
        self.call = w.stub.Work()
        open_ = pb.WorkRequest.Open(
            queue=w.queue,
            worker=w.worker_name,
            credits=w.concurrency,
            lease_ttl=None if w.lease_ttl is None else to_duration(w.lease_ttl),
            include_object=w.include_object,
        )
        self.outbox.put_nowait(pb.WorkRequest(open=open_))
        writer = asyncio.create_task(self._write(), name=f"workqueue {w.queue}: writer")
        self.reader = reader = asyncio.create_task(self._read(), name=f"workqueue {w.queue}: reader")
        stopper = asyncio.create_task(self._stop_when_asked(), name=f"workqueue {w.queue}: stopper")
        try:
            await asyncio.wait({reader})
            if reader.cancelled():
                logger.warning("the sidecar did not end the stream within %ss of the half-close", CLOSE_TIMEOUT)
                return
            reader.result()
        finally:
            for held in self.held.values():
                held.interrupt()
            for task in (stopper, reader, *self.processes):
                task.cancel()
            self.call.cancel()
            writer.cancel()
            await asyncio.gather(writer, stopper, reader, *self.processes, return_exceptions=True)

    def send(self, message: pb.WorkRequest) -> None:
        self.outbox.put_nowait(message)

    async def _write(self) -> None:
        try:
            while (message := await self.outbox.get()) is not None:
                await self.call.write(message)
            self.half_closed = True
            await self.call.done_writing()
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as err:
            # The call ended; the reader hears why and decides what follows.
            logger.debug("work stream write failed: %s", err)

    async def _read(self) -> None:
        while True:
            try:
                message = await self.call.read()
            except grpc.aio.AioRpcError as err:
                if err.code() in FATAL_CODES:
                    raise from_rpc_error(err) from err
                if self.half_closed:
                    logger.debug("work stream ended after half-close: %s", err.code().name)
                    return
                raise _StreamBroken(f"{err.code().name}: {err.details()}") from err
            if message is grpc.aio.EOF:
                if self.half_closed:
                    return
                raise _StreamBroken("the sidecar ended the stream")
            self._dispatch(message)

    def _dispatch(self, message: pb.WorkResponse) -> None:
        kind = message.WhichOneof("kind")
        if kind == "opened":
            self._on_opened(message.opened)
        elif kind == "lease":
            self._on_lease(Lease.from_proto(message.lease))
        elif kind == "finish_ack":
            ack = message.finish_ack
            if ack.token in self.lost_finishes:
                self.lost_finishes.discard(ack.token)  # the refusal expected for a lost lease
            elif ack.code:
                logger.warning("finish of %r refused by the sidecar (code %d): %s", ack.key, ack.code, ack.message)
        elif kind == "extended":
            self._on_extended(message.extended)
        elif kind == "cancel":
            cancel = message.cancel
            held = self.held.get(cancel.token)
            if held is None:
                return
            if cancel.revoked:
                self._lose(held, cancel.message or "the sidecar revoked the lease")
            else:
                self._cancel(held, cancel.message or "the sidecar asked to stop")
        else:
            logger.debug("ignoring a work response this client does not know: %s", kind)

    def _on_opened(self, opened: pb.WorkResponse.Opened) -> None:
        ttl = from_duration(opened.lease_ttl).total_seconds()
        self.extend_every = ttl * EXTEND_FRACTION if ttl > 0 else None
        w = self.worker
        if opened.credits < w.concurrency:
            logger.warning(
                "the sidecar caps the window at %d leases; concurrency %d is not reached",
                opened.credits,
                w.concurrency,
            )
        logger.info(
            "working on queue %r as %r: %d at a time, leases of %.3gs", w.queue, w.worker_name, opened.credits, ttl
        )

    def _on_lease(self, lease: Lease) -> None:
        self.worked = True
        if self.stopping:
            logger.debug("stopping: %r goes back to the queue at half-close", lease.key)
            return
        held = _Held(Request.from_lease(self.worker.queue, lease, self.worker.objects))
        held.set_deadline(lease.deadline, lease.ttl.total_seconds())
        self.held[lease.token] = held
        if self.extend_every is None and lease.ttl.total_seconds() > 0:
            self.extend_every = lease.ttl.total_seconds() * EXTEND_FRACTION
        task = asyncio.create_task(self._process(held), name=f"workqueue {self.worker.queue}: {lease.key}")
        self.processes.add(task)
        task.add_done_callback(self.processes.discard)

    def _on_extended(self, extended: pb.WorkResponse.Extended) -> None:
        held = self.held.get(extended.token)
        if held is None:
            return  # finished meanwhile
        if extended.code:
            self._lose(held, f"extend refused (code {extended.code}): {extended.message}")
            return
        sidecar_deadline = from_timestamp(extended.deadline, extended.HasField("deadline"))
        held.set_deadline(sidecar_deadline, from_duration(extended.ttl).total_seconds())
        if extended.cancel:
            self._cancel(held, "the sidecar asked to stop (queue shutting down or leadership lost)")

    def _lose(self, held: _Held, why: str) -> None:
        if held.lost is None:
            logger.warning("lease on %r lost: %s; cancelling its reconcile", held.request.key, why)
            held.lost = why
            held.interrupt()

    def _cancel(self, held: _Held, why: str) -> None:
        if held.cancel is None and held.lost is None:
            logger.info("cancelling the reconcile of %r: %s", held.request.key, why)
            held.cancel = why
            held.interrupt()

    async def _process(self, held: _Held) -> None:
        request = held.request
        if held.expired():
            # It expired before it could start (read late: this process was
            # stopped, say): another worker may hold the key by now.
            self._lose(held, "the lease expired before its reconcile could start")
            self.held.pop(request.token, None)
            self.send(pb.WorkRequest(finish=self._lost_finish(held)))
            return
        task = held.task = asyncio.create_task(self._reconcile(request))
        try:
            loop = asyncio.get_running_loop()
            while not task.done():
                if held.lost is not None or held.abandoned:
                    # Not ours to extend any more: wait for the reconcile to unwind.
                    await asyncio.wait({task}, timeout=self.extend_every or 1.0)
                    continue
                left = held.deadline - loop.time()
                wait = left if self.extend_every is None else min(self.extend_every, left)
                await asyncio.wait({task}, timeout=max(wait, 0.0))
                if task.done() or held.lost is not None or held.abandoned:
                    continue
                if loop.time() >= held.deadline:
                    # No extension arrived in time (the sidecar froze or is
                    # unreachable): the key may be someone else's by now.
                    self._lose(held, "the lease deadline passed without an extension")
                    continue
                self.send(pb.WorkRequest(extend=pb.WorkRequest.Extend(key=request.key, token=request.token)))
        except asyncio.CancelledError:
            # The stream is going away, and its leases with it.
            held.interrupt()
            await asyncio.wait({task}, timeout=UNWIND_TIMEOUT)
            raise
        finally:
            self.held.pop(request.token, None)
        finish = self._outcome(held, task)
        if finish is not None:
            self.send(pb.WorkRequest(finish=finish))

    async def _reconcile(self, request: Request) -> Result | None:
        return await self.worker.reconcile(request)

    def _outcome(self, held: _Held, task: asyncio.Task[Result | None]) -> pb.WorkRequest.Finish | None:
        """The Finish for a reconcile that ended (a lost lease gets one too, refused by the sidecar,
        which gives its credit back), or None when the worker gave up on it while stopping."""
        key = held.request.key
        if held.lost is None and not task.cancelled() and held.expired():
            # Returned after the deadline, before the worker could cancel it.
            self._lose(held, "the reconcile returned after the lease deadline; result discarded")
        if held.lost is not None:
            return self._lost_finish(held)
        if held.abandoned:
            logger.warning("stopping: %r was not finished in time and goes back to the queue", key)
            return None
        finish = pb.WorkRequest.Finish(key=key, token=held.request.token)
        if task.cancelled():
            finish.retry.error = f"cancelled: {held.cancel or 'the reconcile was cancelled'}"
            return finish
        error = task.exception()
        if error is not None:
            logger.error("reconcile of %r failed: %s", key, error, exc_info=error)
            finish.retry.error = str(error) or type(error).__name__
            return finish
        result = task.result()
        if result is not None and not isinstance(result, Result):
            logger.error("reconcile of %r returned %r, not a Result or None", key, result)
            finish.retry.error = f"reconcile returned {type(result).__name__}, not a Result or None"
        elif result is not None and result.requeue_after is not None:
            logger.debug("reconciled %r; again in %ss", key, seconds(result.requeue_after))
            finish.requeue_after.delay.CopyFrom(to_duration(result.requeue_after))
        else:
            logger.debug("reconciled %r", key)
            finish.success.SetInParent()
        return finish

    def _lost_finish(self, held: _Held) -> pb.WorkRequest.Finish:
        """The Finish of a lease that ended without this worker: the sidecar
        refuses it (FAILED_PRECONDITION, nothing changes) and gives the lease's
        credit back. Every lease gets exactly one Finish, so the sidecar can
        tell a worker that stopped reading from one that heard."""
        self.lost_finishes.add(held.request.token)
        finish = pb.WorkRequest.Finish(key=held.request.key, token=held.request.token)
        finish.retry.error = f"lease lost: {held.lost}"
        return finish

    async def _stop_when_asked(self) -> None:
        w = self.worker
        await w.stop.wait()
        self.stopping = True
        running = set(self.processes)
        if running:
            logger.info("stopping: waiting up to %ss for %d reconciles", seconds(w.drain_timeout), len(running))
            _, pending = await asyncio.wait(running, timeout=seconds(w.drain_timeout))
            if pending:
                for held in self.held.values():
                    held.abandoned = True
                    held.interrupt()
                await asyncio.wait(pending, timeout=UNWIND_TIMEOUT)
        self.send_half_close()
        await asyncio.sleep(CLOSE_TIMEOUT)
        if self.reader is not None:
            self.reader.cancel()

    def send_half_close(self) -> None:
        self.outbox.put_nowait(None)

