"""A lease on one key, as the unary Get hands it out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ._wire import from_duration, from_timestamp
from .cached_object import CachedObject
from .reason import Reason
from .v1 import workqueue_pb2 as pb


@dataclass(frozen=True)
class Lease:
    """The right to process one key until ``deadline``; finish it with its ``token``."""

    key: str
    #: The fencing token of this grant; done, finish and extend must present it.
    token: int
    #: When the lease ends unless extended, in the sidecar's clock.
    deadline: datetime | None
    #: How long the lease had left when it was granted.
    ttl: timedelta
    priority: int
    #: Failures since the key was last forgotten (as num_requeues).
    failures: int
    reasons: tuple[Reason, ...]
    #: When the key became ready for this round.
    enqueued_at: datetime | None
    #: The error text of the key's last failed attempt; empty when none.
    last_error: str
    #: The key's object from the queue's primary informer, when asked for.
    object: CachedObject | None
    #: The key's object is being deleted (it has a deletionTimestamp and
    #: finalizers hold it).
    deleting: bool = False
    #: When deleting, the object's metadata.deletionTimestamp.
    deletion_timestamp: datetime | None = None

    @classmethod
    def from_proto(cls, message: pb.Lease) -> Lease:
        return cls(
            key=message.key,
            token=message.token,
            deadline=from_timestamp(message.deadline, message.HasField("deadline")),
            ttl=from_duration(message.ttl),
            priority=message.priority,
            failures=message.failures,
            reasons=tuple(Reason.from_proto(r) for r in message.reasons),
            enqueued_at=from_timestamp(message.enqueued_at, message.HasField("enqueued_at")),
            last_error=message.last_error,
            object=CachedObject.from_proto(message.object) if message.HasField("object") else None,
            deleting=message.deleting,
            deletion_timestamp=from_timestamp(message.deletion_timestamp, message.HasField("deletion_timestamp")),
        )


@dataclass(frozen=True)
class Extension:
    """A lease's deadline after an extend."""

    #: The new deadline, in the sidecar's clock.
    deadline: datetime | None
    #: The time left until the deadline.
    ttl: timedelta
    #: The sidecar asks the worker to stop and finish the lease soon (the queue
    #: was shut down without drain, or this sidecar lost leadership).
    cancel: bool
