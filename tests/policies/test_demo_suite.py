"""The demo policy set's own tests (``policies/*/tests``), one pytest test per case,
run by the same runner as the CLI and the API, against the real engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane.lifecycle.runner import run_suite
from control_plane.lifecycle.suite import Suite, TestCase, load_suite
from control_plane.service import SearchService

pytestmark = pytest.mark.engine

POLICIES = Path(__file__).resolve().parents[2] / "policies"
DEMO = load_suite(POLICIES)


@pytest.mark.parametrize("case", DEMO.cases, ids=[case.name for case in DEMO.cases])
def test_demo_case(demo_service: SearchService, case: TestCase) -> None:
    report = run_suite(demo_service, Suite((case,)))
    assert report.passed, report.human()


def test_the_whole_suite_passes_and_reports_deterministically(demo_service: SearchService) -> None:
    first = run_suite(demo_service, DEMO)
    second = run_suite(demo_service, DEMO)
    assert first.passed, first.human()
    assert first.as_json() == second.as_json()
    assert first.total == len(DEMO.cases) and first.failed == 0
    assert first.policy_set_version == demo_service.snapshot()[0].policy_set.version
    assert first.suite_sha256 == DEMO.sha256
    places = [(case.file, case.line) for case in first.cases]
    assert places == sorted(places)
    lines = first.human().splitlines()
    assert lines[-1] == f"PASSED: {first.total} passed, 0 failed"
    assert all(line.startswith("PASS  ") for line in lines[1:-1])
