"""An MCP server exposing one tool, ``search_products(intent, user_id?, cohorts?)``.

The tool's signature is the air gap: an agent can hand over an intent string and an
identity, nothing else -- no field, filter, price or DSL. The intent goes through the same
validation as extracted intents (:func:`validate_intent`) and then the governed pipeline.

    python -m agent_gateway.mcp_server                  # stdio
    python -m agent_gateway.mcp_server --http --port N  # streamable HTTP on 127.0.0.1:N/mcp
    python -m agent_gateway.mcp_server --now 2026-12-10T12:00:00Z   # every call at that instant

The engine and policies come from the usual configuration (``govsearch.yaml``,
``GOVSEARCH_*``); the engine is first contacted when the tool is called.
"""

from __future__ import annotations

import argparse
import re
import threading
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field, ValidationError

from agent_gateway.abstention import abstain_mode, understood_by
from agent_gateway.answer import cards_of, deterministic_answer
from agent_gateway.gateway import governed_search
from agent_gateway.guardrails import normalisation_flags
from agent_gateway.intent_validation import validate_intent
from agent_gateway.language import language_of
from agent_gateway.settings import GatewaySettings, gateway_settings
from control_plane.audit.record import Extraction
from control_plane.audit.recorder import AgentTurn, Recorder, default_writer_id, error_of
from control_plane.bootstrap import profile_of
from control_plane.config import load_settings
from control_plane.engine import connect
from control_plane.service import IDENTIFIER, SearchRequest, SearchService
from control_plane.times import Clock, parse_time, system_clock

MCP_CLIENT = "mcp"

TOOL_DESCRIPTION = (
    "Search the shop's catalog. Pass the shopper's intent as a short phrase in their own words "
    "(for example 'cheap chocolate' or 'chocolat sans arachide'); merchandising and safety "
    "policies are applied by the shop. Cite products by their citation number."
)


class Product(BaseModel):
    citation: int
    product_id: str
    title: str | None
    brand: str | None
    price: float | None
    display: dict[str, Any] = Field(
        default_factory=dict, description="the catalog profile's display fields of the product"
    )


class SearchProductsResult(BaseModel):
    request_id: str
    status: Literal["ok", "no_results", "abstained"]
    reason: str | None = None
    intent: str | None
    policy_set_version: str | None = None
    total: int = 0
    products: list[Product] = []
    answer: str


class ServiceHolder:
    """The search service and its audit recorder, built on first use (the server starts
    without an engine). The recorder writes to the configured sink under its own chain,
    ``<instance id>-mcp`` (``<host>:<pid>:<random>-mcp`` by default, one chain per process),
    since this is a separate writer from the HTTP API; ``close`` writes its shutdown checkpoint."""

    def __init__(self, clock: Clock, at: datetime | None = None, catalog: str | None = None) -> None:
        self.catalog = catalog
        """the named catalog to search (``--catalog``; None: ``GOVSEARCH_CATALOG`` or the default)"""
        self.clock = clock
        """each tool call's record time, and its instant unless ``at`` is given"""
        self.at = at
        """evaluate every call at this instant instead (``--now``: previews, tests)"""
        self._service: SearchService | None = None
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """The instant a tool call is evaluated at."""
        return self.at or self.clock()

    def get(self) -> SearchService:
        with self._lock:
            if self._service is None:
                settings = load_settings(catalog=self.catalog)
                writer = f"{settings.audit.instance_id or default_writer_id()}-mcp"
                audit = settings.audit.model_copy(update={"instance_id": writer})
                engine = connect(settings.engine)
                recorder = Recorder.from_settings(
                    settings.model_copy(update={"audit": audit}), engine, clock=self.clock
                )
                self._service = SearchService(settings, engine, profile_of(settings), recorder=recorder)
            return self._service

    def close(self) -> None:
        """Seal the recorder's chain with its shutdown checkpoint (if a call ever built it)."""
        with self._lock:
            if self._service is not None and self._service.recorder is not None:
                self._service.recorder.close()


