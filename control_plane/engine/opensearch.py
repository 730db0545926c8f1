"""OpenSearch through ``opensearch-py``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import opensearchpy
from opensearchpy import OpenSearch

from control_plane import deadline
from control_plane.engine.base import (
    Engine,
    EngineError,
    EngineTimeout,
    EngineUnavailable,
    error_reason,
    note_request,
)


class OpenSearchEngine(Engine):
    kind = "opensearch"

    def __init__(self, url: str, timeout_s: float, *, connections: int = 10) -> None:
        super().__init__(url, timeout_s)
        self._client = OpenSearch(
            hosts=[url], timeout=timeout_s, max_retries=0, retry_on_timeout=False,
            pool_maxsize=connections,  # urllib3's default keeps one: every other thread reconnects
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        headers = {"content-type": "application/x-ndjson"} if isinstance(body, str) else None
        note_request()
        timeout = deadline.call_timeout(timeout_s or self.timeout_s)
        try:
            result = self._client.transport.perform_request(
                method,
                path,
                params=dict(params or {}),
                body=body,
                timeout=timeout,
                headers=headers,
            )
        except opensearchpy.ConnectionTimeout as error:
            if deadline.expired():
                raise deadline.DeadlineExceeded(
                    f"the request deadline passed waiting for OpenSearch at {self.url}"
                ) from error
            raise EngineTimeout(f"OpenSearch at {self.url} timed out: {error}") from error
        except opensearchpy.ConnectionError as error:
            raise EngineUnavailable(f"OpenSearch at {self.url} is unreachable: {error}") from error
        except opensearchpy.TransportError as error:
            status = error.status_code if isinstance(error.status_code, int) else None
            raise EngineError(
                f"OpenSearch {method} {path} failed ({status}): {error_reason(error.info)}",
                status=status,
                info=error.info,
            ) from error
        if method == "HEAD" and not result:
            raise EngineError(f"OpenSearch HEAD {path}: not found", status=404)
        return result

    def close(self) -> None:
        self._client.close()
