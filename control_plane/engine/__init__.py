"""Engine adapters: one small interface over Elasticsearch and OpenSearch.

Everything the control plane asks of a search engine goes through :class:`Engine`.
Both implementations speak the same REST paths; they differ only in the client library
that carries the request (``opensearch-py`` or ``elasticsearch`` 8.x), because each
refuses to talk to the other's server.
"""

from control_plane.engine.base import (
    Engine,
    EngineError,
    EngineKind,
    EnginePartialResults,
    EngineTimeout,
    EngineUnavailable,
    counted_requests,
)
from control_plane.engine.connect import connect, detect_kind

__all__ = [
    "Engine",
    "EngineError",
    "EngineKind",
    "EnginePartialResults",
    "EngineTimeout",
    "EngineUnavailable",
    "connect",
    "counted_requests",
    "detect_kind",
]
