"""OpenSearch through ``opensearch-py``'s connection pool.

Every request but ``HEAD`` is one :class:`~control_plane.engine.wire.Wire` exchange on a
connection of the client's own urllib3 pool (its TLS, basic auth from the URL, pool size),
its answer decoded by :func:`~control_plane.engine.codec.decode`; ``HEAD`` (existence checks,
off the hot path) goes through the client library. ADR 0026 measures the difference.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import opensearchpy
import urllib3
from opensearchpy import OpenSearch
from opensearchpy.exceptions import OpenSearchWarning

from control_plane import deadline
from control_plane.engine import codec
from control_plane.engine.base import (
    Engine,
    EngineError,
    EngineTimeout,
    EngineUnavailable,
    error_reason,
    note_request,
)
from control_plane.engine.wire import Wire, WireError, WireTimeout

_JSON = "application/json"
_NDJSON = "application/x-ndjson"


class OpenSearchEngine(Engine):
    kind = "opensearch"

    def __init__(self, url: str, timeout_s: float, *, connections: int = 10) -> None:
        super().__init__(url, timeout_s)
        self._client = OpenSearch(
            hosts=[url], timeout=timeout_s, max_retries=0, retry_on_timeout=False,
            pool_maxsize=connections,  # urllib3's default keeps one: every other thread reconnects
        )
        (connection,) = self._client.transport.connection_pool.connections
        self._connection = connection
        self._prefix: str = connection.url_prefix
        self._wire = Wire(self._pool, connection.headers)

    def _pool(self) -> urllib3.HTTPConnectionPool:
        """The library connection's urllib3 pool (opened again after :meth:`close`, as the
        library does)."""
        if self._connection.pool is None:
            self._connection._create_urllib3_pool()
        pool: urllib3.HTTPConnectionPool = self._connection.pool
        return pool

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        note_request()
        timeout = deadline.call_timeout(timeout_s or self.timeout_s)
        if method == "HEAD":
            return self._head(path, params, timeout)
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        content_type = _NDJSON if isinstance(body, (str, bytes)) else _JSON
        payload = None if body is None else codec.encode(body)
        try:
            answer = self._wire.exchange(method, target, payload, content_type, timeout)
        except WireTimeout as error:
            if deadline.expired():
                raise deadline.DeadlineExceeded(
                    f"the request deadline passed waiting for OpenSearch at {self.url}"
                ) from error
            raise EngineTimeout(f"OpenSearch at {self.url} timed out: {error}") from error
        except WireError as error:
            raise EngineUnavailable(f"OpenSearch at {self.url} is unreachable: {error}") from error
        if "warning" in answer.headers:
            warnings.warn(answer.headers["warning"], category=OpenSearchWarning, stacklevel=2)
        if not 200 <= answer.status < 300:
            info = _error_info(answer.body)
            raise EngineError(
                f"OpenSearch {method} {path} failed ({answer.status}): {error_reason(info)}",
                status=answer.status,
                info=info,
            )
        return codec.decode(answer.body) if answer.body else None

    def _head(self, path: str, params: Mapping[str, Any] | None, timeout: float) -> Any:
        try:
            found = self._client.transport.perform_request(
                "HEAD", path, params=dict(params or {}), timeout=timeout
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
                f"OpenSearch HEAD {path} failed ({status}): {error_reason(error.info)}",
                status=status,
                info=error.info,
            ) from error
        if not found:
            raise EngineError(f"OpenSearch HEAD {path}: not found", status=404)
        return found

    def close(self) -> None:
        self._client.close()


def _error_info(body: bytes) -> Any:
    """An error answer's body: its JSON, else its text."""
    try:
        return codec.decode(body)
    except ValueError:
        return body.decode("utf-8", "replace")
