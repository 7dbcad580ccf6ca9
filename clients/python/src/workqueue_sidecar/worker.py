"""The worker loop behind Client.run: one Work stream, a fixed pool of tasks running the reconciles.

A ``Worker`` keeps one stream open (reopening it with backoff when it breaks);
a ``_Stream`` is one such stream. Per stream, not per lease: its reader task
dispatches what the sidecar sends; its writer task is the only one that
writes (gRPC allows one write at a time); ``concurrency`` worker tasks take
leases from one queue and run the reconciles; and one timer handle (the
stream's tick) sends the extends of every held lease and cancels the
reconcile of a lease whose deadline passed unextended.

One key never runs twice at once in a ``Worker`` (one ``Client.run``, across
its streams): a lease for a key whose earlier reconcile still runs (its lease
lost, its cancellation ignored, or a ``SyncClient.run`` thread) waits for it
in its pool task, extended meanwhile, before it starts (see ``Worker.reconciling``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from dataclasses import dataclass, field
from typing import Any

import grpc

from ._lost_finishes import LostFinishes
from ._wire import Seconds, from_duration, from_timestamp, seconds, to_duration
from .errors import LeaseEndedDuringWriteError, from_rpc_error
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
#: How long the reconciles of a stream going away (broken, or its run task
#: cancelled) get to unwind before the stream moves on; its leases are gone.
UNWIND_TIMEOUT = 5.0
#: Status codes of a Work stream that reconnecting cannot fix: run() raises them.
FATAL_CODES = frozenset(
    {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNIMPLEMENTED}
)


class _StreamBroken(Exception):
    """The stream ended without the worker asking; reopen it."""


def _lease_ended_during_write(error: BaseException | None) -> bool:
    """Whether a reconcile's exception is a ``LeaseEndedDuringWriteError``, or was
    raised ``from`` one (``raise ... from err``, however deep)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, LeaseEndedDuringWriteError):
            return True
        seen.add(id(error))
        error = error.__cause__
    return False


