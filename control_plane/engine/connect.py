"""Pick the adapter: from configuration, or from the root endpoint's ``version``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from control_plane.config import EngineSettings
from control_plane.engine.base import Engine, EngineKind, EngineTimeout, EngineUnavailable


def detect_kind(url: str, timeout_s: float) -> EngineKind:
    """Ask the root endpoint which engine answers (``version.distribution``)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/", timeout=timeout_s) as response:
            info = json.loads(response.read())
    except TimeoutError as error:
        raise EngineTimeout(f"engine at {url} timed out: {error}") from error
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise EngineUnavailable(f"engine at {url} is unreachable: {error}") from error
    distribution = info.get("version", {}).get("distribution")
    return "opensearch" if distribution == "opensearch" else "elasticsearch"


def connect(settings: EngineSettings) -> Engine:
    kind = settings.kind
    if kind == "auto":
        kind = detect_kind(settings.url, settings.timeout_s)
    if kind == "opensearch":
        from control_plane.engine.opensearch import OpenSearchEngine

        return OpenSearchEngine(settings.url, settings.timeout_s, connections=settings.connections)
    from control_plane.engine.elasticsearch import ElasticsearchEngine

    return ElasticsearchEngine(settings.url, settings.timeout_s, connections=settings.connections)
