"""Hostile-input fixtures: the real engine with the demo catalog and policies (the e2e
fixtures), the agent tests' local OpenAI-compatible server, and the API served in process
with its decision records in a JSONL file (:func:`recorded_app`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from control_plane.api.app import create_app
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.bootstrap import profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.agent.conftest import fake_llm  # noqa: F401
from tests.clocks import FIXED_CLOCK
from tests.e2e.conftest import ready, service, settings  # noqa: F401


@dataclass
class Recorded:
    """A client of the app :func:`recorded_app` made, and its decisions file."""

    client: TestClient
    path: Path

    def records(self, request_id: str) -> list[dict[str, Any]]:
        records = [json.loads(line) for _, line in JsonlSink(self.path).lines()]
        return [r for r in records if r["request_id"] == request_id]


def recorded_app(
    configured: Settings, engine: Engine, directory: Path, instance_id: str
) -> tuple[FastAPI, SearchService, Path]:
    """The API of ``configured`` on ``engine`` at the fixed clock, its decisions recorded
    in ``directory/decisions.jsonl`` (the app, its service and that path)."""
    path = directory / "decisions.jsonl"
    recorder = Recorder(JsonlSink(path), JsonlSink(directory / "events.jsonl"), instance_id=instance_id,
                        clock=FIXED_CLOCK)
    search = SearchService(configured, engine, profile_of(configured), recorder=recorder)
    return create_app(search, clock=FIXED_CLOCK), search, path
