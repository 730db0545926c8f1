"""Policy tests run against the real engine, on the demo catalog and policy set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.e2e.conftest import ready, service, settings  # noqa: F401


@pytest.fixture(scope="session")
def demo_service(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> Iterator[SearchService]:
    """A service pinned to the demo policy set's index, whatever other tests do to live."""
    pinned = SearchService(settings, engine, profile_of(settings), index=ready.policies_index)
    yield pinned
    pinned.close()