class _Held:
    """A lease this stream is working on."""

    __slots__ = (
        "request",
        "deadline",
        "next_extend",
        "runner",
        "waiting",
        "interrupted",
        "lost",
        "cancel",
        "cancelled_by_stop",
    )

    def __init__(self, request: Request) -> None:
        self.request = request
        #: When the lease ends by this process's monotonic clock (loop.time()),
        #: unless an extension moves it: past it, the worker stops on the key,
        #: because the sidecar may already have handed it to another worker.
        self.deadline = 0.0
        #: When the stream's tick sends this lease's next Extend (loop.time()).
        self.next_extend = float("inf")
        #: The pool task running the reconcile, while it runs, or while it
        #: waits for an earlier reconcile of the key to return.
        self.runner: asyncio.Task[None] | None = None
        #: Its pool task waits for an earlier reconcile of the key to return.
        self.waiting = False
        #: The runner was cancelled for this lease (once: it is uncancelled once).
        self.interrupted = False
        #: Why the lease ended on the sidecar's side (revoked, extend refused): the
        #: reconcile is cancelled and no Finish is sent.
        self.lost: str | None = None
        #: Why the sidecar asked the worker to stop: the reconcile is cancelled and
        #: the lease finished with a retry.
        self.cancel: str | None = None
        #: The worker's stop cancelled the reconcile at its drain timeout; its
        #: lease is still extended while it runs. Ended by that cancellation it
        #: gets no Finish: the key goes back to the queue at the half-close,
        #: counting no failure. One that returns anyway (a thread cannot be
        #: interrupted) has its outcome sent.
        self.cancelled_by_stop = False

    def interrupt(self) -> None:
        self.request._cancelled.set()
        if self.runner is not None and not self.interrupted:
            self.interrupted = True
            self.runner.cancel()

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
    #: Pool tasks of broken streams whose reconciles ignored their
    #: cancellation and still run: each takes a slot of ``concurrency`` until
    #: it ends, so a reopened stream never runs more than that at once.
    leftover: set[asyncio.Task[None]] = field(default_factory=set)
    #: The stream now open, which gets a leftover's slot back when it ends.
    current: _Stream | None = None
    #: The keys whose reconcile runs in this worker (on any of its streams,
    #: a broken one's leftovers too), each with an event set when it returns.
    #: A lease for a key whose earlier reconcile still runs (its lease lost,
    #: its cancellation ignored) waits for it: one key never runs twice at
    #: once here.
    reconciling: dict[str, asyncio.Event] = field(default_factory=dict)

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

    def keep_leftovers(self, tasks: set[asyncio.Task[None]]) -> None:
        """Counts ``tasks`` (still running after their stream broke) against the slots
        until each ends; then its slot goes to the stream open at that time."""
        for task in tasks:
            self.leftover.add(task)
            task.add_done_callback(self._leftover_done)

    def release(self, key: str) -> None:
        """Ends the claim on ``key`` that _Stream._claim made: its reconcile returned."""
        ended = self.reconciling.pop(key, None)
        if ended is not None:
            ended.set()

    def _leftover_done(self, task: asyncio.Task[None]) -> None:
        self.leftover.discard(task)
        if self.current is not None:
            self.current.grow()

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
    #: lease puts at most one extend per tick and one finish, so it stays
    #: within a few messages per credit.
    outbox: asyncio.Queue[pb.WorkRequest | None] = field(default_factory=asyncio.Queue)
    #: Leases for the pool, in arrival order. Unbounded, but the sidecar sends
    #: no more leases than the stream's credits, one per pool task.
    ready: asyncio.Queue[_Held] = field(default_factory=asyncio.Queue)
    held: dict[int, _Held] = field(default_factory=dict)
    #: The pool: ``concurrency`` tasks, each running one reconcile at a time.
    pool: list[asyncio.Task[None]] = field(default_factory=list)
    #: Reconciles running now, and what a graceful stop waits on to reach none.
    running: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    #: How often held leases are extended; set from Opened.lease_ttl.
    extend_every: float | None = None
    #: The stream's one timer (see _tick) and when it fires (loop.time()).
    tick: asyncio.TimerHandle | None = None
    tick_at: float = float("inf")
    #: Tokens of lost leases whose Finish was sent: the sidecar's refusal of
    #: them is expected, not worth a warning (see LostFinishes).
    lost_finishes: LostFinishes = field(default_factory=LostFinishes)
    stopping: bool = False
    #: The stream is going away: a cancelled pool task ends instead of moving on.
    closing: bool = False
    half_closed: bool = False
    call: Any = None
    reader: asyncio.Task[None] | None = None

    async def serve(self) -> None:
        """Runs the stream until the worker stopped cleanly; raises _StreamBroken to reconnect."""
        w = self.worker
        self.call = w.stub.Work()
        # Reconciles of a broken stream that still run keep their slots.
        slots = max(0, w.concurrency - len(w.leftover))
        if slots < w.concurrency:
            logger.warning(
                "%d reconciles of the broken stream still run (they ignored their cancellation); "
                "reopening with %d of %d slots until they end",
                w.concurrency - slots,
                slots,
                w.concurrency,
            )
        open_ = pb.WorkRequest.Open(
            queue=w.queue,
            worker=w.worker_name,
            credits=slots,
            lease_ttl=None if w.lease_ttl is None else to_duration(w.lease_ttl),
            include_object=w.include_object,
            # Nothing waits on a Finish's answer: a refusal is only logged
            # (_dispatch). So the sidecar answers only those, one message less
            # per lease; a sidecar older than the field answers them all.
            ack_failures_only=True,
        )
        self.outbox.put_nowait(pb.WorkRequest(open=open_))
        writer = asyncio.create_task(self._write(), name=f"workqueue {w.queue}: writer")
        self.reader = reader = asyncio.create_task(self._read(), name=f"workqueue {w.queue}: reader")
        stopper = asyncio.create_task(self._stop_when_asked(), name=f"workqueue {w.queue}: stopper")
        self.pool = [
            asyncio.create_task(self._work(), name=f"workqueue {w.queue}: worker {i}") for i in range(slots)
        ]
        w.current = self
        try:
            await asyncio.wait({reader})
            if reader.cancelled():
                logger.warning("the sidecar did not end the stream within %ss of the half-close", CLOSE_TIMEOUT)
                return
            reader.result()
        finally:
            self.closing = True
            if w.current is self:
                w.current = None
            if self.tick is not None:
                self.tick.cancel()
            for held in self.held.values():
                held.interrupt()
            for task in (stopper, reader, *self.pool):
                task.cancel()
            self.call.cancel()
            writer.cancel()
            # A reconcile gets UNWIND_TIMEOUT to unwind; one that ignores its
            # cancellation is left running, holding its slot, and the stream
            # moves on.
            _, still_running = await asyncio.wait(self.pool, timeout=UNWIND_TIMEOUT)
            w.keep_leftovers(still_running)
            await asyncio.gather(writer, stopper, reader, return_exceptions=True)

    def grow(self) -> None:
        """A slot came back (a broken stream's reconcile ended): one more pool task, one more credit."""
        if self.closing or self.stopping:
            return
        self.pool.append(asyncio.create_task(self._work(), name=f"workqueue {self.worker.queue}: worker"))
        self.send(pb.WorkRequest(credit=pb.WorkRequest.Credit(credits=1)))

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
        if kind == "lease":
            self._on_lease(message.lease)
        elif kind == "finish_ack":
            ack = message.finish_ack
            if self.lost_finishes.answered(ack.token):
                pass  # the refusal expected for a lost lease
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
        elif kind == "opened":
            self._on_opened(message.opened)
        else:
            logger.debug("ignoring a work response this client does not know: %s", kind)

    def _on_opened(self, opened: pb.WorkResponse.Opened) -> None:
        ttl = from_duration(opened.lease_ttl).total_seconds()
        self.extend_every = ttl * EXTEND_FRACTION if ttl > 0 else None
        w = self.worker
        if opened.credits < len(self.pool):
            logger.warning(
                "the sidecar caps the window at %d leases; concurrency %d is not reached",
                opened.credits,
                w.concurrency,
            )
        logger.info(
            "working on queue %r as %r: %d at a time, leases of %.3gs, %s",
            w.queue,
            w.worker_name,
            opened.credits,
            ttl,
            "only failed finishes answered" if opened.ack_failures_only else "every finish answered",
        )

    def _on_lease(self, lease: pb.Lease) -> None:
        self.worked = True
        if self.stopping:
            logger.debug("stopping: %r goes back to the queue at half-close", lease.key)
            return
        ttl = lease.ttl.seconds + lease.ttl.nanos * 1e-9
        if self.extend_every is None and ttl > 0:
            self.extend_every = ttl * EXTEND_FRACTION
        held = _Held(Request._from_proto(self.worker.queue, lease, self.worker.objects))
        now = asyncio.get_running_loop().time()
        left = ttl
        if lease.HasField("deadline"):
            deadline = lease.deadline
            left = min(ttl, deadline.seconds + deadline.nanos * 1e-9 - time.time())
        held.deadline = held.request._deadline.monotonic = now + left
        if self.extend_every is not None:
            held.next_extend = now + self.extend_every
        self.held[lease.token] = held
        self._wake_by(min(held.deadline, now + self._tick_every()))
        self.ready.put_nowait(held)

    def _on_extended(self, extended: pb.WorkResponse.Extended) -> None:
        self.lost_finishes.extend_answered()
        held = self.held.get(extended.token)
        if held is None:
            return  # finished meanwhile
        if extended.code:
            self._lose(held, f"extend refused (code {extended.code}): {extended.message}")
            return
        sidecar_deadline = from_timestamp(extended.deadline, extended.HasField("deadline"))
        held.set_deadline(sidecar_deadline, from_duration(extended.ttl).total_seconds())
        self._wake_by(held.deadline)
        if extended.cancel:
            self._cancel(held, "the sidecar asked to stop (queue shutting down or leadership lost)")

    def _wake_by(self, when: float) -> None:
        """Makes the stream's tick fire no later than ``when`` (loop.time())."""
        if when >= self.tick_at or self.closing:
            return
        if self.tick is not None:
            self.tick.cancel()
        self.tick_at = when
        self.tick = asyncio.get_running_loop().call_at(when, self._tick)

    def _tick_every(self) -> float:
        return self.extend_every / 2 if self.extend_every is not None else 1.0

    def _tick(self) -> None:
        """The stream's one timer, for every held lease: an Extend for each that
        arrived or was last extended ``extend_every`` ago (so one goes out every
        third to half of the TTL), and the reconcile of one whose deadline passed
        unextended (the sidecar froze or is unreachable, or this process was
        stopped) is cancelled, as the key may be someone else's by now. It then
        sleeps half of ``extend_every``, or until the earliest deadline sooner."""
        self.tick = None
        self.tick_at = float("inf")
        now = asyncio.get_running_loop().time()
        every = self.extend_every
        wake = now + self._tick_every()
        for held in self.held.values():
            if held.lost is not None:
                continue  # not ours to extend any more
            if now >= held.deadline:
                self._lose(held, "the lease deadline passed without an extension")
                continue
            if every is not None and now >= held.next_extend:
                held.next_extend = now + every
                request = held.request
                message = pb.WorkRequest()
                extend = message.extend
                extend.key = request.key
                extend.token = request.token
                self.lost_finishes.extend_sent()
                self.send(message)
            wake = min(wake, held.deadline)
        if self.held:
            self._wake_by(wake)

    def _lose(self, held: _Held, why: str) -> None:
        """Ends the lease without this worker: its reconcile is cancelled and its
        result will be discarded. It logs the loss, once, here: a worker often
        hears of one loss several times (the deadline passes, then the sidecar's
        Cancel or the reconcile's return), and one loss is one warning."""
        if held.lost is None:
            logger.warning(
                "lease on %r in queue %r lost (%s); its reconcile is cancelled and its result discarded",
                held.request.key,
                self.worker.queue,
                why,
            )
            held.lost = why
            held.interrupt()

    def _cancel(self, held: _Held, why: str) -> None:
        """A lease the sidecar asks back (a Cancel not revoked, an Extended with
        cancel): it stays valid and nothing went wrong, so it is logged at debug,
        one line per key: a sidecar that stops, or whose shard slots move to
        another replica (up to 4,096 at once), asks back every lease it holds."""
        if held.cancel is None and held.lost is None:
            logger.debug("cancelling the reconcile of %r: %s", held.request.key, why)
            held.cancel = why
            held.interrupt()

    async def _work(self) -> None:
        """One of the pool's tasks: takes leases from ``ready`` and reconciles them, one at a time."""
        me = asyncio.current_task()
        assert me is not None
        reconcile = self.worker.reconcile
        ready = self.ready
        while True:
            held = await ready.get()
            request = held.request
            if self.stopping:
                # Not started: the key goes back when the stream closes.
                self.held.pop(request.token, None)
                continue
            if not await self._claim(held, me):
                self.held.pop(request.token, None)
                if held.lost is not None or held.cancel is not None:
                    # Lost or cancelled before it started (before a task took
                    # it, or while it waited for the earlier reconcile of its
                    # key): it is not started.
                    finish = self._finish(held, None, None, cancelled=True)
                    if finish is not None:
                        self.send(finish)
                # Else the worker stops: not started, it goes back when the
                # stream closes.
                continue
            held.runner = me
            self.running += 1
            result: Result | None = None
            error: BaseException | None = None
            escaping: BaseException | None = None
            cancelled = False
            try:
                result = await reconcile(request)
            except asyncio.CancelledError:
                if self.closing:
                    raise  # the stream is going away, and its leases with it
                cancelled = True
            except Exception as err:
                error = err
            except BaseException as err:
                # Not an Exception (a library's own, SystemExit,
                # KeyboardInterrupt): still this lease's failure, answered as
                # one, or the lease would get no Finish and the worker would
                # lose its slot for good. Exits go on up once it is sent.
                error = err
                if isinstance(err, (SystemExit, KeyboardInterrupt)):
                    escaping = err
            finally:
                self.worker.release(request.key)
                held.runner = None
                self.running -= 1
                self.held.pop(request.token, None)
                if held.interrupted:
                    me.uncancel()  # this lease's cancellation, delivered or swallowed
                if self.stopping and self.running == 0:
                    self.idle.set()
            if self.closing:
                return
            finish = self._finish(held, result, error, cancelled)
            if finish is not None:
                self.send(finish)
            if escaping is not None:
                raise escaping

    async def _claim(self, held: _Held, me: asyncio.Task[None]) -> bool:
        """Claims the lease's key for its reconcile, first waiting for the earlier
        reconcile of the key in this worker to return, if one still runs (its lease
        lost, its cancellation ignored); the lease is extended meanwhile. False,
        nothing claimed, when the lease is lost or cancelled first, expired (read
        late: this process was stopped, say; another worker may hold the key by
        now), or the worker stops."""
        reconciling = self.worker.reconciling
        key = held.request.key
        logged = False
        while True:
            if held.lost is None and held.expired():
                self._lose(held, "the lease expired before its reconcile could start")
            if held.lost is not None or held.cancel is not None or self.stopping:
                return False
            earlier = reconciling.get(key)
            if earlier is None:
                reconciling[key] = asyncio.Event()
                return True
            if not logged:
                logged = True
                logger.info(
                    "waiting for the earlier reconcile of %r in queue %r to return "
                    "(its lease was lost, and it ignores its cancellation)",
                    key,
                    self.worker.queue,
                )
            # Lost, cancelled or stopped meanwhile, held.interrupt() cancels
            # this task: it wakes, and the lease is not started.
            held.runner = me
            held.waiting = True
            try:
                await earlier.wait()
            except asyncio.CancelledError:
                if self.closing or not held.interrupted:
                    raise  # the stream is going away, and its leases with it
                me.uncancel()  # this lease's cancellation
            finally:
                held.runner = None
                held.waiting = False

    def _finish(
        self, held: _Held, result: Result | None, error: BaseException | None, cancelled: bool
    ) -> pb.WorkRequest | None:
        """The Finish for a reconcile that ended (a lost lease gets one too, refused by the sidecar,
        which gives its credit back), or None when the worker's stop cancelled it."""
        request = held.request
        key = request.key
        if held.lost is None and not cancelled and held.expired():
            # Returned after the deadline, before the tick could cancel it: the
            # sidecar may have handed the key on already.
            self._lose(held, "its deadline passed without an extension")
        if held.lost is None and _lease_ended_during_write(error):
            # A write under the lease was made, but the sidecar ended the lease
            # before the API server answered (its Cancel may not be here yet):
            # the lease is lost. Its outcome is not sent (the sidecar would
            # refuse it as stale, a warning); the lost lease's Finish is.
            self._lose(held, "lease ended during write")
        message = pb.WorkRequest()
        finish = message.finish
        finish.key = key
        finish.token = request.token
        if held.lost is not None:
            if not cancelled:
                # It returned (or raised) all the same: its outcome would count
                # for a key that may be another worker's by now, so it is
                # dropped. The loss was logged as a warning when it happened.
                logger.debug(
                    "reconcile of %r in queue %r returned after its lease was lost (%s); result discarded",
                    key,
                    self.worker.queue,
                    held.lost,
                )
            # A lease that ended without this worker: the sidecar refuses its
            # Finish (FAILED_PRECONDITION, nothing changes) and gives the
            # lease's credit back. Every lease gets exactly one Finish, so the
            # sidecar can tell a worker that stopped reading from one that heard.
            self.lost_finishes.add(request.token)
            finish.retry.error = f"lease lost: {held.lost}"
            return message
        if cancelled and held.cancelled_by_stop:
            logger.warning("stopping: %r was not finished in time and goes back to the queue", key)
            return None
        if cancelled:
            finish.retry.error = f"cancelled: {held.cancel or 'the reconcile was cancelled'}"
        elif error is not None:
            logger.error("reconcile of %r failed: %s", key, error, exc_info=error)
            finish.retry.error = str(error) or type(error).__name__
        elif result is None:
            logger.debug("reconciled %r", key)
            finish.success.SetInParent()
        elif not isinstance(result, Result):
            logger.error("reconcile of %r returned %r, not a Result or None", key, result)
            finish.retry.error = f"reconcile returned {type(result).__name__}, not a Result or None"
        elif result.requeue_after is not None:
            logger.debug("reconciled %r; again in %ss", key, seconds(result.requeue_after))
            finish.requeue_after.delay.CopyFrom(to_duration(result.requeue_after))
        else:
            logger.debug("reconciled %r", key)
            finish.success.SetInParent()
        return message

    async def _stop_when_asked(self) -> None:
        w = self.worker
        await w.stop.wait()
        self.stopping = True
        for held in self.held.values():
            if held.waiting:
                held.interrupt()  # not started: it goes back at the half-close
        if self.running:
            logger.info("stopping: waiting up to %ss for %d reconciles", seconds(w.drain_timeout), self.running)
            self.idle.clear()
            try:
                await asyncio.wait_for(self.idle.wait(), seconds(w.drain_timeout))
            except TimeoutError:
                logger.warning(
                    "stopping: %d reconciles still run after %ss; cancelling them (their keys stay held until they end)",
                    self.running,
                    seconds(w.drain_timeout),
                )
                for held in self.held.values():
                    held.cancelled_by_stop = True
                    held.interrupt()
                # The half-close hands back every key the stream holds, and
                # another worker could take one whose reconcile still runs
                # here. So it waits for the last one, however long, its lease
                # extended meanwhile: one that ignores its cancellation, or a
                # SyncClient function (a thread cannot be interrupted).
                await self.idle.wait()
        self.send_half_close()
        await asyncio.sleep(CLOSE_TIMEOUT)
        if self.reader is not None:
            self.reader.cancel()

    def send_half_close(self) -> None:
        self.outbox.put_nowait(None)
