"""Audit fixtures: an app over the real engine whose recorder writes to ``tmp_path``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.keys import KeyRing, read_key_file
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.telemetry import Telemetry
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.e2e.conftest import ready, service, settings  # noqa: F401

MakeClient = Callable[..., tuple[TestClient, Recorder]]


TEST_KEY = "test-1:" + "s" * 40
"""a test key ring line: KEY_ID:SECRET"""


def write_keys(directory: Path, *lines: str) -> tuple[Path, KeyRing]:
    """A key file in ``directory`` (``audit.key`` there) with ``lines`` (default: TEST_KEY)."""
    file = directory / "audit.key"
    file.write_text("".join(f"{line}\n" for line in lines or (TEST_KEY,)))
    return file, read_key_file(file)


def jsonl_recorder(directory: Path, **options: object) -> Recorder:
    """A recorder writing ``decisions.jsonl``/``events.jsonl`` in ``directory``, sealed with
    the key of ``directory/audit.key`` (created with TEST_KEY), checkpoints beside the log."""
    key_file = directory / "audit.key"
    keys = read_key_file(key_file) if key_file.is_file() else write_keys(directory)[1]
    chained: dict[str, object] = {
        "instance_id": "test-writer",
        "keys": keys,
        "checkpoints": FileCheckpoints(directory / "checkpoints.jsonl"),
        **options,
    }
    return Recorder(
        JsonlSink(directory / "decisions.jsonl"),
        JsonlSink(directory / "events.jsonl"),
        clock=FIXED_CLOCK,
        **chained,  # type: ignore[arg-type]
    )


@pytest.fixture()
def make_client(
    tmp_path: Path,
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
) -> Iterator[MakeClient]:
    services: list[SearchService] = []
    clients: list[TestClient] = []

    def make(
        store_raw_intent: bool = True, telemetry: Telemetry | None = None, engine_: Engine | None = None
    ) -> tuple[TestClient, Recorder]:
        recorder = jsonl_recorder(tmp_path, store_raw_intent=store_raw_intent, telemetry=telemetry)
        svc = SearchService(settings, engine_ or engine, profile_of(settings), recorder=recorder)
        services.append(svc)
        app = create_app(svc, clock=FIXED_CLOCK)
        client = TestClient(app, raise_server_exceptions=False)
        keys = getattr(app.state, "keys", None)
        if keys is not None and engine_ is None:  # API keys: the audit API needs the auditor role
            key, _ = keys.create("test-auditor", ["auditor"], FIXED_NOW)
            client.headers["Authorization"] = f"Bearer {key}"
        clients.append(client)
        return client, recorder

    yield make
    for client in clients:
        client.close()
    for svc in services:
        svc.close()


@pytest.fixture()
def audit_file(tmp_path: Path) -> Path:
    return tmp_path / "decisions.jsonl"
