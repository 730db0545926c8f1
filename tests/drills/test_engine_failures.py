"""Drills on a dedicated single-node engine (never the shared session engine): the engine
SIGKILLed under a search load and restarted, the engine paused (SIGSTOP) and resumed
(SIGCONT) under a search load and under ``/readyz`` alone, the engine answering every call
late through a relay (:mod:`tests.drills.relay`), the engine SIGKILLed in the middle of
``govsearch load-catalog``, and a 1 MB body sent with chunked encoding, against a real
``govsearch serve``.

Every answer must be governed (200, a known policy set, every hit under the guard
policies) or a clean 503/504 in the JSON error shape; ``/readyz`` must say 503 while the
engine is down or red and 200 once it serves again. Figures go to
``bench/results/drills/`` (``make drills``)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane import local_engine
from control_plane.api import readiness
from control_plane.bootstrap import prepare
from control_plane.catalog.profile import load_profile
from control_plane.cli_support import EXIT_ENGINE_UNAVAILABLE
from control_plane.config import EngineSettings, Settings
from control_plane.engine import connect
from tests.clocks import FIXED_CLOCK
from tests.drills.harness import (
    GOVSEARCH,
    ROOT,
    Answer,
    Load,
    ReadinessWatch,
    Served,
    audit_records,
    checkout_env,
    classify,
    readyz,
    serve,
    wait_until,
)
from tests.drills.harness import free_engine_port as free_engine_port
from tests.drills.relay import Relay
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


READYZ_BUDGET_S = readiness.READINESS_TIMEOUT_S
"""docs/api.md, ``GET /readyz``: the whole check has a 2 s budget, so a paused or
partitioned engine makes it answer quickly"""
READYZ_MARGIN_S = 1.5
"""the thread-pool hop and the HTTP exchange around the check, on a loaded machine"""
READYZ_ENGINE_DOWN = {"engine_timeout", "engine_unavailable"}


def _outcome(answer: httpx.Response | None) -> str:
    """``200``, ``503 engine_timeout``..., or ``none`` (no answer)."""
    if answer is None:
        return "none"
    if answer.status_code == 200:
        return "200"
    return f"{answer.status_code} {answer.json()['error']['code']}"


def test_readyz_answers_503_within_its_budget_while_the_engine_is_paused(
    dedicated: tuple[DedicatedEngine, Served, str], tmp_path: Path
) -> None:
    """``/readyz`` asked again and again while the engine is stopped (SIGSTOP: connections
    are accepted by the kernel, nothing answers): every answer is 503 in the one error shape
    with an engine code and the checks run so far, within the 2 s budget plus a margin; 200
    again once the engine is resumed. The instance keeps the default 5 s engine timeout, so
    the budget, not the per-call timeout, is what bounds the check."""
    engine, _, _ = dedicated
    served = serve(
        engine.url, tmp_path, "readyz",
        GOVSEARCH_ENGINE_TIMEOUT="5", GOVSEARCH_AUDIT_KEY_FILE=str(tmp_path / "audit.key"),
    )
    asked: list[tuple[float, httpx.Response | None]] = []
    try:
        assert wait_until(lambda: readyz(served.url) == 200, 60) is not None
        os.kill(engine.pid, signal.SIGSTOP)
        try:
            until = time.monotonic() + 3 * READYZ_BUDGET_S + 2
            while time.monotonic() < until:
                started = time.monotonic()
                try:
                    answer: httpx.Response | None = httpx.get(served.url + "/readyz", timeout=30)
                except httpx.HTTPError:
                    answer = None
                asked.append((time.monotonic() - started, answer))
        finally:
            os.kill(engine.pid, signal.SIGCONT)
        resumed = wait_until(lambda: readyz(served.url) == 200, 60)
    finally:
        served.stop()
    figures = {
        "budget_s": READYZ_BUDGET_S,
        "asked_while_paused": len(asked),
        "answers": dict(Counter(_outcome(a) for _, a in asked)),
        "max_latency_s": round(max((latency for latency, _ in asked), default=0.0), 3),
        "ready_again_after_resume_s": round(resumed, 3) if resumed is not None else None,
    }
    record("readyz_paused_engine", figures)
    for latency, answer in asked:
        assert latency <= READYZ_BUDGET_S + READYZ_MARGIN_S, figures
        assert answer is not None and answer.status_code == 503, figures
        error = answer.json()["error"]
        assert {"code", "message", "request_id", "details"} <= set(error), error
        assert error["code"] in READYZ_ENGINE_DOWN, error
        assert all({"check", "status"} <= set(detail) for detail in error["details"]), error
    assert len(asked) >= 3, figures  # asked again and again while paused
    assert resumed is not None, "readyz never came back to 200 after SIGCONT"


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


# --- a slow engine: every answer late ----------------------------------------------------

SLOW_ENGINE_TIMEOUT_S = 5.0
"""``engine.timeout_s``, its default: the deadline, not the per-call timeout, bounds a search"""
SLOW_DEADLINE_S = 2.0
DEADLINE_MARGIN_S = 1.5
"""what may run past the deadline (docs/api.md, Request deadline): the engine-free
composition and rendering, the wait for the record's group commit, the HTTP hops; generous
for a loaded machine, far below what an engine call that outlives the deadline costs"""
SLOW_REFUSALS = {"deadline_exceeded", "engine_timeout"}
"""what a slow (not a broken) engine may be answered with (docs/api.md, Errors)"""
WARM = ["oranges", "cheap chocolate", "chocolat sans arachide", "chocolate"]
FRESH = [
    "lentils", "hummus", "crackers", "green tea", "coffee beans", "breakfast cereal", "basmati rice",
    "spaghetti", "cookies", "strawberry jam", "orange juice", "creamer", "peanut butter", "olive oil",
    "dark chocolate", "milk chocolate", "honey", "yogurt", "almonds", "granola",
]
"""intents searched once each while the engine is slow: every one a plan-cache miss"""
SLOW_PATHS: dict[str, dict[str, Any]] = {
    # every chunk of every answer 1.2 s late: one call fits the deadline, a miss's calls do not
    "late": {"latency_s": 1.2},
    # every answer 64 bytes at a time, 0.25 s apart: a byte keeps coming, no answer is quick
    "dripping": {"drip": (64, 0.25)},
}
SLOW_INSTANCES = {
    # the aliases watched every second (the default): a request that finds a watch due reads
    # them in its thread, so most searches while the engine is slow are served in threads
    "watching": "",
    # watched hourly: a warm search is served on the event loop (its one _msearch through the
    # loop's own engine client, ADR 0030), a fresh one in a thread
    "steady": "search:\n  alias_watch_interval_s: 3600\n",
}


def _search(url: str, intent: str) -> tuple[float, httpx.Response | None]:
    """(seconds, the answer); None: no answer well past the deadline (the client gave up)."""
    started = time.monotonic()
    try:
        response = httpx.post(
            url + "/v1/search", json={"intent": intent, "size": 5},
            timeout=SLOW_DEADLINE_S + DEADLINE_MARGIN_S + 5,
        )
    except httpx.HTTPError:
        return time.monotonic() - started, None
    return time.monotonic() - started, response


def _request_id(response: httpx.Response) -> str | None:
    body = response.json()
    found = body.get("request_id") or (body.get("error") or {}).get("request_id")
    return str(found) if found else None


SlowAnswer = tuple[str, str, str, float, httpx.Response | None]
"""(instance, path, intent, seconds, answer)"""


def _slow_problems(answer: SlowAnswer, version: str, records: dict[str, list[dict[str, Any]]]) -> list[str]:
    """What is wrong with one answer given while the engine was slow (or before)."""
    instance, path, intent, latency, response = answer
    if response is None:
        return [f"{instance} {path} {intent!r}: no answer after {latency:.2f}s"]
    problems = []
    kind, error, _, why = classify(response, {version})
    what = f"{instance} {path} {intent!r}: {response.status_code} {error or ''}"
    if kind == "violation":
        problems.append(f"{what}: ungoverned or not in the error shape: {why}")
    elif kind == "refused" and (response.status_code != 503 or error not in SLOW_REFUSALS):
        problems.append(f"{what}: not what a slow engine is refused with")
    if latency > SLOW_DEADLINE_S + DEADLINE_MARGIN_S:
        problems.append(f"{what}: answered after {latency:.2f}s")
    mine = records.get(_request_id(response) or "", [])
    if len(mine) != 1:
        problems.append(f"{what}: {len(mine)} decision records")
    elif kind == "governed" and mine[0]["status"] not in ("ok", "no_results"):
        problems.append(f"{what}: recorded {mine[0]['status']}")
    elif kind == "refused" and (mine[0]["error"] or {}).get("code") != error:
        problems.append(f"{what}: recorded {mine[0]['error']}")
    return problems


def test_a_slow_engine_never_keeps_a_search_past_its_deadline(
    dedicated: tuple[DedicatedEngine, Served, str], tmp_path: Path
) -> None:
    """docs/api.md, Request deadline: every engine call gets at most what remains of the
    request's deadline, so a search against an engine that answers every call late answers
    within the deadline (plus the engine-free work after it): a governed 200, or 503
    ``deadline_exceeded`` / ``engine_timeout`` in the one error shape, never an ungoverned
    result, and one decision record per request (docs/audit.md).

    The engine is real and whole; a relay between it and each ``govsearch serve`` makes its
    answers late: a delay line, then a slow drip of the same bytes. Two instances, so that
    both engine clients are attacked: warm intents (plans cached while the engine was
    quick) are served on the event loop by the instance that watches its aliases hourly;
    fresh intents (plan-cache misses) and the other instance's searches that find a watch
    due are served in threads."""
    engine, _, version = dedicated
    answers: list[SlowAnswer] = []
    relays = {name: Relay(engine.url) for name in SLOW_INSTANCES}
    instances: dict[str, Served] = {}
    slow_from = 0.0
    try:
        for name, config in SLOW_INSTANCES.items():
            (tmp_path / f"{name}.yaml").write_text(config, encoding="utf-8")
            instances[name] = serve(
                relays[name].url, tmp_path, name,
                GOVSEARCH_CONFIG=str(tmp_path / f"{name}.yaml"),
                GOVSEARCH_ENGINE_TIMEOUT=str(SLOW_ENGINE_TIMEOUT_S),
                GOVSEARCH_REQUEST_DEADLINE=str(SLOW_DEADLINE_S),
                GOVSEARCH_AUDIT_KEY_FILE=str(tmp_path / "audit.key"),
            )
        for name, served in instances.items():
            assert wait_until(lambda url=served.url: readyz(url) == 200, 60) is not None
            for intent in WARM:  # their plans cached while the engine is quick
                answers.append((name, "quick", intent, *_search(served.url, intent)))
        slow_from = time.monotonic()
        fresh = iter(FRESH)
        with ThreadPoolExecutor(4) as pool:
            for path, slowness in SLOW_PATHS.items():
                for relay in relays.values():
                    relay.slow(**slowness)
                asked = [(name, intent) for name in instances for intent in [*WARM, *islice(fresh, 5)]]
                results = pool.map(lambda one: _search(instances[one[0]].url, one[1]), asked)
                for (name, intent), (latency, response) in zip(asked, results, strict=True):
                    answers.append((name, path, intent, latency, response))
            for relay in relays.values():
                relay.slow()
    finally:
        codes = {name: served.stop() for name, served in instances.items()}
        for relay in relays.values():
            relay.close()
    for name, served in instances.items():  # stopped, their logs drained
        assert codes[name] in (0, -signal.SIGTERM), served.log.read_text()[-2000:]

    records: dict[str, list[dict[str, Any]]] = {}
    for served in instances.values():
        for line in audit_records(served.audit_path):
            records.setdefault(line["request_id"], []).append(line)
    problems = [problem for answer in answers for problem in _slow_problems(answer, version, records)]
    unanswered = set(records) - {_request_id(a[-1]) for a in answers if a[-1] is not None}
    figures: dict[str, Any] = {
        "engine_timeout_s": SLOW_ENGINE_TIMEOUT_S, "request_deadline_s": SLOW_DEADLINE_S,
    }
    for name in instances:
        for path in ("quick", *SLOW_PATHS):
            mine = [(latency, r) for i, p, _, latency, r in answers if (i, p) == (name, path)]
            outcomes = Counter(
                f"{r.status_code} {classify(r, {version})[1] or ''}".strip() if r else "none" for _, r in mine
            )
            figures[f"{name}.{path}"] = {
                "answers": dict(outcomes), "max_latency_s": round(max(latency for latency, _ in mine), 3),
            }
    record("engine_slow", figures)
    assert not problems, "\n".join(problems) + f"\n{figures}"
    assert not unanswered, f"records of requests never answered: {sorted(unanswered)}"
    # the drill bit: the slow engine cut searches at their deadline and still served some,
    slow = [r for _, p, _, _, r in answers if p in SLOW_PATHS and r is not None]
    assert any(classify(r, {version})[1] == "deadline_exceeded" for r in slow), figures
    assert any(r.status_code == 200 for r in slow), figures
    # and both engine clients were asked while it was slow: the loop's (no user agent) and
    # the threads' (the client library's)
    agents = {
        seen.user_agent is None for relay in relays.values() for seen in relay.requests
        if seen.at >= slow_from and seen.path == "/_msearch"
    }
    assert agents == {True, False}, "the slow engine was not asked by both clients"


# --- the engine killed in the middle of a catalog load ----------------------------------------

NEW_PRODUCT = {
    "allergens": [], "brand": "Drill Orchards",
    "categories": ["Fruits and vegetables", "Fresh fruits", "Oranges"], "category": "Oranges",
    "diet": [], "id": "drill-harvest-oranges-3kg", "in_stock": True, "labels": [], "language": "en",
    "margin": 0.3, "market": ["us", "uk", "ca", "fr"], "modelled": [], "on_clearance": False,
    "popularity": 900.0, "price": 4.49, "source": "govsearch-demo",
    "text": "Fresh harvest oranges, sweet and juicy.", "title": "Harvest oranges 3kg",
    "traces": [], "visible": True,
}
"""what the new catalog adds to the demo's: an orange that only it holds"""


