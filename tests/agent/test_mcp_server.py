"""The MCP server over stdio, driven by the official ``mcp`` client."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from control_plane.bootstrap import Ready
from tests.agent.conftest import ROOT

pytestmark = pytest.mark.engine


async def _session(engine_url: str, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "agent_gateway.mcp_server"],
        env={**os.environ, "GOVSEARCH_ENGINE_URL": engine_url, "GOVSEARCH_ENGINE_TIMEOUT": "30"},
        cwd=str(ROOT),
    )
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            results = [await session.call_tool(name, arguments) for name, arguments in calls]
            return tools, results


def test_search_products_over_stdio(engine_url: str, ready: Ready) -> None:
    tools, (found, refused) = anyio.run(
        _session,
        engine_url,
        [
            ("search_products", {"intent": "cheap chocolate", "cohorts": ["vegan"]}),
            ("search_products", {"intent": '{"query": {"match_all": {}}}'}),
        ],
    )
    (tool,) = tools.tools
    assert tool.name == "search_products"
    assert set(tool.input_schema["properties"]) == {"intent", "user_id", "cohorts"}
    result = found.structured_content
    assert not found.is_error and result["status"] == "ok" and result["intent"] == "cheap chocolate"
    assert [p["citation"] for p in result["products"]] == list(range(1, len(result["products"]) + 1))
    assert all(p["price"] is None or p["price"] <= 4.14 + 1e-9 for p in result["products"])
    assert refused.structured_content["status"] == "abstained"
    assert "structure" in refused.structured_content["reason"]
