"""The workflow's remaining refusals, called directly (the API and CLI map them 1:1):
each says why, and each is recorded in the history."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from control_plane.lifecycle.workflow import Refused
from tests.lifecycle.conftest import Lifecycle

ROOT = Path(__file__).resolve().parents[2]


def refusal(code: str, run: object, *args: object) -> Refused:
    with pytest.raises(Refused) as caught:
        run(*args)  # type: ignore[operator]
    assert caught.value.code == code, caught.value
    return caught.value


def untested_copy(tmp_path: Path) -> Path:
    directory = tmp_path / "no-tests"
    shutil.copytree(ROOT / "policies", directory, ignore=shutil.ignore_patterns("tests"))
    (directory / "grocery.yaml").write_text(
        "id: teas\ntitle: t\nowner: o\ntrigger: {phrase: [tea]}\nrules:\n  - category: {values: [Teas]}\n"
    )
    return directory


def test_promotion_of_a_version_without_tests_is_refused(lifecycle: Lifecycle, tmp_path: Path) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    state = wf.apply_directory(people["dan"], untested_copy(tmp_path), "no tests")
    assert state.cases == 0
    report = wf.test(people["dan"], state.version)
    assert report.passed and report.total == 0
    wf.approve(people["bob"], state.version, None)
    error = refusal("no_tests", wf.promote, people["bob"], state.version, None)
    assert "no test cases" in error.message
    refused = wf.history(outcome="refused", action="promote")
    assert refused[0].code == "no_tests" and refused[0].actor == "bob"


def test_rollback_refusals(lifecycle: Lifecycle, tmp_path: Path) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    live = wf.environment("live").version
    refusal("nothing_to_roll_back", wf.rollback, people["bob"], None, None)
    refusal("already_live", wf.rollback, people["bob"], live, None)
    staged = wf.apply_directory(people["dan"], untested_copy(tmp_path), None).version
    error = refusal("never_live", wf.rollback, people["bob"], staged, None)
    assert "never live" in error.message
    refusal("unknown_version", wf.rollback, people["bob"], "f" * 64, None)
    refusal("forbidden_role", wf.rollback, people["dan"], live, None)


def test_disable_refusals(lifecycle: Lifecycle) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    refusal("reason_required", wf.disable, people["bob"], "cheap", "  ")
    wf.disable(people["bob"], "cheap", "price war")
    refusal("already_disabled", wf.disable, people["bob"], "cheap", "again")
    # a guard needs an admin; the admin may
    refusal("forbidden_role", wf.disable, people["bob"], "visible-only", "test")
    wf.disable(people["root"], "visible-only", "admin override for the test")
    assert not wf.environment("live").policy_set.policy("visible-only").enabled
    history = wf.history(env="live", action="disable")
    assert [(e.actor, e.policy_ids) for e in history] == [("root", ("visible-only",)), ("bob", ("cheap",))]


def test_reading_an_empty_environment_or_unknown_version(lifecycle: Lifecycle) -> None:
    wf = lifecycle.workflow
    refusal("empty_environment", wf.environment, "staging")
    refusal("unknown_version", wf.version_state, "0123456789abcdef")
    refusal("unknown_environment", wf.environment, "prod")


def test_republishing_a_served_version_under_another_analysis_is_refused(lifecycle: Lifecycle) -> None:
    """The catalog profile's languages changed while live serves the demo set: writing the
    same version again is refused (``analysis_changed``), and live keeps serving it."""
    from control_plane import policy_store
    from control_plane.lifecycle.suite import load_suite
    from control_plane.lifecycle.workflow import Workflow
    from control_plane.loader import load_policy_set
    from control_plane.service import SearchRequest
    from tests.clocks import FIXED_NOW

    wf = lifecycle.workflow
    policy_set = load_policy_set(ROOT / "policies")
    live = policy_store.alias_name(lifecycle.settings.policies.index_prefix, "live")
    (served,) = lifecycle.engine.alias_targets(live)
    english_only = wf.profile.model_copy(update={"languages": wf.profile.languages[:1]})
    other = Workflow(lifecycle.settings, lifecycle.engine, english_only, clock=wf.clock)
    error = refusal(
        "analysis_changed", other.bootstrap, "operator", policy_set, load_suite(ROOT / "policies"), "live"
    )
    assert served in error.message and live in error.message and "publish again" in error.message
    assert lifecycle.engine.alias_targets(live) == [served]
    outcome = lifecycle.service.search(SearchRequest(intent="oranges"), FIXED_NOW)  # still served
    assert outcome.execution.status == "ok" and "oranges" in outcome.compiled.composition.plan.applied
