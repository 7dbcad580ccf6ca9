"""The exceptions a call to the sidecar raises, one per gRPC status the contract documents."""

from __future__ import annotations

from typing import Literal

import grpc

Service = Literal["queue", "cache"]


class WorkqueueError(Exception):
    """A call to the sidecar failed. ``code`` is the gRPC status code, when there was one."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class InvalidArgumentError(WorkqueueError):
    """A key, name or field was refused (INVALID_ARGUMENT): empty, too long, negative."""


class UnknownQueueError(WorkqueueError):
    """The sidecar has no queue of that name (NOT_FOUND from the queue service)."""


class UnknownInformerError(WorkqueueError):
    """The sidecar has no informer or index of that name (NOT_FOUND from the cache service)."""


class StaleLeaseError(WorkqueueError):
    """The lease token is stale or unknown (FAILED_PRECONDITION): the lease already
    ended (finished, expired, returned) and the call changed nothing."""


class ShuttingDownError(WorkqueueError):
    """The sidecar cannot serve the queue now (UNAVAILABLE): the queue is shutting
    down, this sidecar is not the leader, or the sidecar cannot be reached. Retry later."""


class CacheNotReadyError(WorkqueueError):
    """A cache read could not be served in time: the informer has not finished its
    initial list (UNAVAILABLE) or has not reached ``min_resource_version`` (DEADLINE_EXCEEDED)."""


class LimitExceededError(WorkqueueError):
    """Over a server limit (RESOURCE_EXHAUSTED): a full queue or a batch that is too large."""


class UnimplementedError(WorkqueueError):
    """The sidecar does not serve this call (UNIMPLEMENTED): a build that predates it."""


_BY_CODE: dict[grpc.StatusCode, type[WorkqueueError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: StaleLeaseError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: LimitExceededError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
}


def error_for(code: grpc.StatusCode, message: str, service: Service = "queue") -> WorkqueueError:
    """The exception for a status ``code`` answered by ``service``."""
    cls: type[WorkqueueError]
    if code == grpc.StatusCode.NOT_FOUND:
        cls = UnknownQueueError if service == "queue" else UnknownInformerError
    elif code == grpc.StatusCode.UNAVAILABLE:
        cls = ShuttingDownError if service == "queue" else CacheNotReadyError
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED and service == "cache":
        cls = CacheNotReadyError
    else:
        cls = _BY_CODE.get(code, WorkqueueError)
    return cls(message or code.name, code)


def error_for_number(number: int, message: str) -> WorkqueueError:
    """The exception for a numeric status code, as FinishAck and Extended carry it."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return error_for(code, message)
    return WorkqueueError(message or f"status code {number}")


def from_rpc_error(err: grpc.aio.AioRpcError, service: Service = "queue") -> WorkqueueError:
    """Converts a failed call into this package's exception; raise it ``from err``."""
    return error_for(err.code(), err.details() or "", service)
