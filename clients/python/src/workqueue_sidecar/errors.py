"""The exceptions a call to the sidecar raises, one per gRPC status the contract documents."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import grpc
from google.rpc import error_details_pb2, status_pb2

Service = Literal["queue", "cache", "object"]

#: The ErrorInfo domain of the API server's refusals, as the sidecar sends them.
KUBERNETES_ERROR_DOMAIN = "k8s.io"
#: The ErrorInfo domain of the sidecar's own refusals that share a code with
#: others (reasons ``STALE_LEASE``, ``NO_KUBERNETES``, ``LEASE_ENDED_DURING_WRITE`` and
#: ``TOO_MANY_WRITES_OUT``).
SIDECAR_ERROR_DOMAIN = "workqueue-sidecar"


@dataclass(frozen=True)
class Cause:
    """One field the API server refused an object for, and why."""

    #: The field's path, e.g. ``metadata.name``.
    field: str
    message: str


class WorkqueueError(Exception):
    """A call to the sidecar failed. ``code`` is the gRPC status code, when there was one.

    A refused write also carries the API server's account of it: ``reason``
    (``Conflict``, ``AlreadyExists``, ``Invalid``, ``NotFound``, ``Forbidden``,
    ...), ``http_status`` (409, 422, ...) and, for an invalid object,
    ``causes`` (one ``Cause`` per refused field). They are empty otherwise.
    """

    def __init__(
        self,
        message: str,
        code: grpc.StatusCode | None = None,
        *,
        reason: str = "",
        http_status: int = 0,
        causes: tuple[Cause, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.http_status = http_status
        self.causes = causes


class InvalidArgumentError(WorkqueueError):
    """A key, name or field was refused (INVALID_ARGUMENT), or a message past the size
    limit (OUT_OF_RANGE): empty, too long, negative;
    for a write, a malformed object or patch, or one the API server found invalid
    (HTTP 400 or 422: ``causes`` names the fields)."""


class ConflictError(WorkqueueError):
    """The API server refused a write as conflicting (ABORTED, HTTP 409): a stale
    resourceVersion, a failed uid or resourceVersion precondition, fields another
    manager owns, or an object that already exists. Read again and retry."""


class AlreadyExistsError(ConflictError):
    """A create found an object of that name (ABORTED, reason AlreadyExists)."""


class LeaseEndedDuringWriteError(ConflictError):
    """A write under a lease was made, but the lease ended before the API server
    answered it (ABORTED, the sidecar's reason LEASE_ENDED_DURING_WRITE): the
    sidecar's term as leader or shard owner ended, a shutdown handed the lease
    back, or the worker's own done/finish ended it. Another worker may hold the
    key by now: treat it like a lost lease, not a conflict to read again and
    retry, and do not done/finish the lease expecting success."""


class NotFoundError(WorkqueueError):
    """The object of a write does not exist (NOT_FOUND, HTTP 404)."""


class UnknownKindError(WorkqueueError):
    """The API server does not serve the write's apiVersion and kind (NOT_FOUND
    from the object service): is its CRD installed?"""


class ForbiddenError(WorkqueueError):
    """The sidecar's credentials may not make this write (PERMISSION_DENIED, HTTP
    403): grant its service account the verb."""


class NoKubernetesError(WorkqueueError):
    """A write asked of a sidecar that runs without Kubernetes (its config names no
    informers), which cannot write objects (FAILED_PRECONDITION)."""


class UnknownQueueError(WorkqueueError):
    """The sidecar has no queue of that name (NOT_FOUND from the queue service)."""


class UnknownInformerError(WorkqueueError):
    """The sidecar has no informer or index of that name (NOT_FOUND from the cache service)."""


class StaleLeaseError(WorkqueueError):
    """The lease token is stale or unknown (FAILED_PRECONDITION): the lease already
    ended (finished, expired, returned) and the call changed nothing; a write under
    that lease was not made."""


class UnavailableError(WorkqueueError):
    """The call cannot be served now (UNAVAILABLE); retry later. Raised as itself for
    a write: the API server is unreachable or answered 429, 500 or 503, or too many
    writes to it are still unanswered (the sidecar's reason ``TOO_MANY_WRITES_OUT``,
    nothing was sent). ``ShuttingDownError`` and ``CacheNotReadyError`` are ones too."""


class ShuttingDownError(UnavailableError):
    """The sidecar cannot serve the queue now (UNAVAILABLE): the queue is shutting
    down, this sidecar is not the leader, or the sidecar cannot be reached. Retry later."""


class CacheNotReadyError(UnavailableError):
    """A cache read could not be served in time: the informer has not finished its
    initial list (UNAVAILABLE) or has not reached ``min_resource_version`` (DEADLINE_EXCEEDED)."""


class LimitExceededError(WorkqueueError):
    """Over a server limit (RESOURCE_EXHAUSTED): a full queue or a batch that is too large."""


class UnimplementedError(WorkqueueError):
    """The sidecar does not serve this call (UNIMPLEMENTED): a build that predates it."""


_BY_CODE: dict[grpc.StatusCode, type[WorkqueueError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    # A message past the sidecar's size limit (a write body over 3 MiB).
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.FAILED_PRECONDITION: StaleLeaseError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: LimitExceededError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.ABORTED: ConflictError,
    grpc.StatusCode.PERMISSION_DENIED: ForbiddenError,
}


def error_for(
    code: grpc.StatusCode,
    message: str,
    service: Service = "queue",
    *,
    reason: str = "",
    http_status: int = 0,
    causes: tuple[Cause, ...] = (),
) -> WorkqueueError:
    """The exception for a status ``code`` answered by ``service``; ``reason`` is the
    status's ErrorInfo reason (the API server's for a refused write, or the
    sidecar's own), ``http_status`` and ``causes`` the API server's."""
    cls: type[WorkqueueError]
    if service == "object" and code == grpc.StatusCode.NOT_FOUND:
        cls = NotFoundError if reason else UnknownKindError
    elif service == "object" and code == grpc.StatusCode.FAILED_PRECONDITION:
        # The same code answers a write asked of a sidecar without Kubernetes and a
        # write under a lease that ended; the sidecar's ErrorInfo reason tells which.
        cls = NoKubernetesError if reason == "NO_KUBERNETES" else StaleLeaseError
    elif service == "object" and code == grpc.StatusCode.ABORTED and reason == "AlreadyExists":
        cls = AlreadyExistsError
    elif service == "object" and code == grpc.StatusCode.ABORTED and reason == "LEASE_ENDED_DURING_WRITE":
        # The API server's conflicts share the code; the sidecar's reason tells
        # a write whose lease ended before its answer.
        cls = LeaseEndedDuringWriteError
    elif code == grpc.StatusCode.NOT_FOUND:
        cls = UnknownQueueError if service == "queue" else UnknownInformerError
    elif code == grpc.StatusCode.UNAVAILABLE:
        cls = {"queue": ShuttingDownError, "cache": CacheNotReadyError, "object": UnavailableError}[service]
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED and service == "cache":
        cls = CacheNotReadyError
    else:
        cls = _BY_CODE.get(code, WorkqueueError)
    return cls(message or code.name, code, reason=reason, http_status=http_status, causes=causes)


def error_for_number(number: int, message: str) -> WorkqueueError:
    """The exception for a numeric status code, as FinishAck and Extended carry it."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return error_for(code, message)
    return WorkqueueError(message or f"status code {number}")


