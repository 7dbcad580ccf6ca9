"""A handle on one named queue, so its name is not repeated on every call."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ._wire import Seconds
from .introspection import DrainReport, KeyInfo, QueueLength, RateLimitedKey
from .lease import Lease

if TYPE_CHECKING:
    from .client import Client
    from .worker import Reconcile


class Queue:
    """One of the sidecar's queues: client-go's workqueue operations and ``run``::

        users = client.queue("users")
        await users.add("alice", "bob")
        print(await users.key_state("alice"))
        await users.run(reconcile, concurrency=4, stop=stop)

    ``priority`` and ``reason`` are the defaults of the adds made through the
    handle (each add may still give its own). A handle is cheap and does not
    check that the queue exists: calls on an unknown one raise
    ``UnknownQueueError``.
    """

    def __init__(self, client: Client, name: str, *, priority: int | None = None, reason: str = "") -> None:
        self._client = client
        #: The queue's name.
        self.name = name
        self.priority = priority
        self.reason = reason

    def __repr__(self) -> str:
        return f"Queue({self.name!r})"

    async def add(self, *keys: str, priority: int | None = None, reason: str | None = None) -> None:
        """Queues keys now (client-go Add)."""
        await self._client.add(self.name, *keys, priority=self._priority(priority), reason=self._reason(reason))

    async def add_after(
        self, *keys: str, delay: Seconds, priority: int | None = None, reason: str | None = None
    ) -> None:
        """Queues keys once ``delay`` (seconds or timedelta) has passed (client-go AddAfter)."""
        await self._client.add_after(
            self.name, *keys, delay=delay, priority=self._priority(priority), reason=self._reason(reason)
        )

    async def add_rate_limited(
        self, *keys: str, priority: int | None = None, reason: str | None = None
    ) -> list[RateLimitedKey]:
        """Counts a failure for each key and queues it after its backoff (client-go AddRateLimited)."""
        return await self._client.add_rate_limited(
            self.name, *keys, priority=self._priority(priority), reason=self._reason(reason)
        )

    async def forget(self, key: str) -> None:
        """Clears a key's failure count (client-go Forget)."""
        await self._client.forget(self.name, key)

    async def num_requeues(self, key: str) -> int:
        """How many times a key has failed since it was last forgotten (client-go NumRequeues)."""
        return await self._client.num_requeues(self.name, key)

    async def len(self) -> QueueLength:
        """The queue's counts: ready (client-go Len), waiting, held, dirty, ready per priority."""
        return await self._client.len(self.name)

    async def key_state(self, key: str) -> KeyInfo:
        """Where one key is (absent, queued, waiting, held, settling) with its failures and reasons."""
        return await self._client.key_state(self.name, key)

    async def shut_down(self, *, drain: bool = False, drain_timeout: Seconds | None = None) -> DrainReport:
        """Stops the queue handing out keys (client-go ShutDown / ShutDownWithDrain)."""
        return await self._client.shut_down(self.name, drain=drain, drain_timeout=drain_timeout)

    async def get(
        self, *, max_keys: int = 1, wait: Seconds = 0, lease_ttl: Seconds | None = None, include_object: bool = False
    ) -> list[Lease]:
        """Leases up to ``max_keys`` ready keys by hand (see ``Client.get``)."""
        return await self._client.get(
            self.name, max_keys=max_keys, wait=wait, lease_ttl=lease_ttl, include_object=include_object
        )

    async def run(
        self,
        reconcile: Reconcile,
        *,
        concurrency: int = 1,
        include_object: bool = False,
        stop: asyncio.Event | None = None,
        lease_ttl: Seconds | None = None,
        drain_timeout: Seconds = 30.0,
    ) -> None:
        """Reconciles keys of this queue until ``stop`` is set (see ``Client.run``)."""
        await self._client.run(
            self.name,
            reconcile,
            concurrency=concurrency,
            include_object=include_object,
            stop=stop,
            lease_ttl=lease_ttl,
            drain_timeout=drain_timeout,
        )

    def _priority(self, priority: int | None) -> int | None:
        return self.priority if priority is None else priority

    def _reason(self, reason: str | None) -> str:
        return self.reason if reason is None else reason
