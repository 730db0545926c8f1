"""Drills on a dedicated single-node engine (never the shared session engine): the engine
SIGKILLed under a search load and restarted, the engine paused (SIGSTOP) and resumed
(SIGCONT), and a 1 MB body sent with chunked encoding, against a real ``govsearch serve``.

Every answer must be governed (200, a known policy set, every hit under the guard
policies) or a clean 503/504 in the JSON error shape; ``/readyz`` must say 503 while the
engine is down or red and 200 once it serves again. Figures go to
``bench/results/drills/`` (``make drills``)."""

from __future__ import annotations

import http.client
import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane import local_engine
from control_plane.bootstrap import prepare
from control_plane.config import EngineSettings, Settings
from control_plane.engine import connect
from tests.clocks import FIXED_CLOCK
from tests.drills.harness import Answer, Load, ReadinessWatch, Served, readyz, serve, wait_until
from tests.drills.harness import free_engine_port as free_engine_port
from tests.drills.results import record

pytestmark = [pytest.mark.drill, pytest.mark.usefixtures("starts_local_engine")]

ENGINE_TIMEOUT_S = 1.0
DEADLINE_S = 2.0
HEAP = "384m"


class DedicatedEngine:
    def __init__(self, directory: Path) -> None:
        self.port = free_engine_port(1)
        self.directory = directory
        self.cluster = f"govsearch-drill-{uuid.uuid4().hex[:8]}"
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> local_engine.NodeState:
        return local_engine.start(
            port=self.port, data_dir=self.directory, heap=HEAP, timeout_s=240, cluster_name=self.cluster
        )

    @property
    def pid(self) -> int:
        state = local_engine.read_state(self.directory)
        assert state is not None
        return state.pid


@pytest.fixture(scope="module")
def dedicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DedicatedEngine, Served, str]]:
    """Its own engine with the demo loaded, and one ``govsearch serve`` over it with a short
    engine timeout and request deadline."""
    workdir = tmp_path_factory.mktemp("drill-engine")
    engine = DedicatedEngine(workdir / "engine")
    engine.start()
    try:
        client = connect(EngineSettings(url=engine.url, timeout_s=30))
        version = prepare(client, Settings(engine=EngineSettings(url=engine.url)), clock=FIXED_CLOCK)
        client.close()
        served = serve(
            engine.url,
            workdir,
            "instance",
            GOVSEARCH_ENGINE_TIMEOUT=str(ENGINE_TIMEOUT_S),
            GOVSEARCH_REQUEST_DEADLINE=str(DEADLINE_S),
        )
        try:
            yield engine, served, version.policy_set_version
        finally:
            served.stop()
    finally:
        local_engine.stop(engine.directory)


SLOW = {"engine_timeout", "deadline_exceeded"}
"""refusals a slow (not a broken) engine gives: on a loaded machine a resumed engine can
still be slow after /readyz said 200; anything else after it would mean readiness lied"""


def _assert_clean(load: Load) -> None:
    violations = load.violations()
    assert not violations, f"{len(violations)} violations, first: {violations[0]}"


def _assert_ready_meant_serving(after_ready: list[Answer], figures: dict[str, object]) -> None:
    assert any(a.kind == "governed" for a in after_ready), figures
    lies = [a for a in after_ready if a.kind == "refused" and a.code not in SLOW]
    assert not lies, f"refused after /readyz said 200: {lies[0]}"


def _after_ready_figures(after_ready: list[Answer]) -> dict[str, object]:
    return {
        "answers_after_ready": len(after_ready),
        "governed_after_ready": sum(a.kind == "governed" for a in after_ready),
        "refused_after_ready": dict(Counter(a.code for a in after_ready if a.kind == "refused")),
    }


def test_a_chunked_1mb_body_is_refused_with_413(dedicated: tuple[DedicatedEngine, Served, str]) -> None:
    """Over a real socket: no Content-Length, 1 MB in 64 KiB chunks."""
    _, served, _ = dedicated
    host, port = served.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", "/v1/search")
    connection.putheader("content-type", "application/json")
    connection.putheader("transfer-encoding", "chunked")
    connection.endheaders()
    sent = 0
    try:
        for chunk in [b'{"intent": "', *[b"a" * 65_536] * 16, b'"}']:
            connection.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
        connection.send(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):  # the server may answer and close early
        pass
    response = connection.getresponse()
    body = response.read()
    connection.close()
    assert response.status == 413
    error = httpx.Response(413, content=body).json()["error"]
    assert error["code"] == "request_too_large" and error["request_id"]
    record("chunked_body", {"sent_bytes": sent, "status": response.status, "code": error["code"]})