def search_products_sync(service: SearchService, gateway: GatewaySettings, intent: str,
                         user_id: str | None = None, cohorts: Sequence[str] = (), *,
                         now: datetime) -> SearchProductsResult:
    """One tool call, evaluated at ``now``, with its one decision record."""
    rid = uuid.uuid4().hex
    recorder = service.recorder
    safe_user = user_id if user_id and re.match(IDENTIFIER, user_id) else None
    turn = AgentTurn(client=MCP_CLIENT, user_id=safe_user, extraction=Extraction(method="mcp"))

    def record(status: str, **kwargs: Any) -> None:
        if recorder is not None:
            recorder.agent(rid, turn, status=status, endpoint="mcp", now=now, **kwargs)

    verdict = validate_intent(intent, max_chars=gateway.max_intent_chars)
    if verdict.normalisation is not None and (flags := normalisation_flags(verdict.normalisation)):
        turn = replace(turn, extraction=Extraction(method="mcp", flags=list(flags)))
    if verdict.intent is None:
        reason = f"intent refused: {verdict.reason}"
        turn = replace(turn, reason=reason)
        record("abstained")
        return SearchProductsResult(request_id=rid, status="abstained", reason=reason, intent=None,
                                    answer=f"I can't search for that: {reason}.")
    turn = replace(turn, intent=verdict.intent)
    try:
        request = SearchRequest(intent=verdict.intent, user_id=user_id, cohorts=tuple(cohorts))
    except ValidationError as error:
        reason = "invalid arguments: " + "; ".join(e["msg"] for e in error.errors())
        turn = replace(turn, reason=reason)
        record("abstained")
        return SearchProductsResult(request_id=rid, status="abstained", reason=reason, intent=verdict.intent,
                                    answer=f"I can't search for that: {reason}.")
    turn = replace(turn, cohorts=request.cohorts)
    mode = abstain_mode(gateway, service.settings.search.require_policy_match)
    try:
        governed = governed_search(service, request, abstain=mode, now=now)
    except Exception as failure:
        record("error", error=error_of(failure))
        raise
    if governed.outcome is None:
        turn = replace(turn, reason=governed.abstained,
                       reason_code=governed.abstention.code if governed.abstention else None)
        record("abstained", compiled=governed.compiled)
        return SearchProductsResult(request_id=rid, status="abstained", reason=governed.abstained,
                                    intent=verdict.intent,
                                    answer=f"I can't answer this: {governed.abstained}.")
    record(governed.outcome.execution.status, outcome=governed.outcome)
    from control_plane.api.answer import search_response

    search = search_response(rid, request, governed.outcome, service.profile)
    cards = cards_of(search.hits, gateway.answer_products)
    return SearchProductsResult(
        request_id=rid,
        status=search.status,
        reason=search.reason,
        intent=verdict.intent,
        policy_set_version=search.policy_set_version,
        total=search.total,
        products=[Product(citation=c.citation, product_id=c.product_id, title=c.title, brand=c.brand,
                          price=c.price, display=search.hits[c.citation - 1].display) for c in cards],
        answer=deterministic_answer(verdict.intent, cards, search.total, language_of(verdict.intent),
                                    understood=bool(understood_by(governed.outcome.compiled))).text,
    )


def build_server(holder: ServiceHolder, gateway: GatewaySettings | None = None) -> MCPServer:
    settings = gateway or gateway_settings()
    server: MCPServer = MCPServer(name="govsearch", instructions=TOOL_DESCRIPTION)

    @server.tool(description=TOOL_DESCRIPTION)
    async def search_products(intent: str, user_id: str | None = None,
                              cohorts: list[str] | None = None) -> SearchProductsResult:
        return await anyio.to_thread.run_sync(
            lambda: search_products_sync(
                holder.get(), settings, intent, user_id, cohorts or (), now=holder.now()
            )
        )

    return server


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m agent_gateway.mcp_server", description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--catalog", metavar="NAME", help="the named catalog to search (default:"
                        " GOVSEARCH_CATALOG, else the configuration's default)")
    parser.add_argument(
        "--now", help="evaluate every tool call at this ISO instant instead of the wall clock"
        " (previews, tests); records keep their real time",
    )
    args = parser.parse_args(argv)
    try:
        at = parse_time(args.now) if args.now else None
    except ValueError:
        parser.error(f"--now: not an ISO 8601 time: {args.now!r}")
    if args.http and load_settings().auth.search_requires_key:
        parser.error(
            "auth.search_requires_key is on, but the MCP tool takes no API key:"
            " serve it over stdio (the agent host's process boundary is its access control)"
        )
    holder = ServiceHolder(system_clock, at, args.catalog)
    server = build_server(holder)
    try:
        if args.http:
            server.run("streamable-http", host=args.host, port=args.port)
        else:
            server.run("stdio")
    finally:
        holder.close()


if __name__ == "__main__":
    main()
