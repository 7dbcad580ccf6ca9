"""What a reconcile function receives (Request) and returns (Result)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._wire import Seconds, from_timestamp, seconds
from .cached_object import CachedObject
from .lease import Lease
from .v1 import workqueue_pb2 as pb
from .objects import LeaseRef, Objects, controller_ref
from .reason import Reason


@dataclass(frozen=True)
class Request:
    """One key to reconcile, with why it was queued and, if asked for, its cached object."""

    #: The queue the key came from.
    queue: str
    #: ``namespace/name``, or ``name`` for a cluster-scoped object.
    key: str
    #: Why the key was queued, merged over every add since it was last handed out.
    reasons: tuple[Reason, ...] = ()
    #: Failures since the key was last forgotten.
    failures: int = 0
    #: The error text of the last failed attempt; empty when none.
    last_error: str = ""
    priority: int = 0
    #: When the key became ready for this round.
    enqueued_at: datetime | None = None
    #: The lease's fencing token (the worker finishes the lease; shown for logs).
    token: int = 0
    #: The key's object from the queue's primary informer when the worker runs
    #: with ``include_object=True`` and the queue has one; None otherwise.
    object: CachedObject | None = None
    #: The key's object is being deleted: it has a deletionTimestamp and
    #: finalizers hold it. Clean up, then let the finalizer go.
    deleting: bool = False
    #: When deleting, the object's metadata.deletionTimestamp.
    deletion_timestamp: datetime | None = None
    #: Writes under this request's lease; None for a Request built by hand.
    _objects: Any = field(default=None, repr=False, compare=False)
    _cancelled: CancelFlag = field(default_factory=lambda: CancelFlag(), repr=False, compare=False)
    _deadline: LeaseDeadline = field(default_factory=lambda: LeaseDeadline(), repr=False, compare=False)

    @property
    def namespace(self) -> str:
        """The namespace part of the key; empty for a cluster-scoped key."""
        namespace, _, _ = self.key.rpartition("/")
        return namespace

    @property
    def name(self) -> str:
        """The name part of the key."""
        return self.key.rpartition("/")[2]

    @property
    def lease(self) -> LeaseRef:
        """The lease this request came with (queue, key, token), as writes name it."""
        return LeaseRef(self.queue, self.key, self.token)

    @property
    def objects(self) -> Objects:
        """Writes under this request's lease: ``await req.objects.apply(obj)``.

        Each write names the lease, so the sidecar makes it only while the lease
        is current (``StaleLeaseError`` once it ended: another worker may hold
        the key now) and does not hand the key out again until its caches have
        seen the write, so the next reconcile reads it back. This is the way to
        write from a reconcile."""
        if self._objects is None:
            raise RuntimeError("this Request did not come from a worker, so it cannot write: use client.objects")
        objects: Objects = self._objects
        return objects

    def controller_ref(self) -> dict[str, Any]:
        """The controller ownerReference of this key's object (run with
        ``include_object=True``), for the children the reconcile makes: see
        ``controller_ref``. ValueError when the request carries no object."""
        if self.object is None:
            raise ValueError(f"{self.key}: the request carries no object (run with include_object=True)")
        return controller_ref(self.object.data)

    def cancelled(self) -> bool:
        """True once the worker has asked this reconcile to stop (the sidecar asked
        to cancel, the lease was lost, the worker is stopping). Async reconcilers
        are cancelled outright; synchronous ones should poll this."""
        return self._cancelled.is_set()

    def lease_valid(self) -> bool:
        """True while the lease holds: not cancelled, and its deadline (the
        sidecar's, moved by every extend) not passed by the clock. Past it
        another worker may hold the key: check before committing a side effect
        late in a long reconcile (a process stopped for a while resumes with
        its deadline passed, before the worker has had a chance to cancel)."""
        return not self.cancelled() and time.monotonic() < self._deadline.monotonic

    @classmethod
    def from_lease(cls, queue: str, lease: Lease, objects: Objects | None = None) -> Request:
        """The request of a lease; with ``objects``, its writes name the lease."""
        return cls(
            queue=queue,
            key=lease.key,
            reasons=lease.reasons,
            failures=lease.failures,
            last_error=lease.last_error,
            priority=lease.priority,
            enqueued_at=lease.enqueued_at,
            token=lease.token,
            object=lease.object,
            deleting=lease.deleting,
            deletion_timestamp=lease.deletion_timestamp,
            _objects=None if objects is None else objects.under(LeaseRef(queue, lease.key, lease.token)),
        )

    @classmethod
    def _from_proto(cls, queue: str, message: pb.Lease, objects: Objects | None = None) -> Request:
        """``from_lease(queue, Lease.from_proto(message), objects)`` without the Lease between."""
        key = message.key
        token = message.token
        return cls(
            queue=queue,
            key=key,
            reasons=tuple(map(Reason.from_proto, message.reasons)),
            failures=message.failures,
            last_error=message.last_error,
            priority=message.priority,
            enqueued_at=from_timestamp(message.enqueued_at, message.HasField("enqueued_at")),
            token=token,
            object=CachedObject.from_proto(message.object) if message.HasField("object") else None,
            deleting=message.deleting,
            deletion_timestamp=from_timestamp(message.deletion_timestamp, message.HasField("deletion_timestamp")),
            _objects=None if objects is None else objects.under(LeaseRef(queue, key, token)),
        )


class CancelFlag:
    """Set once the worker asks the reconcile to stop. Set on the event loop's
    thread and read from any (a SyncClient's reconcile threads): one attribute,
    so no lock is needed."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@dataclass
class LeaseDeadline:
    """When a lease ends, by ``time.monotonic()`` (asyncio's loop clock too);
    set by the worker when the lease arrives and on every extend."""

    monotonic: float = float("inf")


@dataclass(frozen=True)
class Result:
    """How a reconcile ended, like controller-runtime's Result.

    ``Result()`` (or returning None) is success: the key's failures are forgotten.
    ``Result(requeue_after=30)`` is success for now, and the key comes back after
    30 seconds. To retry with backoff, raise an exception instead.
    """

    requeue_after: Seconds | None = None

    def __post_init__(self) -> None:
        if self.requeue_after is not None:
            seconds(self.requeue_after)  # refuses negative delays early

    @property
    def requeue_after_seconds(self) -> float | None:
        return None if self.requeue_after is None else seconds(self.requeue_after)

