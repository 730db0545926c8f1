from __future__ import annotations

from collections.abc import Iterator

import pytest

from control_plane.bootstrap import Ready, prepare, profile_of
from control_plane.config import AuditSettings, EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from control_plane.times import Clock


@pytest.fixture(scope="session")
def settings(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The real engine; the audit log, its checkpoints and its key in the session's temporary
    directory (never the checkout's ``.govsearch/``, which the demo's log lives in)."""
    audit = tmp_path_factory.mktemp("audit")
    return Settings(
        engine=EngineSettings(url=engine_url, timeout_s=30),
        audit=AuditSettings(path=str(audit / "decisions.jsonl"), key_file=str(audit / "audit.key")),
    )


@pytest.fixture(scope="session")
def ready(engine: Engine, settings: Settings, clock: Clock) -> Ready:
    """The demo catalog, the demo policy set (live) and the personas, in the real engine."""
    return prepare(engine, settings, clock=clock)


@pytest.fixture(scope="session")
def service(engine: Engine, settings: Settings, ready: Ready) -> Iterator[SearchService]:
    svc = SearchService(settings, engine, profile_of(settings))
    yield svc
    svc.close()
