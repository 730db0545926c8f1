"""The demo policy set's own tests (``policies/*/tests``), one pytest test per case,
run by the same runner as the CLI and the API, against the real engine.

The demo suite is time-independent by construction (every case that a window could move
pins its ``now``): the whole suite gives the same report whatever instant the run is given,
before, on and after each window edge of the demo set, and at the real now.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from control_plane.lifecycle.runner import SuiteReport, run_suite
from control_plane.lifecycle.suite import Suite, TestCase, load_suite
from control_plane.loader import load_policy_set
from control_plane.plan_cache import window_edges
from control_plane.service import SearchService
from control_plane.times import iso, system_clock
from tests.clocks import FIXED_NOW

POLICIES = Path(__file__).resolve().parents[2] / "policies"
DEMO = load_suite(POLICIES)


def run_instants() -> list[datetime]:
    """A second before, on, and a day after every window edge of the demo set."""
    edges = sorted(set(window_edges(load_policy_set(POLICIES))))
    assert edges, "the demo set has an active window to test around"
    around = (timedelta(seconds=-1), timedelta(0), timedelta(days=1))
    return [edge + offset for edge in edges for offset in around]


@pytest.mark.parametrize("case", DEMO.cases, ids=[case.name for case in DEMO.cases])
def test_demo_case(demo_service: SearchService, case: TestCase) -> None:
    report = run_suite(demo_service, Suite((case,)), now=FIXED_NOW)
    assert report.passed, report.human()


def test_the_whole_suite_passes_and_reports_deterministically(demo_service: SearchService) -> None:
    first = run_suite(demo_service, DEMO, now=FIXED_NOW)
    second = run_suite(demo_service, DEMO, now=FIXED_NOW)
    assert first.passed, first.human()
    assert first.as_json() == second.as_json()
    assert first.total == len(DEMO.cases) and first.failed == 0
    assert first.policy_set_version == demo_service.snapshot()[0].policy_set.version
    assert first.suite_sha256 == DEMO.sha256
    assert first.as_json()["now"] == iso(FIXED_NOW)
    places = [(case.file, case.line) for case in first.cases]
    assert places == sorted(places)
    lines = first.human().splitlines()
    assert lines[0].endswith(f"unpinned cases at {iso(FIXED_NOW)}")
    assert lines[-1] == f"PASSED: {first.total} passed, 0 failed"
    assert all(line.startswith("PASS  ") for line in lines[1:-1])


def _cases(report: SuiteReport) -> list[dict[str, object]]:
    return [case.as_json() for case in report.cases]


@pytest.mark.parametrize("instant", run_instants(), ids=iso)
def test_the_whole_suite_passes_at_every_window_edge(demo_service: SearchService, instant: datetime) -> None:
    reference = run_suite(demo_service, DEMO, now=FIXED_NOW)
    report = run_suite(demo_service, DEMO, now=instant)
    assert report.passed, report.human()
    assert _cases(report) == _cases(reference)  # case by case, the same outcome


def test_the_whole_suite_passes_at_the_real_now(demo_service: SearchService) -> None:
    """About now: reads the wall clock on purpose (``make test-clocks`` moves it)."""
    report = run_suite(demo_service, DEMO, now=system_clock())
    assert report.passed, report.human()
