"""What the history decides: which version a rollback restores, which suite an environment
carries, which approvals count, and that an alias never moves without its event."""

from __future__ import annotations

from pathlib import Path

import pytest

from control_plane import policy_store
from control_plane.engine import EngineError
from control_plane.lifecycle.export import export_policy_set
from control_plane.lifecycle.suite import load_suite
from control_plane.lifecycle.workflow import Refused
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy
from tests.clocks import FIXED_CLOCK
from tests.lifecycle.conftest import Lifecycle

ROOT = Path(__file__).resolve().parents[2]
PASSING = [{"name": "oranges are oranges", "intent": "oranges", "expect": {"applied": ["oranges"]}}]


def candidate(lc: Lifecycle, policy_id: str, phrase: str) -> str:
    """A staging version adding one policy, authored by dan, tested, approved by bob."""
    wf, people = lc.workflow, lc.principals
    policy = {"id": policy_id, "title": policy_id, "owner": "o", "trigger": {"phrase": [phrase]},
              "rules": [{"category": {"values": ["Teas"]}}]}
    version = wf.put_policy(people["dan"], policy, None).version
    assert wf.test(people["dan"], version).passed
    wf.approve(people["bob"], version, None)
    return version


def test_rollback_walks_back_through_promotions(lifecycle: Lifecycle) -> None:
    wf, bob = lifecycle.workflow, lifecycle.principals["bob"]
    a = wf.environment("live").version
    b = candidate(lifecycle, "teas-b", "green tea")
    wf.promote(bob, b, None)
    with pytest.raises(Refused) as again:
        wf.promote(bob, b, None)
    assert again.value.code == "already_live"
    c = candidate(lifecycle, "teas-c", "black tea")
    wf.promote(bob, c, None)
    assert wf.rollback(bob, None, None).version == b
    assert wf.rollback(bob, None, None).version == a
    with pytest.raises(Refused) as first:
        wf.rollback(bob, None, None)
    assert first.value.code == "nothing_to_roll_back"


def test_publishing_the_same_set_again_records_nothing(lifecycle: Lifecycle) -> None:
    from control_plane.bootstrap import publish_policies

    before = lifecycle.workflow.history()
    publish_policies(lifecycle.engine, lifecycle.settings, "policies", "live", clock=FIXED_CLOCK)
    assert lifecycle.workflow.history() == before


def test_live_keeps_the_suite_it_was_promoted_with(lifecycle: Lifecycle) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    version = candidate(lifecycle, "teas", "green tea")
    wf.promote(people["bob"], version, None)
    promoted_suite = wf.environment("live").suite_sha256
    wf.put_tests(people["dan"], "extra/tests/more.yaml", PASSING, None)
    assert wf.environment("staging").version == version
    assert wf.environment("staging").suite_sha256 != promoted_suite
    assert wf.environment("live").suite_sha256 == promoted_suite
    suite = wf.suite_in("live")
    assert suite is not None and "extra/tests/more.yaml" not in suite.files()


def test_an_approval_counts_for_the_tests_it_saw(lifecycle: Lifecycle) -> None:
    wf, people = lifecycle.workflow, lifecycle.principals
    version = candidate(lifecycle, "teas", "green tea")
    wf.put_tests(people["dan"], "extra/tests/more.yaml", PASSING, None)
    assert wf.test(people["dan"], version).passed
    with pytest.raises(Refused) as refused:
        wf.promote(people["bob"], version, None)
    assert refused.value.code == "not_approved"
    assert [a["current"] for a in wf.version_state(version).approvals] == [False]
    wf.approve(people["bob"], version, "saw the new tests")
    wf.promote(people["bob"], version, None)


def test_an_alias_never_moves_without_its_history_event(lifecycle: Lifecycle) -> None:
    wf, engine = lifecycle.workflow, lifecycle.engine
    live = wf.environment("live")
    engine.request("PUT", f"/{wf.store.history}/_settings", body={"index.blocks.write": True})
    try:
        with pytest.raises(EngineError):
            wf.disable(lifecycle.principals["bob"], "cheap", "the history cannot be written")
    finally:
        engine.request("PUT", f"/{wf.store.history}/_settings", body={"index.blocks.write": False})
    assert engine.alias_targets(f"{lifecycle.settings.policies.index_prefix}-live") == [live.index]
    assert wf.history(action="disable") == []


def test_an_environment_published_outside_the_workflow_is_a_clear_404(lifecycle: Lifecycle) -> None:
    wf = lifecycle.workflow
    demo = load_policy_set(ROOT / "policies")
    tea = Policy.model_validate({"id": "tea", "title": "t", "owner": "o", "trigger": {"phrase": ["tea"]},
                                 "rules": [{"category": {"values": ["Teas"]}}]})
    outside = build_policy_set([*demo.policies, tea], demo.vocabularies, demo.governance)
    policy_store.publish(lifecycle.engine, lifecycle.settings.policies.index_prefix, outside, "live")
    with pytest.raises(Refused) as refused:
        wf.version_state("live")
    assert refused.value.code == "unknown_version" and refused.value.status == 404


def test_export_keeps_a_policy_whose_id_is_a_reserved_file_name(tmp_path: Path) -> None:
    demo = load_policy_set(ROOT / "policies")
    odd = Policy.model_validate({
        "id": "governance", "title": "t", "owner": "o",
        "trigger": {"phrase": ["tea"]}, "rules": [{"category": {"values": ["Teas"]}}],
    })
    policy_set = build_policy_set([*demo.policies, odd], demo.vocabularies, demo.governance)
    export_policy_set(policy_set, tmp_path / "out", suite=load_suite(ROOT / "policies"))
    assert load_policy_set(tmp_path / "out").version == policy_set.version
    assert load_suite(tmp_path / "out").sha256 == load_suite(ROOT / "policies").sha256


def test_a_killed_policy_stays_off_unless_the_promoter_turns_it_back_on(lifecycle: Lifecycle) -> None:
    wf, bob = lifecycle.workflow, lifecycle.principals["bob"]
    version = candidate(lifecycle, "teas", "green tea")  # staged before the incident: cheap enabled
    wf.disable(bob, "cheap", "margin incident")
    with pytest.raises(Refused) as refused:
        wf.promote(bob, version, None)
    assert refused.value.code == "reenables_disabled"
    assert "cheap (disabled by bob: margin incident)" in refused.value.message
    wf.promote(bob, version, "incident over", reenable=["cheap"])
    assert wf.environment("live").policy_set.policy("cheap").enabled
