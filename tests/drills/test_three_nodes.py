"""The three-node drill: ``govsearch engine start --nodes 3`` forms one cluster on
loopback; the demo is loaded (one replica per index); two ``govsearch serve`` instances
answer a search load, each through its own node. Meanwhile the elected cluster manager is
SIGKILLed and a new policy version goes through the workflow API (draft, test, approve,
promote). Every answer is governed or a clean 503/504; both instances serve the new
version; each instance's audit log verifies and holds exactly one record per search it
answered. Figures go to ``bench/results/drills/three_nodes.json`` (``make drills``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane import local_engine
from control_plane.bootstrap import prepare
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, connect
from control_plane.lifecycle.keys import KeyStore
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.drills.harness import (
    GOVSEARCH,
    ROOT,
    Load,
    Served,
    audit_verify,
    checkout_env,
    free_engine_port,
    readyz,
    serve,
    wait_until,
)
from tests.drills.results import record

pytestmark = [pytest.mark.drill, pytest.mark.slow, pytest.mark.usefixtures("starts_local_engine")]

NODES = 3
HEAP = "320m"
CREAMERS: dict[str, Any] = {
    "id": "coffee-creamers",
    "title": '"creamer" means coffee creamers',
    "owner": "merch-team-grocery",
    "priority": 60,
    "trigger": {"phrase": ["creamer", "creamers"]},
    "rules": [{"category": {"values": ["Coffee creamers"]}}],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[local_engine.NodeState, Path]]:
    """Three nodes started through the CLI, exactly as an operator would."""
    directory = tmp_path_factory.mktemp("drill-cluster") / "engine"
    port = free_engine_port(NODES)
    name = f"govsearch-drill-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    done = subprocess.run(
        [GOVSEARCH, "engine", "start", "--nodes", str(NODES), "--port", str(port), "--data-dir",
         str(directory), "--cluster-name", name, "--heap", HEAP, "--timeout", "300"],
        cwd=ROOT, env=checkout_env(), capture_output=True, text=True, timeout=400, check=False,
    )
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        state = local_engine.read_state(directory)
        assert state is not None and len(state.members) == NODES
        assert done.stdout.split() == [node.url for node in state.members]
        cluster_start_s = time.monotonic() - started
        (directory / "start_s").write_text(f"{cluster_start_s:.3f}")
        yield state, directory
    finally:
        subprocess.run([GOVSEARCH, "engine", "stop", "--data-dir", str(directory)], cwd=ROOT,
                       env=checkout_env(), capture_output=True, timeout=120, check=False)


def _manager(engine: Engine) -> str:
    rows = engine.request("GET", "/_cat/cluster_manager", params={"format": "json"})
    return str(rows[0]["node"])


def _health(url: str) -> dict[str, Any]:
    return local_engine.probe(url, timeout_s=5) or {}


def _call(served: Served, method: str, path: str, key: str, **kwargs: Any) -> dict[str, Any]:
    """A workflow call; an engine still electing its manager may answer 503: try again."""
    response = None
    for _ in range(5):
        response = httpx.request(method, served.url + path, headers={"authorization": f"Bearer {key}"},
                                 timeout=120, **kwargs)
        if response.status_code != 503:
            break
        time.sleep(2)
    assert response is not None and response.status_code == 200, (path, response and response.text)
    body: dict[str, Any] = response.json()
    return body


def _version_of(served: Served, sent: dict[str, int]) -> str | None:
    try:
        response = httpx.post(served.url + "/v1/search", json={"intent": "creamer"}, timeout=30)
    except httpx.HTTPError:
        return None
    sent[served.url] = sent.get(served.url, 0) + 1
    return response.json().get("policy_set_version") if response.status_code == 200 else None


def test_three_nodes_two_instances_a_node_killed_and_a_promotion(
    cluster: tuple[local_engine.NodeState, Path], tmp_path: Path
) -> None:
    state, directory = cluster
    first = connect(EngineSettings(url=state.url, timeout_s=30))
    health = first.health()
    assert health["cluster_name"] == state.cluster and health["number_of_nodes"] == NODES

    # The demo, as `govsearch demo` prepares it; indices get one replica on a cluster.
    ready = prepare(first, Settings(engine=EngineSettings(url=state.url)), clock=FIXED_CLOCK)
    settings = first.request("GET", f"/{ready.policies_index}/_settings")
    assert settings[ready.policies_index]["settings"]["index"]["number_of_replicas"] == "1"
    assert first.request("GET", "/_cluster/health", params={"wait_for_status": "green", "timeout": "60s"})[
        "status"
    ] == "green"
    keys = KeyStore(first, Settings().auth.keys_index)
    author, _ = keys.create("drill-author", ["author"], FIXED_NOW)
    approver, _ = keys.create("drill-approver", ["approver"], FIXED_NOW)

    # Each instance talks to a node that is not the cluster manager; the manager is killed.
    manager = _manager(first)
    victim = state.members[int(manager.removeprefix(f"{state.cluster}-")) - 1]  # named <cluster>-<i>
    survivors = [node for node in state.members if node.pid != victim.pid]
    instances = [
        serve(node.url, tmp_path, f"instance-{i + 1}", GOVSEARCH_AUDIT_INSTANCE_ID=f"drill-instance-{i + 1}")
        for i, node in enumerate(survivors)
    ]
    try:
        for served in instances:
            assert wait_until(lambda s=served: readyz(s.url) == 200, 60) is not None
        old = ready.policy_set_version
        polls: dict[str, int] = {}
        load = Load({f"instance-{i + 1}": s.url for i, s in enumerate(instances)}, threads=2).start()
        try:
            time.sleep(3)
            killed_at = time.monotonic()
            os.kill(victim.pid, signal.SIGKILL)
            # Meanwhile, a new version through the workflow API of the first instance.
            a = instances[0]
            steps: dict[str, float] = {}
            step = time.monotonic()
            draft = _call(a, "PUT", "/v1/policies/staging/policies/coffee-creamers", author,
                          json={"policy": CREAMERS, "reason": "three-node drill"})
            new = draft["version"]
            steps["draft_s"], step = round(time.monotonic() - step, 3), time.monotonic()
            report = _call(a, "POST", f"/v1/policies/versions/{new}/test", author)
            assert report["passed"] is True, report
            steps["test_s"], step = round(time.monotonic() - step, 3), time.monotonic()
            _call(a, "POST", f"/v1/policies/versions/{new}/approve", approver, json={})
            steps["approve_s"], step = round(time.monotonic() - step, 3), time.monotonic()
            _call(a, "POST", "/v1/policies/promote", approver, json={"version": new})
            steps["promote_s"] = round(time.monotonic() - step, 3)
            promoted_at = time.monotonic()
            serving = {
                f"instance-{i + 1}": wait_until(lambda s=s: _version_of(s, polls) == new, 60)
                for i, s in enumerate(instances)
            }
            reformed = wait_until(
                lambda: _health(survivors[0].url).get("number_of_nodes") == NODES - 1
                and _health(survivors[0].url).get("status") in ("green", "yellow"),
                60,
            )
            time.sleep(2)
        finally:
            load.stop()
        searches = {name: sum(1 for a in load.answers if a.instance == name) for name in load.instances}
        for i, served in enumerate(instances):  # the polls for the new version searched too
            searches[f"instance-{i + 1}"] += polls.get(served.url, 0)
    finally:
        codes = [served.stop() for served in instances]
        first.close()

    violations = load.violations()
    versions = {a.version for a in load.answers if a.kind == "governed"}
    verified = {f"instance-{i + 1}": audit_verify(s) for i, s in enumerate(instances)}
    records = {f"instance-{i + 1}": _search_records(s.audit_path) for i, s in enumerate(instances)}
    start_s = float((directory / "start_s").read_text())
    figures = {
        **load.figures(),
        "nodes": NODES,
        "heap_per_node": HEAP,
        "cluster_start_s": round(start_s, 3),
        "killed": "cluster manager",
        "promotion_after_kill_s": round(promoted_at - killed_at, 3),
        "workflow_steps": steps,
        "new_version_served_after_promotion_s": {
            name: round(s, 3) if s is not None else None for name, s in serving.items()
        },
        "cluster_of_two_after_kill_s": round(reformed + (promoted_at - killed_at), 3) if reformed else None,
        "versions_served": sorted(v[:12] for v in versions if v),
        "records_per_instance": records,
        "audit_verify": {
            name: (done.stdout.splitlines() or [""])[0].split(" in ")[0] for name, done in verified.items()
        },
        "serve_exit_codes": codes,
    }
    record("three_nodes", figures)
    assert not violations, f"{len(violations)} violations, first: {violations[0]}"
    assert versions <= {old, new} and new in versions, figures
    assert all(s is not None for s in serving.values()), figures
    for name, done in verified.items():
        assert done.returncode == 0, (name, done.stdout, done.stderr)
    assert records == searches, figures


def _search_records(path: Path) -> int:
    ids = set()
    for line in path.read_text().splitlines():
        if line.strip():
            data = json.loads(line)
            if data.get("endpoint") == "search" and data.get("request_id"):
                ids.add(data["request_id"])
    return len(ids)