def _third_bulk() -> Any:
    """A relay hold that stops the third ``_bulk`` request of a load (two batches of 500
    products written, the third on the wire)."""
    bulks = [0]

    def match(method: str, path: str) -> bool:
        if (method, path.partition("?")[0]) == ("POST", "/_bulk"):
            bulks[0] += 1
        return bulks[0] == 3

    return match


def _oranges(url: str) -> tuple[int, set[str]]:
    """The status of a search for "oranges" and the ids it served (every hit governed)."""
    response = httpx.post(url + "/v1/search", json={"intent": "oranges", "size": 50}, timeout=30)
    if response.status_code != 200:
        return response.status_code, set()
    assert classify(response, None)[0] == "governed", response.text[:300]
    return 200, {hit["id"] for hit in response.json()["hits"]}


def test_engine_killed_in_the_middle_of_a_catalog_load(
    dedicated: tuple[DedicatedEngine, Served, str], tmp_path: Path
) -> None:
    """docs/catalog.md, Loading a catalog: the alias moves only to an index that holds every
    product, in one atomic step; a load the engine dies in leaves the alias where it was (the
    previous catalog is served once the engine is back), exits 6 saying so and naming what
    it left, and the same load run again completes.

    ``govsearch load-catalog`` (the demo's products and one more orange) talks to the
    module's dedicated engine through a relay that stops its third ``_bulk`` on the wire:
    two batches are written. The engine is SIGKILLed there, then restarted."""
    engine, served, _ = dedicated
    assert wait_until(lambda: readyz(served.url) == 200, 120) is not None
    client = connect(EngineSettings(url=engine.url, timeout_s=30))
    alias = load_profile(ROOT / "mappings" / "catalog.profile.yaml").alias
    try:
        (previous,) = client.alias_targets(alias)
        products = tmp_path / "catalog.ndjson"
        demo = (ROOT / "data" / "catalog.ndjson").read_text(encoding="utf-8")
        products.write_text(demo + json.dumps(NEW_PRODUCT, sort_keys=True) + "\n", encoding="utf-8")
        expected = len(demo.splitlines()) + 1
        status, served_ids = _oranges(served.url)
        assert status == 200 and NEW_PRODUCT["id"] not in served_ids

        with Relay(engine.url) as relay:
            relay.hold(_third_bulk())
            load = subprocess.Popen(
                [GOVSEARCH, "load-catalog", "--file", str(products)], cwd=ROOT,
                env=checkout_env(GOVSEARCH_ENGINE_URL=relay.url, GOVSEARCH_ENGINE_TIMEOUT="30"),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            try:
                assert relay.held.wait(120), "the load never sent a third bulk request"
                # mid-load: a new index, half written; the alias where it was; the old catalog served
                (half,) = set(client.list_indices(f"{alias}-*")) - {previous}
                client.refresh(half)
                written = client.request("GET", f"/{half}/_count")["count"]
                assert 0 < written < expected, written
                assert client.alias_targets(alias) == [previous]
                status, served_ids = _oranges(served.url)
                assert status == 200 and NEW_PRODUCT["id"] not in served_ids
                os.kill(engine.pid, signal.SIGKILL)
                time.sleep(0.5)
            finally:
                relay.release()
                out, err = load.communicate(timeout=120)
        figures: dict[str, Any] = {
            "products": expected, "written_when_killed": written,
            "exit": load.returncode, "message": err.strip(),
        }
        assert load.returncode == EXIT_ENGINE_UNAVAILABLE, (load.returncode, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("govsearch: error: "), err
        # what it left, said: the alias not moved, the index it could not delete, what to do
        assert f"{alias} was not moved (it stays on {previous})" in err, err
        assert f"{half} is left half written" in err and "load-catalog" in err, err

        restarted_at = time.monotonic()
        engine.start()
        ready = wait_until(lambda: readyz(served.url) == 200, 120)
        assert ready is not None, "readyz never came back after the restart"
        figures["ready_after_restart_s"] = round(time.monotonic() - restarted_at, 3)
        # the previous catalog, whole, is what the alias holds and what is served
        assert client.alias_targets(alias) == [previous]
        assert httpx.get(served.url + "/readyz", timeout=30).json()["checks"]["catalog_index"] == previous
        status, served_ids = _oranges(served.url)
        assert status == 200 and NEW_PRODUCT["id"] not in served_ids

        # the same load again: it completes, and the alias moves to an index holding every product
        again = subprocess.run(
            [GOVSEARCH, "load-catalog", "--file", str(products)], cwd=ROOT,
            env=checkout_env(GOVSEARCH_ENGINE_URL=engine.url, GOVSEARCH_ENGINE_TIMEOUT="30"),
            capture_output=True, text=True, timeout=300, check=False,
        )
        figures["retry_exit"] = again.returncode
        assert again.returncode == 0, again.stderr
        (loaded,) = client.alias_targets(alias)
        assert loaded != previous
        assert client.request("GET", f"/{loaded}/_count")["count"] == expected
        assert set(client.list_indices(f"{alias}-*")) == {previous, loaded}  # nothing half written left
        served_new = wait_until(lambda: NEW_PRODUCT["id"] in _oranges(served.url)[1], 30)
        figures["new_catalog_served_after_s"] = served_new
        record("catalog_load_killed", figures)
        assert served_new is not None, "the new catalog was never served"
    finally:
        client.close()
