from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.bootstrap import Ready, prepare, profile_of
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from control_plane.times import Clock


@pytest.fixture(scope="session")
def settings(engine_url: str) -> Settings:
    return Settings(engine=EngineSettings(url=engine_url, timeout_s=30))


@pytest.fixture(scope="session")
def ready(engine: Engine, settings: Settings, clock: Clock) -> Ready:
    """The demo catalog, the demo policy set (live) and the personas, in the real engine."""
    return prepare(engine, settings, clock=clock)


@pytest.fixture(scope="session")
def service(engine: Engine, settings: Settings, ready: Ready) -> Iterator[SearchService]:
    svc = SearchService(settings, engine, profile_of(settings))
    yield svc
    svc.close()
