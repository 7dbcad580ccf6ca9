"""Python worker client for workqueue-sidecar.

- ``Client`` (asyncio): ``async with Client.connect(target) as client`` —
  ``client.queue(name)`` (a ``Queue``: ``add``, ``add_after``,
  ``add_rate_limited``, ``forget``, ``num_requeues``, ``len``, ``key_state``,
  ``shut_down``, leases by hand, and ``run``, the worker loop over the
  streaming Work RPC); the same calls on the client with the queue's name.
- ``SyncClient`` and ``run_sync``: the same for scripts, blocking.
- ``Request`` and ``Result``: what a reconcile function takes and returns.
- ``client.cache``: reads from the sidecar's informer caches.
- ``client.objects`` and ``req.objects`` (under the request's lease): writes
  to Kubernetes through the sidecar (apply, patch, create, delete);
  ``controller_ref`` builds a child's controller ownerReference.
- ``tls_credentials``: TLS (and mTLS) for a sidecar serving TLS.
- ``errors``: ``WorkqueueError`` and one subclass per gRPC status.
- ``workqueue_sidecar.v1``: the generated protobuf and gRPC stubs.
"""

from .cache import Cache
from .cached_object import CachedObject
from .client import Client
from .errors import (
    AlreadyExistsError,
    CacheNotReadyError,
    Cause,
    ConflictError,
    ForbiddenError,
    InvalidArgumentError,
    LeaseEndedDuringWriteError,
    LimitExceededError,
    NoKubernetesError,
    NotFoundError,
    ShuttingDownError,
    StaleLeaseError,
    UnavailableError,
    UnimplementedError,
    UnknownInformerError,
    UnknownKindError,
    UnknownQueueError,
    WorkqueueError,
)
from .introspection import DrainReport, KeyInfo, KeyPhase, QueueLength, RateLimitedKey, ShardPlace
from .lease import Extension, Lease
from .objects import Deletion, LeaseRef, ObjectRef, Objects, Propagation, Written, controller_ref
from .queue import Queue
from .reason import Reason, ReasonKind
from .request import Request, Result
from .sync import SyncCache, SyncClient, SyncObjects, SyncQueue, SyncRequest, run_sync
from .tls import tls_credentials
from .worker import Reconcile

__all__ = [
    "AlreadyExistsError",
    "Cache",
    "CacheNotReadyError",
    "CachedObject",
    "Cause",
    "Client",
    "ConflictError",
    "Deletion",
    "DrainReport",
    "Extension",
    "ForbiddenError",
    "InvalidArgumentError",
    "KeyInfo",
    "KeyPhase",
    "Lease",
    "LeaseEndedDuringWriteError",
    "LeaseRef",
    "LimitExceededError",
    "NoKubernetesError",
    "NotFoundError",
    "ObjectRef",
    "Objects",
    "Propagation",
    "Queue",
    "QueueLength",
    "RateLimitedKey",
    "Reason",
    "ReasonKind",
    "Reconcile",
    "Request",
    "Result",
    "ShardPlace",
    "ShuttingDownError",
    "StaleLeaseError",
    "UnavailableError",
    "SyncCache",
    "SyncClient",
    "SyncObjects",
    "SyncQueue",
    "SyncRequest",
    "UnimplementedError",
    "UnknownInformerError",
    "UnknownKindError",
    "UnknownQueueError",
    "WorkqueueError",
    "Written",
    "controller_ref",
    "run_sync",
    "tls_credentials",
]
