"""Session fixtures.

The engine is real: ``GOVSEARCH_ENGINE_URL`` if set, else an Elasticsearch testcontainer
when a Docker daemon answers, else the local OpenSearch node (started for the session on
port 9250 when not already up, and stopped afterwards). Every test that needs an engine is
marked ``engine`` here, from the fixtures it uses (:data:`ENGINE_FIXTURES`), so
``pytest -m "not engine"`` (``make test-unit``) never starts one.

Time is an input: :data:`FIXED_NOW` is the instant of every shared fixture (the ``clock``
fixture; the apps, recorders, workflows and gateways the fixtures build), so no test passes
or fails with the date it runs on. A test about "now" pins its own instant, or says that it
reads the wall clock (``system_clock``). ``GOVSEARCH_TEST_TRAVEL=2026-12-25T12:00:00Z``
moves the process's wall clock to that instant for the whole session (``time-machine``):
``make test-clocks`` runs the suite so to prove that nothing left reads it unpinned.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane import local_engine
from control_plane.config import EngineSettings
from control_plane.engine import Engine, connect
from control_plane.times import Clock, parse_time
from tests.clocks import FIXED_CLOCK, FIXED_NOW

ROOT = Path(__file__).resolve().parent.parent
TEST_ENGINE_PORT = int(os.environ.get("GOVSEARCH_TEST_ENGINE_PORT", "9250"))
TEST_ENGINE_DIR = ROOT / ".govsearch" / f"test-engine-{TEST_ENGINE_PORT}"

ENGINE_FIXTURES = frozenset({"engine_url", "starts_local_engine"})
"""Using one of these (directly or through another fixture) makes a test an ``engine`` test."""

TRAVEL = os.environ.get("GOVSEARCH_TEST_TRAVEL")
_TRAVELLER = pytest.StashKey[object]()


def pytest_configure(config: pytest.Config) -> None:
    if TRAVEL:
        import time_machine

        traveller = time_machine.travel(parse_time(TRAVEL), tick=True)
        traveller.start()
        config.stash[_TRAVELLER] = traveller


def pytest_unconfigure(config: pytest.Config) -> None:
    traveller = config.stash.get(_TRAVELLER, None)
    if traveller is not None:
        traveller.stop()


def pytest_report_header(config: pytest.Config) -> str:
    travel = f"; wall clock moved to {TRAVEL}" if TRAVEL else ""
    return f"govsearch: fixtures at {FIXED_NOW.isoformat()}{travel}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.engine)


@pytest.fixture(scope="session")
def clock() -> Clock:
    """Every shared fixture's clock: always :data:`~tests.clocks.FIXED_NOW`."""
    return FIXED_CLOCK


@pytest.fixture(scope="session")
def starts_local_engine() -> None:
    """Declares that a test starts local engine nodes of its own (through the CLI)."""


def _docker_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="session")
def engine_url() -> Iterator[str]:
    if os.environ.get("GOVSEARCH_ENGINE_URL"):
        yield os.environ["GOVSEARCH_ENGINE_URL"]
        return
    if _docker_answers():
        from testcontainers.elasticsearch import ElasticSearchContainer

        with ElasticSearchContainer(
            "docker.elastic.co/elasticsearch/elasticsearch:8.15.3", mem_limit="1g"
        ) as es:
            yield es.get_url()
        return
    url = f"http://127.0.0.1:{TEST_ENGINE_PORT}"
    started = False
    if local_engine.probe(url) is None:
        local_engine.start(port=TEST_ENGINE_PORT, data_dir=TEST_ENGINE_DIR, heap="512m")
        started = True
    yield url
    if started:
        local_engine.stop(TEST_ENGINE_DIR)


@pytest.fixture(scope="session")
def engine(engine_url: str) -> Iterator[Engine]:
    client = connect(EngineSettings(url=engine_url, timeout_s=30))
    yield client
    client.close()


@pytest.fixture()
def index_prefix(engine: Engine) -> Iterator[str]:
    """A unique index-name prefix for one test; its indices are deleted afterwards."""
    prefix = f"gstest-{uuid.uuid4().hex[:10]}"
    yield prefix
    for name in engine.list_indices(prefix + "*"):
        engine.delete_index(name)
