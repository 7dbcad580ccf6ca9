"""What the sidecar reports about queues and keys: Len, KeyState, AddRateLimited, ShutDown."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ._wire import from_duration, from_timestamp
from ._enum import NamedIntEnum
from .reason import Reason
from .v1 import workqueue_pb2 as pb


class KeyPhase(NamedIntEnum):
    """Where a key is in its queue (the proto's KeyState, without its prefix);
    prints as its name (``str(KeyPhase.HELD) == "HELD"``)."""

    UNSPECIFIED = pb.KEY_STATE_UNSPECIFIED
    ABSENT = pb.KEY_STATE_ABSENT
    QUEUED = pb.KEY_STATE_QUEUED
    WAITING = pb.KEY_STATE_WAITING
    HELD = pb.KEY_STATE_HELD
    #: The key's last lease ended after writes made under it (``req.objects``):
    #: it is not handed out again until the sidecar's caches have seen them, or
    #: until ``settling_until``.
    SETTLING = pb.KEY_STATE_SETTLING


@dataclass(frozen=True)
class ShardPlace:
    """Where a key of a sharded queue belongs: its shard slot and the replica
    that owns it, as the asked sidecar last read its shard group's Leases."""

    #: The key's shard slot, 0 to 4095; None when not known (sharded by uid,
    #: the key's object is not in the sidecar's cache nor among its
    #: tombstones; such a key is not granted until it is).
    slot: int | None
    #: The identity of the replica the slot is assigned to; empty when the
    #: slot is not known or no replica is live. During a handover the previous
    #: owner may still be draining it.
    owner: str
    #: Whether the asked sidecar holds the slot and grants the key now.
    granted_here: bool

    @classmethod
    def from_proto(cls, message: pb.ShardPlace) -> ShardPlace:
        slot = message.slot if message.HasField("slot") else None
        return cls(slot=slot, owner=message.owner, granted_here=message.granted_here)


@dataclass(frozen=True)
class KeyInfo:
    """One key's state; the timestamps that do not apply to its phase are None."""

    phase: KeyPhase
    priority: int
    failures: int
    last_error: str
    reasons: tuple[Reason, ...]
    #: QUEUED: when it became ready.
    queued_since: datetime | None
    #: WAITING: when it becomes ready.
    waiting_until: datetime | None
    #: HELD: the lease's deadline.
    held_until: datetime | None
    #: HELD: the worker name of the holder.
    holder: str
    #: HELD, SETTLING: added again meanwhile; queued again when the lease ends
    #: (or the key has settled).
    dirty: bool
    #: SETTLING: the latest it waits for the caches to see its writes.
    settling_until: datetime | None = None
    #: Where the key belongs among the replicas of a shard group; None unless
    #: the queue is sharded (``shard_by`` in the sidecar's config).
    shard: ShardPlace | None = None

    @classmethod
    def from_proto(cls, message: pb.KeyStateResponse) -> KeyInfo:
        try:
            phase = KeyPhase(message.state)
        except ValueError:
            phase = KeyPhase.UNSPECIFIED
        return cls(
            phase=phase,
            priority=message.priority,
            failures=message.failures,
            last_error=message.last_error,
            reasons=tuple(Reason.from_proto(r) for r in message.reasons),
            queued_since=from_timestamp(message.queued_since, message.HasField("queued_since")),
            waiting_until=from_timestamp(message.waiting_until, message.HasField("waiting_until")),
            held_until=from_timestamp(message.held_until, message.HasField("held_until")),
            holder=message.holder,
            dirty=message.dirty,
            settling_until=from_timestamp(message.settling_until, message.HasField("settling_until")),
            shard=ShardPlace.from_proto(message.shard) if message.HasField("shard") else None,
        )


@dataclass(frozen=True)
class QueueLength:
    """A queue's counts at one instant."""

    #: Keys ready to be handed out now (client-go's Len).
    ready: int
    #: Keys waiting for a delay or backoff.
    waiting: int
    #: Keys held by workers.
    held: int
    #: Held keys added again while held.
    dirty: int
    #: Ready keys per priority, highest priority first.
    ready_by_priority: dict[int, int]
    #: Keys whose lease ended after writes made under it, not handed out until
    #: the sidecar's caches have seen them (SETTLING).
    settling: int = 0

    @classmethod
    def from_proto(cls, message: pb.LenResponse) -> QueueLength:
        by_priority = {p.priority: p.count for p in message.ready_by_priority}
        return cls(message.ready, message.waiting, message.held, message.dirty, by_priority, message.settling)


@dataclass(frozen=True)
class RateLimitedKey:
    """The rate limiter's decision for one key of add_rate_limited."""

    key: str
    #: The failure count including this one.
    failures: int
    #: The rate limiter's delay: the key is ready after it unless it was due sooner already.
    delay: timedelta

    @classmethod
    def from_proto(cls, message: pb.RateLimitedKey) -> RateLimitedKey:
        return cls(message.key, message.failures, from_duration(message.delay))


@dataclass(frozen=True)
class DrainReport:
    """What became of the leases held when a queue was shut down with drain."""

    #: Leases that ended (finished or expired) during the drain.
    finished: int
    #: Leases still held at the drain's deadline, returned to the queue.
    returned: int
