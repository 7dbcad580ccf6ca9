"""Conversions between Python time values and protobuf Duration/Timestamp."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

#: A span of time as the API accepts it: seconds (int or float) or a timedelta.
Seconds = float | timedelta


def seconds(value: Seconds) -> float:
    """``value`` in seconds; refuses negative spans, which the sidecar refuses too."""
    result = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if result < 0:
        raise ValueError(f"a duration must not be negative, got {result}s")
    return result


def to_duration(value: Seconds) -> Duration:
    total = seconds(value)
    whole = int(total)
    return Duration(seconds=whole, nanos=round((total - whole) * 1e9))


def from_duration(value: Duration) -> timedelta:
    return timedelta(seconds=value.seconds, microseconds=value.nanos / 1000)


def from_timestamp(value: Timestamp, present: bool = True) -> datetime | None:
    """The timestamp as an aware UTC datetime, or None when the field is unset."""
    if not present:
        return None
    return datetime.fromtimestamp(value.seconds + value.nanos / 1e9, tz=timezone.utc)
