"""A suite run on a service that is already pinned and has no plan cache (``policy test
DIR``, the workflow's test) runs on that service: the policy set is read from the engine
and validated once, not again for a copy (8 s and more at 100,000 policies). A service
with a plan cache still gets an uncached copy. Real engine, demo set."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.lifecycle.runner import run_suite, without_plan_cache
from control_plane.lifecycle.suite import Suite, TestCase
from control_plane.service import SearchService
from tests.clocks import FIXED_NOW

CASES = Suite(tuple(
    TestCase.model_validate({"name": intent, "intent": intent, "expect": {"applied": [policy]}})
    for intent, policy in (("oranges", "oranges"), ("orange juice", "orange-juice"), ("Oranges", "oranges"))
))


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    read: Callable[..., Any] = policy_store.read_index

    def counted(engine: Any, index: str, *args: Any, **kwargs: Any) -> Any:
        reads.append(index)
        return read(engine, index, *args, **kwargs)

    monkeypatch.setattr(policy_store, "read_index", counted)
    return reads


def test_a_pinned_uncached_service_runs_the_suite_itself(
    demo_service: SearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = counting_reads(monkeypatch)
    service = SearchService(
        without_plan_cache(demo_service.settings), demo_service.engine, demo_service.profile,
        index=demo_service.index,
    )
    try:
        report = run_suite(service, CASES, now=FIXED_NOW)
        assert report.passed and report.total == 3, report.human()
        assert reads == [demo_service.index], "read once, by the service the caller gave"
        assert run_suite(service, CASES, now=FIXED_NOW).as_json() == report.as_json()
        assert reads == [demo_service.index], "and not again for a second run"
    finally:
        service.close()


def test_a_service_with_a_plan_cache_gets_an_uncached_copy(
    demo_service: SearchService, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert demo_service.settings.search.plan_cache_size > 0
    demo_service.snapshot()  # loaded before counting
    reads = counting_reads(monkeypatch)
    report = run_suite(demo_service, CASES, now=FIXED_NOW)
    assert report.passed, report.human()
    assert reads == [demo_service.index], "the copy reads the set for itself"
