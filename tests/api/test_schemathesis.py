"""schemathesis against the served OpenAPI document: every operation, with no key and with
an admin key, on a real app (uvicorn on an ephemeral port) over the real engine; no answer
may be a 5xx (``not_a_server_error``), and every answer's status must be one the document
declares for its operation (``status_code_conformance``: each route lists the errors it can
answer, docs/api.md). The engine and the model are up here, so not even
the documented fail-closed 503s are expected.

The operations come from the document the app serves (built from the same code at import
time, no engine needed; the ``served`` fixture checks it is byte for byte what
``/openapi.json`` answers). Bounded and reproducible: ``GOVSEARCH_FUZZ_EXAMPLES`` examples
per operation (default 10), derandomized, so CI sends the same requests every run; raise it
and set ``GOVSEARCH_FUZZ_RANDOM=1`` to look further. The admin key works on a policies
prefix, keys index and audit log of its own, so what it writes (apply, promote, rollback,
disable) touches nothing outside this module. ``make fuzz-api`` runs this file.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings

from control_plane.api import create_app
from control_plane.api.openapi import openapi_schema
from control_plane.bootstrap import Ready, profile_of, publish_policies
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.lifecycle.keys import KeyStore
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.lifecycle.conftest import isolated_settings

EXAMPLES = int(os.environ.get("GOVSEARCH_FUZZ_EXAMPLES", "10"))
DERANDOMIZE = os.environ.get("GOVSEARCH_FUZZ_RANDOM") != "1"
DOCUMENT = openapi_schema()

pytestmark = pytest.mark.fuzz
schema = schemathesis.openapi.from_dict(DOCUMENT)


@pytest.fixture(scope="module")
def served(
    engine: Engine, settings: Settings, ready: Ready,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str]]]:
    """The app over settings of its own, served over HTTP; an admin key for it."""
    prefix = f"gstest-fuzz-{uuid.uuid4().hex[:8]}"
    local = isolated_settings(settings, prefix, tmp_path_factory.mktemp("fuzz"))
    publish_policies(engine, local, "policies", "live", clock=FIXED_CLOCK)
    admin, _ = KeyStore(engine, local.auth.keys_index).create("fuzz-admin", ["admin"], FIXED_NOW)
    service = SearchService(local, engine, profile_of(local))
    app = create_app(service, clock=FIXED_CLOCK)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.05)
    try:
        assert httpx.get(f"{url}/openapi.json").json() == DOCUMENT  # the served document
        yield url, {"authorization": f"Bearer {admin}"}
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
        service.close()
        for name in engine.list_indices(prefix + "*"):
            engine.delete_index(name)


@schema.parametrize()
@hypothesis_settings(
    max_examples=EXAMPLES,
    derandomize=DERANDOMIZE,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_a_server_error(
    case: schemathesis.Case, served: tuple[str, dict[str, str]]
) -> None:
    url, admin = served
    for headers in ({}, admin):  # no key (401s, open routes), then the admin key (every route)
        case.call_and_validate(
            base_url=url, headers=headers,
            checks=[schemathesis.checks.not_a_server_error, schemathesis.checks.status_code_conformance],
        )
