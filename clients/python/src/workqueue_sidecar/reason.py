"""Why a key was queued: the reasons a lease carries."""

from __future__ import annotations

from dataclasses import dataclass

from ._enum import NamedIntEnum
from .v1 import workqueue_pb2 as pb


class ReasonKind(NamedIntEnum):
    """What made the key queued (the proto's ReasonKind, without its prefix)."""

    UNSPECIFIED = pb.REASON_KIND_UNSPECIFIED
    MANUAL = pb.REASON_KIND_MANUAL
    INITIAL_LIST = pb.REASON_KIND_INITIAL_LIST
    RESYNC = pb.REASON_KIND_RESYNC
    ADDED = pb.REASON_KIND_ADDED
    UPDATED = pb.REASON_KIND_UPDATED
    DELETED = pb.REASON_KIND_DELETED
    RETRY = pb.REASON_KIND_RETRY
    REQUEUE_AFTER = pb.REASON_KIND_REQUEUE_AFTER
    LEASE_EXPIRED = pb.REASON_KIND_LEASE_EXPIRED
    LEASE_RELEASED = pb.REASON_KIND_LEASE_RELEASED
    TRIGGER = pb.REASON_KIND_TRIGGER
    SHUTDOWN_RETURNED = pb.REASON_KIND_SHUTDOWN_RETURNED

    @classmethod
    def of(cls, value: int) -> ReasonKind:
        """The kind for a wire value; one this client does not know is UNSPECIFIED."""
        try:
            return cls(value)
        except ValueError:
            return cls.UNSPECIFIED


@dataclass(frozen=True)
class Reason:
    """One cause of a key being queued."""

    kind: ReasonKind
    #: The informer's name for watch events, resyncs and triggers; the reason
    #: text given to an add; empty when there is nothing to name.
    source: str = ""
    #: Free-form detail for people, often empty.
    detail: str = ""

    @classmethod
    def from_proto(cls, message: pb.Reason) -> Reason:
        # Reasons repeat (an informer's ADDED, a MANUAL add): each lease reuses
        # the one frozen Reason made for its values, while there are few.
        values = (message.kind, message.source, message.detail)
        reason = _SEEN.get(values)
        if reason is None:
            reason = cls(ReasonKind.of(values[0]), values[1], values[2])
            if len(_SEEN) >= _SEEN_MAX:
                _SEEN.clear()
            _SEEN[values] = reason
        return reason


#: The Reasons made so far, by their wire values; emptied when it reaches _SEEN_MAX.
_SEEN: dict[tuple[int, str, str], Reason] = {}
#: Enough for the kinds times a few informers and add reasons, small in memory.
_SEEN_MAX = 256
