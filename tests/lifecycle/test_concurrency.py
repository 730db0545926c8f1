"""Searches running in a loop while promotions and rollbacks move the live alias: every
response's plan and DSL are exactly those of one version, the one its
``policy_set_version`` names. Never a mix."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from control_plane.lifecycle.export import export_policy_set
from control_plane.lifecycle.suite import load_suite
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy
from control_plane.service import SearchRequest, SearchService
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_workflow_api import CREAMERS

INTENTS = [
    "creamer", "cheap chocolate", "chocolat sans arachide", "oranges", "chocolate", "orange juice", "soda",
]
NOW = datetime(2026, 12, 10, 12, 0, tzinfo=UTC)


def fingerprint(service: SearchService, compiled: Any, request: SearchRequest) -> str:
    plan = json.loads(compiled.composition.plan.model_dump_json())
    dsl = service.render(compiled, request, "strict")
    return json.dumps({"plan": plan, "dsl": dsl}, sort_keys=True, ensure_ascii=False)


def expected(lc: Lifecycle, version: str) -> dict[str, str]:
    with lc.workflow.pinned_service(version) as pinned:
        out = {}
        for intent in INTENTS:
            request = SearchRequest(intent=intent)
            out[intent] = fingerprint(pinned, pinned.compile(request, NOW), request)
        return out


def test_searches_during_promotions_and_rollbacks_see_one_version(
    lifecycle: Lifecycle, tmp_path: Path
) -> None:
    lc = lifecycle
    wf, people = lc.workflow, lc.principals
    original = wf.environment("live").version

    # Candidate: the demo set plus a policy that changes what "creamer" means.
    demo = load_policy_set("policies")
    creamers = Policy.model_validate({**CREAMERS, "trigger": {"phrase": ["creamer"]}})
    candidate = build_policy_set([*demo.policies, creamers], demo.vocabularies, demo.governance)
    export_policy_set(candidate, tmp_path / "candidate", suite=load_suite("policies"))
    assert wf.apply_directory(people["dan"], tmp_path / "candidate", "candidate").version == candidate.version
    assert wf.test(people["dan"], candidate.version).passed
    wf.approve(people["bob"], candidate.version, None)

    plans = {original: expected(lc, original), candidate.version: expected(lc, candidate.version)}
    assert plans[original] != plans[candidate.version]

    stop = threading.Event()
    seen: list[tuple[str, str, str]] = []
    failures: list[BaseException] = []

    def search_loop(offset: int) -> None:
        service = SearchService(lc.settings, lc.engine, lc.service.profile)
        try:
            i = offset
            while not stop.is_set():
                request = SearchRequest(intent=INTENTS[i % len(INTENTS)])
                outcome = service.search(request, NOW)
                version = outcome.compiled.policy_set_version
                seen.append((version, request.intent, fingerprint(service, outcome.compiled, request)))
                i += 1
        except BaseException as error:  # surfaced by the main thread
            failures.append(error)
        finally:
            service.close()

    threads = [threading.Thread(target=search_loop, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()

    def wait_for(version: str) -> None:
        deadline = time.monotonic() + 30
        count = len(seen)
        while time.monotonic() < deadline:
            if any(v == version for v, _, _ in seen[count:]):
                return
            time.sleep(0.01)
        raise AssertionError(f"no search saw {version[:12]} within 30 s")

    try:
        for _ in range(3):
            wf.promote(people["bob"], candidate.version, "concurrency test")
            wait_for(candidate.version)
            wf.rollback(people["bob"], original, "concurrency test")
            wait_for(original)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)

    assert not failures, failures
    assert len(seen) > 20
    versions = {version for version, _, _ in seen}
    assert versions == {original, candidate.version}
    for version, intent, print_ in seen:
        assert print_ == plans[version][intent], f"{intent!r} under {version[:12]} is not that version's plan"
