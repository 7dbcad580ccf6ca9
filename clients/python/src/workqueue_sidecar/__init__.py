"""Python worker client for workqueue-sidecar.

- ``Client`` (asyncio): ``async with Client.connect(target) as client`` — queue
  calls (``add``, ``add_after``, ``add_rate_limited``, ``forget``,
  ``num_requeues``, ``len``, ``key_state``, leases by hand) and ``run``, the
  worker loop over the streaming Work RPC.
- ``SyncClient`` and ``run_sync``: the same for scripts, blocking.
- ``Request`` and ``Result``: what a reconcile function takes and returns.
- ``client.cache``: reads from the sidecar's informer caches.
- ``tls_credentials``: TLS (and mTLS) for a sidecar serving TLS.
- ``errors``: ``WorkqueueError`` and one subclass per gRPC status.
- ``workqueue_sidecar.v1``: the generated protobuf and gRPC stubs.
"""

from .cache import Cache
from .cached_object import CachedObject
from .client import Client
from .errors import (
    CacheNotReadyError,
    InvalidArgumentError,
    LimitExceededError,
    ShuttingDownError,
    StaleLeaseError,
    UnimplementedError,
    UnknownInformerError,
    UnknownQueueError,
    WorkqueueError,
)
from .introspection import DrainReport, KeyInfo, KeyPhase, QueueLength, RateLimitedKey
from .lease import Extension, Lease
from .reason import Reason, ReasonKind
from .request import Request, Result
from .sync import SyncCache, SyncClient, run_sync
from .tls import tls_credentials
from .worker import Reconcile

__all__ = [
    "Cache",
    "CacheNotReadyError",
    "CachedObject",
    "Client",
    "DrainReport",
    "Extension",
    "InvalidArgumentError",
    "KeyInfo",
    "KeyPhase",
    "Lease",
    "LimitExceededError",
    "QueueLength",
    "RateLimitedKey",
    "Reason",
    "ReasonKind",
    "Reconcile",
    "Request",
    "Result",
    "ShuttingDownError",
    "StaleLeaseError",
    "SyncCache",
    "SyncClient",
    "UnimplementedError",
    "UnknownInformerError",
    "UnknownQueueError",
    "WorkqueueError",
    "run_sync",
    "tls_credentials",
]
