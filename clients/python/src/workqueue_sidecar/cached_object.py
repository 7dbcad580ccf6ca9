"""A Kubernetes object as the sidecar's informer cache holds it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .v1 import cache_pb2


@dataclass(frozen=True)
class CachedObject:
    """One cached object, its JSON already decoded into ``data``."""

    #: The object (apiVersion, kind, metadata, spec, status, ...) as a dict.
    data: dict[str, Any]
    #: metadata.resourceVersion, for comparing with a version the worker wrote.
    resource_version: str
    #: True when the object was deleted: ``data`` is its last known state.
    deleted: bool
    #: metadata.namespace; empty for a cluster-scoped object.
    namespace: str
    #: metadata.name.
    name: str

    @classmethod
    def from_proto(cls, message: cache_pb2.CachedObject) -> CachedObject:
        data = json.loads(message.json) if message.json else {}
        if not isinstance(data, dict):
            raise ValueError(f"cached object {message.namespace}/{message.name} is not a JSON object")
        return cls(data, message.resource_version, message.deleted, message.namespace, message.name)
