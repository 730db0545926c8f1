"""The engine interface, written once over the REST paths both engines share."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal
from urllib.parse import quote

EngineKind = Literal["opensearch", "elasticsearch"]


class EngineError(Exception):
    """The engine answered with an error, or could not be asked."""

    code = "engine_error"
    """the API error code this failure is reported with"""

    def __init__(self, message: str, *, status: int | None = None, info: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.info = info


class EngineUnavailable(EngineError):
    """The engine could not be reached."""

    code = "engine_unavailable"


class EnginePartialResults(EngineError):
    """Some shards failed: the answer would lack what they hold (policies, products)."""

    code = "engine_partial_results"


class EngineTimeout(EngineUnavailable):
    """The engine did not answer within the configured timeout."""

    code = "engine_timeout"


_REQUESTS: ContextVar[list[int] | None] = ContextVar("govsearch_engine_requests", default=None)
"""the engine requests counter of the current context (see :func:`counted_requests`)"""


@contextmanager
def counted_requests() -> Iterator[list[int]]:
    """Count the engine round trips made in this context while the block runs (threads
    that run a copy of the context, such as the service's purchases lookup, count too):
    yields a one-element list holding the count."""
    count = [0]
    token = _REQUESTS.set(count)
    try:
        yield count
    finally:
        _REQUESTS.reset(token)


def note_request() -> None:
    """One engine round trip is being sent (each adapter's ``request`` calls this)."""
    count = _REQUESTS.get()
    if count is not None:
        count[0] += 1


def _path(*parts: str) -> str:
    return "/" + "/".join(quote(p, safe=",*") for p in parts)


class Engine(ABC):
    """One search engine cluster. Every call carries ``timeout_s``."""

    kind: EngineKind

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s

    @abstractmethod
    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one REST request; return the decoded JSON body or raise EngineError."""

    @abstractmethod
    def close(self) -> None: ...

    # --- cluster ----------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", "/")
        return result

    def health(self, wait_for_status: str | None = None) -> dict[str, Any]:
        params = {"wait_for_status": wait_for_status, "timeout": "30s"} if wait_for_status else None
        result: dict[str, Any] = self.request("GET", "/_cluster/health", params=params)
        return result

    # --- indices and aliases ----------------------------------------------------

    def create_index(self, name: str, body: Mapping[str, Any]) -> None:
        """Create an index. On a cluster of several nodes, an index the body gives no
        replica gets one, so losing one node loses no shard; a single node keeps 0 (a
        replica could never be assigned there and health would stay yellow)."""
        self.request("PUT", _path(name), body=with_replicas(body, self.node_count()))

    def node_count(self) -> int:
        return int(self.health().get("number_of_nodes", 1))

    def indices_health(self, indices: Sequence[str], *, timeout_s: float) -> dict[str, Any]:
        """The cluster health restricted to ``indices`` (concrete names or aliases), asked
        with a short timeout (readiness)."""
        result: dict[str, Any] = self.request(
            "GET", _path("_cluster", "health", ",".join(indices)), timeout_s=timeout_s
        )
        return result

    def ensure_index(self, name: str, body: Mapping[str, Any]) -> None:
        """Create the index unless it exists (another process creating it meanwhile is fine)."""
        if self.index_exists(name):
            return
        try:
            self.create_index(name, body)
        except EngineError as error:
            if "already_exists" not in f"{error} {error.info}":
                raise

    def delete_index(self, name: str) -> None:
        self.request("DELETE", _path(name), params={"ignore_unavailable": "true"})

    def index_exists(self, name: str) -> bool:
        try:
            self.request("HEAD", _path(name))
        except EngineError as error:
            if error.status == 404:
                return False
            raise
        return True

    def refresh(self, index: str) -> None:
        self.request("POST", _path(index, "_refresh"))

    def alias_targets(self, alias: str) -> list[str]:
        """The indices an alias points to (empty when the alias does not exist)."""
        try:
            result = self.request("GET", _path("_alias", alias))
        except EngineError as error:
            if error.status == 404:
                return []
            raise
        return sorted(result)

    def update_aliases(self, actions: Sequence[Mapping[str, Any]]) -> None:
        """Apply alias actions atomically (one ``_aliases`` call)."""
        self.request("POST", "/_aliases", body={"actions": list(actions)})

    def list_indices(self, pattern: str) -> list[str]:
        result = self.request(
            "GET", _path("_cat", "indices", pattern), params={"format": "json", "h": "index"}
        )
        return sorted(row["index"] for row in result)

    # --- documents --------------------------------------------------------------

    def index_document(
        self, index: str, doc_id: str, document: Mapping[str, Any], *, refresh: bool = False
    ) -> None:
        params = {"refresh": "true"} if refresh else None
        self.request("PUT", _path(index, "_doc", doc_id), body=document, params=params)

    def get_document(
        self, index: str, doc_id: str, *, source: Sequence[str] | None = None
    ) -> dict[str, Any] | None:
        """The document, or None; ``source``: only these fields of its ``_source``."""
        params = {"_source_includes": ",".join(source)} if source is not None else None
        try:
            result: dict[str, Any] = self.request("GET", _path(index, "_doc", doc_id), params=params)
        except EngineError as error:
            if error.status == 404:
                return None
            raise
        return result

    def bulk(
        self, operations: Iterable[Mapping[str, Any]], *, refresh: bool = False
    ) -> dict[str, Any]:
        """Send NDJSON bulk operations (action and source lines, in order)."""
        payload = "".join(json.dumps(op, ensure_ascii=False) + "\n" for op in operations)
        params = {"refresh": "true"} if refresh else None
        result: dict[str, Any] = self.request("POST", "/_bulk", body=payload, params=params)
        return result

    # --- queries ----------------------------------------------------------------

    def search(
        self, index: str, body: Mapping[str, Any], *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """A search; partial results (a failed shard) raise: a percolation missing a shard
        would miss policies, so the caller fails closed instead of serving less governance."""
        result: dict[str, Any] = self.request(
            "POST", _path(index, "_search"), body=body, timeout_s=timeout_s
        )
        _complete(result, f"search on {index}")
        return result

    def msearch(
        self, searches: Sequence[tuple[str, Mapping[str, Any] | str]]
    ) -> list[dict[str, Any]]:
        """Run several searches in one round trip; each answer, or raise on the first item
        that failed or that lacks a shard (partial results fail closed, as in :meth:`search`).
        A body may be given already serialised (one line of JSON text): it is sent as is."""
        return msearch_responses(searches, self.msearch_answers(searches))

    def msearch_answers(
        self, searches: Sequence[tuple[str, Mapping[str, Any] | str]]
    ) -> list[dict[str, Any]]:
        """The answers of an ``_msearch`` as the engine gave them, failed items included, for
        a caller that checks the ones it uses (:func:`msearch_responses`): a speculated miss
        checks its percolation first, and its tiers only when it serves them (ADR 0049)."""
        result = self.request("POST", "/_msearch", body=msearch_lines(searches))
        answers: list[dict[str, Any]] = result["responses"]
        return answers

    def percolate(
        self,
        index: str,
        document: Mapping[str, Any],
        *,
        field: str = "query",
        filters: Sequence[Mapping[str, Any]] = (),
        highlight: Mapping[str, Any] | None = None,
        size: int = 1000,
        source: Sequence[str] | bool = True,
    ) -> dict[str, Any]:
        """Which stored queries match ``document``? One request, filtered, highlighted."""
        body: dict[str, Any] = {
            "size": size,
            "query": {
                "bool": {
                    "must": [{"percolate": {"field": field, "document": dict(document)}}],
                    "filter": list(filters),
                }
            },
            "_source": source,
            "track_total_hits": True,
        }
        if highlight:
            body["highlight"] = dict(highlight)
        return self.search(index, body)

    def validate_query(self, index: str, query: Mapping[str, Any]) -> tuple[bool, str]:
        """Ask the engine whether a query is valid; returns (valid, explanation)."""
        result = self.request(
            "POST",
            _path(index, "_validate", "query"),
            body={"query": query},
            params={"explain": "true"},
        )
        explanations = result.get("explanations") or [{}]
        detail = (
            explanations[0].get("error")
            or result.get("error")
            or explanations[0].get("explanation")
            or ""
        )
        return bool(result.get("valid")), str(detail)

    def analyze(self, index: str, analyzer: str, text: str) -> list[dict[str, Any]]:
        result = self.request(
            "POST", _path(index, "_analyze"), body={"analyzer": analyzer, "text": text}
        )
        tokens: list[dict[str, Any]] = result["tokens"]
        return tokens


def msearch_lines(searches: Sequence[tuple[str, Mapping[str, Any] | str]]) -> str:
    """The NDJSON body of an ``_msearch``: a header line naming the index, then the body
    (sent as is when it is given as text), for each search."""
    lines = []
    for index, body in searches:
        lines.append(json.dumps({"index": index}))
        lines.append(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def msearch_responses(
    searches: Sequence[tuple[str, Any]], responses: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The answers of an ``_msearch``'s ``searches``, in order; raise on the first item that
    failed or that lacks a shard (partial results fail closed)."""
    for (index, _), response in zip(searches, responses, strict=True):
        if "error" in response:
            raise EngineError(
                f"msearch item failed: {_reason(response['error'])}",
                status=response.get("status"),
                info=response["error"],
            )
        _complete(response, f"msearch item on {index}")
    return list(responses)


def with_replicas(body: Mapping[str, Any], nodes: int) -> dict[str, Any]:
    """``body`` with ``number_of_replicas`` raised to 1 when ``nodes`` > 1 (an explicit
    count above that is kept)."""
    settings = dict(body.get("settings") or {})
    nested = dict(settings.get("index") or {})
    given = settings.pop("number_of_replicas", None)
    given = settings.pop("index.number_of_replicas", given)
    given = nested.pop("number_of_replicas", given)
    if nested:
        settings["index"] = nested
    elif "index" in settings:
        del settings["index"]
    replicas = max(int(given or 0), 1 if nodes > 1 else 0)
    settings["number_of_replicas"] = replicas
    return {**body, "settings": settings}


def _complete(result: Mapping[str, Any], what: str) -> None:
    """Raise EnginePartialResults when a shard failed answering ``result``."""
    shards = result.get("_shards") or {}
    if shards.get("failed"):
        raise EnginePartialResults(
            f"{what}: {shards['failed']} of {shards.get('total')} shards failed:"
            f" {_reason((shards.get('failures') or [{}])[0].get('reason'))}",
            status=503,
            info=shards.get("failures"),
        )


def _reason(error: Any) -> str:
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        return f"{root.get('type', 'error')}: {root.get('reason', '')}".strip()
    return str(error)


def error_reason(info: Any) -> str:
    """A one-line reason from an engine error body."""
    if isinstance(info, dict) and "error" in info:
        return _reason(info["error"])
    return _reason(info)