def test_engine_paused_with_sigstop(dedicated: tuple[DedicatedEngine, Served, str]) -> None:
    engine, served, version = dedicated
    assert wait_until(lambda: readyz(served.url) == 200, 60) is not None
    load = Load({"instance": served.url}, threads=3, versions={version}).start()
    watch = ReadinessWatch(served.url).start()
    try:
        time.sleep(2)
        paused_at = time.monotonic()
        os.kill(engine.pid, signal.SIGSTOP)
        try:
            went_unready = wait_until(lambda: watch.first(503, paused_at) is not None, 30)
            time.sleep(2 * DEADLINE_S)  # requests that are cut by the deadline while paused
        finally:
            os.kill(engine.pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        recovered = wait_until(lambda: watch.first(200, resumed_at) is not None, 60)
        ready_at = watch.first(200, resumed_at)
        time.sleep(2)
    finally:
        load.stop()
        watch.stop()
    _assert_clean(load)
    during = [a for a in load.answers if paused_at + 0.5 < a.started < resumed_at - DEADLINE_S]
    after_ready = load.since(ready_at) if ready_at is not None else []
    figures = {
        **load.figures(),
        "engine_timeout_s": ENGINE_TIMEOUT_S,
        "request_deadline_s": DEADLINE_S,
        "paused_s": round(resumed_at - paused_at, 3),
        "readyz_503_after_pause_s": round(went_unready, 3) if went_unready is not None else None,
        "recovery_s": round(recovered, 3) if recovered is not None else None,
        "answers_while_paused": len(during),
        "refused_while_paused": sum(a.kind == "refused" for a in during),
        "max_latency_while_paused_s": round(max((a.latency_s for a in during), default=0.0), 3),
        **_after_ready_figures(after_ready),
    }
    record("engine_paused", figures)
    assert went_unready is not None, "readyz never said 503 while the engine was paused"
    assert during and all(a.kind == "refused" for a in during), figures
    assert recovered is not None, "readyz never came back to 200 after SIGCONT"
    _assert_ready_meant_serving(after_ready, figures)


def test_engine_killed_under_load_and_restarted(dedicated: tuple[DedicatedEngine, Served, str]) -> None:
    engine, served, version = dedicated
    assert wait_until(lambda: readyz(served.url) == 200, 60) is not None
    load = Load({"instance": served.url}, threads=3, versions={version}).start()
    watch = ReadinessWatch(served.url).start()
    try:
        time.sleep(2)
        killed_at = time.monotonic()
        os.kill(engine.pid, signal.SIGKILL)
        went_unready = wait_until(lambda: watch.first(503, killed_at) is not None, 30)
        time.sleep(1)
        restarted_at = time.monotonic()
        engine.start()
        engine_up_s = time.monotonic() - restarted_at
        came_back = wait_until(lambda: watch.first(200, restarted_at) is not None, 120)
        ready_at = watch.first(200, restarted_at)
        recovered = ready_at - restarted_at if came_back is not None and ready_at else None
        time.sleep(2)
    finally:
        load.stop()
        watch.stop()
    _assert_clean(load)
    down = [a for a in load.answers if killed_at + 0.5 < a.started < restarted_at]
    after_ready = load.since(ready_at) if ready_at is not None else []
    figures = {
        **load.figures(),
        "readyz_503_after_kill_s": round(went_unready, 3) if went_unready is not None else None,
        "engine_restart_s": round(engine_up_s, 3),
        "recovery_after_restart_s": round(recovered, 3) if recovered is not None else None,
        "unready_s": round(ready_at - killed_at, 3) if ready_at is not None else None,
        "answers_while_down": len(down),
        "refused_while_down": sum(a.kind == "refused" for a in down),
        **_after_ready_figures(after_ready),
    }
    record("engine_killed", figures)
    assert went_unready is not None, "readyz never said 503 after the engine was killed"
    assert down and all(a.kind == "refused" for a in down), figures
    assert recovered is not None, "readyz never came back to 200 after the restart"
    _assert_ready_meant_serving(after_ready, figures)
