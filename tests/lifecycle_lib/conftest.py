"""Fixtures of the lifecycle library tests: the real engine with the demo catalog and policy
set (from the e2e suite), the scripted OpenAI-compatible server (from the agent suite), and
services pinned to policy sets published under a test's own prefix (``pinning``)."""

from __future__ import annotations

from tests.agent.conftest import fake_llm  # noqa: F401
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle_lib.pinning import demo_set, pin  # noqa: F401
