"""Reads from the sidecar's informer caches (CacheService), so a reconciler never asks the API server."""

from __future__ import annotations

import builtins
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ._wire import Seconds, to_duration
from .cached_object import CachedObject
from .errors import from_rpc_error
from .v1 import cache_pb2 as pb
from .v1 import cache_pb2_grpc


class Cache:
    """The informer caches of one sidecar, by informer name (as in the sidecar's config).

    Every read can wait: ``wait`` (seconds) bounds how long to wait for the
    informer's initial list and for ``min_resource_version``, the
    resourceVersion of the worker's own last write (read-your-writes). Without
    ``wait`` a cache that is not ready fails at once with ``CacheNotReadyError``.
    An unknown informer or index raises ``UnknownInformerError``.
    """

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self._stub: Any = cache_pb2_grpc.CacheServiceStub(channel)

    async def get(
        self,
        informer: str,
        namespace: str,
        name: str,
        *,
        min_resource_version: str = "",
        wait: Seconds | None = None,
    ) -> dict[str, Any] | None:
        """The object as a dict, or None when the cache does not hold it.
        ``namespace`` is empty for a cluster-scoped resource."""
        found = await self.get_object(
            informer, namespace, name, min_resource_version=min_resource_version, wait=wait
        )
        return None if found is None else found.data

    async def get_object(
        self,
        informer: str,
        namespace: str,
        name: str,
        *,
        min_resource_version: str = "",
        wait: Seconds | None = None,
        include_deleted: bool = False,
    ) -> CachedObject | None:
        """The object with its resourceVersion; ``include_deleted`` also returns the
        last known state of a deleted object (``deleted=True``)."""
        request = pb.GetObjectRequest(
            informer=informer,
            namespace=namespace,
            name=name,
            min_resource_version=min_resource_version,
            wait=None if wait is None else to_duration(wait),
            include_deleted=include_deleted,
        )
        try:
            response: pb.GetObjectResponse = await self._stub.GetObject(request)
        except grpc.aio.AioRpcError as err:
            raise from_rpc_error(err, "cache") from err
        return CachedObject.from_proto(response.object) if response.HasField("object") else None

    async def list(
        self,
        informer: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        index: tuple[str, str] | None = None,
        min_resource_version: str = "",
        wait: Seconds | None = None,
        page_size: int = 0,
    ) -> builtins.list[dict[str, Any]]:
        """Every cached object matching all the filters, as dicts, in namespace/name order.

        ``label_selector`` uses the API server's syntax (``app=web,tier!=cache``);
        ``index`` is ``(index_name, value)`` of an index defined on the informer.
        """
        return [
            found.data
            async for found in self.list_objects(
                informer,
                namespace=namespace,
                label_selector=label_selector,
                index=index,
                min_resource_version=min_resource_version,
                wait=wait,
                page_size=page_size,
            )
        ]

    async def list_objects(
        self,
        informer: str,
        *,
        namespace: str = "",
        label_selector: str = "",
        index: tuple[str, str] | None = None,
        min_resource_version: str = "",
        wait: Seconds | None = None,
        page_size: int = 0,
    ) -> AsyncIterator[CachedObject]:
        """Like ``list``, yielding CachedObjects and reading the pages as it goes."""
        index_name, index_value = index or ("", "")
        token = ""
        while True:
            request = pb.ListObjectsRequest(
                informer=informer,
                namespace=namespace,
                label_selector=label_selector,
                index_name=index_name,
                index_value=index_value,
                min_resource_version=min_resource_version,
                wait=None if wait is None else to_duration(wait),
                page_size=page_size,
                page_token=token,
            )
            try:
                response: pb.ListObjectsResponse = await self._stub.ListObjects(request)
            except grpc.aio.AioRpcError as err:
                raise from_rpc_error(err, "cache") from err
            for found in response.objects:
                yield CachedObject.from_proto(found)
            token = response.next_page_token
            if not token:
                return
