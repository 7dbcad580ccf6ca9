"""Cache reads. A standalone sidecar has no informers: every informer name is unknown
(NOT_FOUND); a build without the CacheService answers UNIMPLEMENTED."""

from __future__ import annotations

import pytest

from workqueue_sidecar import Client, UnimplementedError, UnknownInformerError


async def test_cache_reads_on_a_standalone_sidecar_should_name_the_informer_unknown(client: Client) -> None:
    with pytest.raises((UnknownInformerError, UnimplementedError)):
        await client.cache.get("users", "", "alice")
    with pytest.raises((UnknownInformerError, UnimplementedError)):
        await client.cache.list("users", label_selector="app=web")
