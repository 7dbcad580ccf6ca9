"""The plain data types, without a sidecar."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from workqueue_sidecar import (
    CacheNotReadyError,
    Lease,
    Request,
    Result,
    ShuttingDownError,
    StaleLeaseError,
    UnavailableError,
    UnknownInformerError,
    UnknownQueueError,
    WorkqueueError,
)
from workqueue_sidecar._wire import from_duration, to_duration
from workqueue_sidecar.errors import error_for, error_for_number
from workqueue_sidecar.worker import _Held
from workqueue_sidecar.v1 import workqueue_pb2 as pb


def test_request_should_split_its_key() -> None:
    assert (Request("q", "ns/name").namespace, Request("q", "ns/name").name) == ("ns", "name")
    assert (Request("q", "cluster-scoped").namespace, Request("q", "cluster-scoped").name) == ("", "cluster-scoped")


def test_result_should_refuse_a_negative_delay() -> None:
    with pytest.raises(ValueError):
        Result(requeue_after=-1)
    assert Result(requeue_after=timedelta(milliseconds=1500)).requeue_after_seconds == 1.5


def test_durations_should_round_trip() -> None:
    assert to_duration(1.25) == Duration(seconds=1, nanos=250_000_000)
    assert from_duration(to_duration(timedelta(minutes=2, microseconds=7))) == timedelta(minutes=2, microseconds=7)


def test_status_codes_should_map_to_exceptions_by_service() -> None:
    assert type(error_for(grpc.StatusCode.NOT_FOUND, "x")) is UnknownQueueError
    assert type(error_for(grpc.StatusCode.NOT_FOUND, "x", "cache")) is UnknownInformerError
    assert type(error_for(grpc.StatusCode.UNAVAILABLE, "x")) is ShuttingDownError
    assert type(error_for(grpc.StatusCode.DEADLINE_EXCEEDED, "x", "cache")) is CacheNotReadyError
    assert type(error_for(grpc.StatusCode.UNAVAILABLE, "x", "cache")) is CacheNotReadyError
    # A write's UNAVAILABLE is neither a queue shutting down nor a cache not ready.
    too_many = error_for(grpc.StatusCode.UNAVAILABLE, "256 writes still unanswered", "object", reason="TOO_MANY_WRITES_OUT")
    assert type(too_many) is UnavailableError and too_many.reason == "TOO_MANY_WRITES_OUT"
    assert type(error_for(grpc.StatusCode.UNAVAILABLE, "503", "object", reason="ServiceUnavailable")) is UnavailableError
    assert all(issubclass(cls, UnavailableError) for cls in (ShuttingDownError, CacheNotReadyError))
    assert type(error_for_number(9, "stale")) is StaleLeaseError
    assert type(error_for(grpc.StatusCode.INTERNAL, "x")) is WorkqueueError
    assert str(error_for(grpc.StatusCode.INTERNAL, "")) == "INTERNAL"


def test_lease_should_decode_a_lease_without_optional_fields() -> None:
    lease = Lease.from_proto(pb.Lease(key="ns/a", token=7))
    assert (lease.key, lease.token, lease.deadline, lease.object, lease.reasons) == ("ns/a", 7, None, None, ())


# conformance: C6 (lease_valid() reads the clock when asked)
async def test_a_lease_should_end_at_the_sidecars_deadline_never_later_than_arrival_plus_ttl() -> None:
    held = _Held(Request(queue="q", key="ns/a"))
    assert held.request.lease_valid(), "no deadline known yet"
    # Read late (the process was stopped): the sidecar's deadline already passed.
    held.set_deadline(datetime.now(UTC) - timedelta(seconds=1), ttl=30.0)
    assert held.expired() and not held.request.lease_valid()
    # A fresh lease: the earlier of the sidecar's deadline and arrival + ttl.
    held.set_deadline(datetime.now(UTC) + timedelta(seconds=30), ttl=0.5)
    left = held.deadline - asyncio.get_running_loop().time()
    assert 0 < left <= 0.5 and held.request.lease_valid()
    held.set_deadline(None, ttl=2.0)
    assert 1.5 < held.deadline - asyncio.get_running_loop().time() <= 2.0


def test_key_info_should_read_settling() -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    from workqueue_sidecar import KeyInfo, KeyPhase

    message = pb.KeyStateResponse(state=pb.KEY_STATE_SETTLING, dirty=True, settling_until=Timestamp(seconds=60))
    info = KeyInfo.from_proto(message)
    assert (info.phase, str(info.phase), info.dirty) == (KeyPhase.SETTLING, "SETTLING", True)
    assert info.settling_until == datetime(1970, 1, 1, 0, 1, tzinfo=UTC)
    assert info.held_until is None


def test_lease_should_read_deleting() -> None:
    from google.protobuf.timestamp_pb2 import Timestamp

    lease = Lease.from_proto(pb.Lease(key="alice", token=3, deleting=True, deletion_timestamp=Timestamp(seconds=60)))
    request = Request.from_lease("users", lease)
    assert (request.deleting, request.deletion_timestamp) == (True, datetime(1970, 1, 1, 0, 1, tzinfo=UTC))
    assert (request.lease.queue, request.lease.key, request.lease.token) == ("users", "alice", 3)


def test_a_worker_request_should_equal_the_one_made_through_a_lease() -> None:
    # The worker builds its Request from the wire Lease directly; it must be
    # what Request.from_lease(Lease.from_proto(...)) makes, field for field.
    from google.protobuf.timestamp_pb2 import Timestamp

    from workqueue_sidecar import ReasonKind

    message = pb.Lease(
        key="ns/a",
        token=9,
        deadline=Timestamp(seconds=100),
        ttl=Duration(seconds=30),
        priority=2,
        failures=3,
        reasons=[
            pb.Reason(kind=pb.REASON_KIND_ADDED, source="users"),
            pb.Reason(kind=pb.REASON_KIND_ADDED, source="users"),
            pb.Reason(kind=pb.REASON_KIND_MANUAL, source="by hand", detail="why"),
            pb.Reason(kind=999),  # type: ignore[arg-type]  # a kind this client does not know
        ],
        enqueued_at=Timestamp(seconds=50, nanos=500_000_000),
        last_error="boom",
        deleting=True,
        deletion_timestamp=Timestamp(seconds=60),
    )
    direct = Request._from_proto("q", message)
    assert direct == Request.from_lease("q", Lease.from_proto(message))
    kinds = [r.kind for r in direct.reasons]
    assert kinds == [ReasonKind.ADDED, ReasonKind.ADDED, ReasonKind.MANUAL, ReasonKind.UNSPECIFIED]
    assert (direct.reasons[2].source, direct.reasons[2].detail) == ("by hand", "why")
    bare = pb.Lease(key="b", token=1)
    assert Request._from_proto("q", bare) == Request.from_lease("q", Lease.from_proto(bare))
