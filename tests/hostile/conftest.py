"""Hostile-input fixtures: the real engine with the demo catalog and policies (the e2e
fixtures) and the agent tests' local OpenAI-compatible server."""

from __future__ import annotations

from tests.agent.conftest import fake_llm  # noqa: F401
from tests.e2e.conftest import ready, service, settings  # noqa: F401