def from_rpc_error(err: grpc.aio.AioRpcError, service: Service = "queue") -> WorkqueueError:
    """Converts a failed call into this package's exception; raise it ``from err``."""
    reason, http_status, causes = _api_details(err)
    return error_for(
        err.code(), err.details() or "", service, reason=reason, http_status=http_status, causes=causes
    )


def _api_details(err: grpc.aio.AioRpcError) -> tuple[str, int, tuple[Cause, ...]]:
    """The ErrorInfo's reason, the API server's HTTP status and causes from the
    status details (``grpc-status-details-bin``: an ErrorInfo of domain k8s.io and
    a BadRequest, or an ErrorInfo of the sidecar's own domain)."""
    reason, http_status, causes = "", 0, []
    for key, value in err.trailing_metadata() or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            bad_request = error_details_pb2.BadRequest()
            if detail.Unpack(info) and info.domain == KUBERNETES_ERROR_DOMAIN:
                reason = info.reason
                http_status = int(info.metadata.get("http_status", "0") or 0)
            elif detail.Unpack(info) and info.domain == SIDECAR_ERROR_DOMAIN:
                reason = info.reason
            elif detail.Unpack(bad_request):
                causes += [Cause(v.field, v.description) for v in bad_request.field_violations]
    return reason, http_status, tuple(causes)
