"""What a reconcile function receives (Request) and returns (Result)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from ._wire import Seconds, seconds
from .cached_object import CachedObject
from .lease import Lease
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
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
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
    def from_lease(cls, queue: str, lease: Lease) -> Request:
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
        )


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

