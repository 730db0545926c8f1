"""Elasticsearch 8.x through the official ``elasticsearch`` client, its answers decoded by
:func:`~control_plane.engine.codec.decode` (``orjson``, exactly as ``json`` decodes them;
ADR 0026). Its transport is the library's: no Elasticsearch runs on the machines this was
measured on, so the thin exchange of the OpenSearch adapter is not used here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import elastic_transport
import elasticsearch
from elasticsearch import Elasticsearch
from elasticsearch.serializer import JsonSerializer

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

_JSON = "application/vnd.elasticsearch+json; compatible-with=8"
_NDJSON = "application/vnd.elasticsearch+x-ndjson; compatible-with=8"


class DecodingSerializer(JsonSerializer):
    """The client's JSON serializer (bodies as before), answers decoded by the codec."""

    def json_loads(self, data: bytes) -> Any:
        return codec.decode(data)


class ElasticsearchEngine(Engine):
    kind = "elasticsearch"

    def __init__(self, url: str, timeout_s: float, *, connections: int = 10) -> None:
        super().__init__(url, timeout_s)
        self._client = Elasticsearch(
            url, request_timeout=timeout_s, max_retries=0, connections_per_node=connections,
            # also for the compatibility media type (the client maps it from this one)
            serializers={JsonSerializer.mimetype: DecodingSerializer()},
        )

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        content = _NDJSON if isinstance(body, (str, bytes)) else _JSON
        note_request()
        headers = {"accept": _JSON}
        if body is not None:
            headers["content-type"] = content
        client = self._client.options(
            request_timeout=deadline.call_timeout(timeout_s or self.timeout_s)
        )
        try:
            response = client.perform_request(
                method, path, params=dict(params or {}), headers=headers, body=body
            )
        except elastic_transport.ConnectionTimeout as error:
            if deadline.expired():
                raise deadline.DeadlineExceeded(
                    f"the request deadline passed waiting for Elasticsearch at {self.url}"
                ) from error
            raise EngineTimeout(f"Elasticsearch at {self.url} timed out: {error}") from error
        except elastic_transport.ConnectionError as error:
            raise EngineUnavailable(
                f"Elasticsearch at {self.url} is unreachable: {error}"
            ) from error
        except elasticsearch.ApiError as error:
            raise EngineError(
                f"Elasticsearch {method} {path} failed ({error.status_code}):"
                f" {error_reason(error.body)}",
                status=error.status_code,
                info=error.body,
            ) from error
        if method == "HEAD":
            return {}
        return response.body

    def close(self) -> None:
        self._client.close()
