"""Session fixtures. The engine is real: ``GOVSEARCH_ENGINE_URL`` if set, else an
Elasticsearch testcontainer when a Docker daemon answers, else the local OpenSearch node
(started for the session on port 9250 when not already up, and stopped afterwards)."""

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

ROOT = Path(__file__).resolve().parent.parent
TEST_ENGINE_PORT = int(os.environ.get("GOVSEARCH_TEST_ENGINE_PORT", "9250"))
TEST_ENGINE_DIR = ROOT / ".govsearch" / f"test-engine-{TEST_ENGINE_PORT}"


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
