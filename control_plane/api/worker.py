"""The app of one ``govsearch serve --workers N`` worker process.

uvicorn's supervisor starts N processes that share the listening socket; each imports this
factory and builds its own service, plan cache, alias watch and audit recorder, so each is
a writer of its own (default writer id: host, pid, random) and checkpoints on shutdown. The
settings come from the environment the supervisor passed on (``GOVSEARCH_CONFIG`` names the
configuration file given with ``--config``).
"""

from __future__ import annotations

from fastapi import FastAPI

from control_plane.api.app import create_app
from control_plane.api.serving import bound_client_times, lean_log_records
from control_plane.bootstrap import profile_of
from control_plane.cli_support import CLOCK, connect_engine
from control_plane.config import load_settings
from control_plane.service import SearchService


def build() -> FastAPI:
    lean_log_records()
    settings = load_settings()
    bound_client_times(settings.api)
    service = SearchService(settings, connect_engine(settings), profile_of(settings))
    return create_app(service, clock=CLOCK)
