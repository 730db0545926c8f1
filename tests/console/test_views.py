"""The console's pure shaping (no engine): the intent cut at consumed spans, trigger words,
rows compared across environments, field diffs as rows."""

from __future__ import annotations

from pathlib import Path

from control_plane.console.views import field_changes, marked_intent, matches, policy_rows, trigger_words
from control_plane.loader import load_policy_set
from control_plane.policy import Policy, PolicySet

POLICIES = load_policy_set(Path(__file__).resolve().parents[2] / "policies")


def policy(**changes: object) -> Policy:
    return POLICIES.policy("oranges").model_copy(update=changes)


def test_marked_intent_cuts_at_every_span_edge() -> None:
    applied = [
        {"policy_id": "a", "consumed": [{"start": 0, "end": 5, "text": "cheap"}]},
        {"policy_id": "b", "consumed": [{"start": 3, "end": 9, "text": "ap cho"}]},
        {"policy_id": "c", "consumed": [{"start": 40, "end": 50, "text": "outside"}]},  # ignored
    ]
    segments = marked_intent("cheap chocolate", applied)
    assert [(s.text, s.policies) for s in segments] == [
        ("che", ("a",)), ("ap", ("a", "b")), (" cho", ("b",)), ("colate", ()),
    ]
    assert "".join(s.text for s in segments) == "cheap chocolate"
    assert [(s.text, s.policies) for s in marked_intent("milk", [])] == [("milk", ())]


def test_trigger_words_leave_out_the_trigger_form() -> None:
    words = trigger_words(POLICIES.policy("oranges"))
    assert "oranges" in words and "exact" not in words.split(", ")
    assert matches(POLICIES.policy("oranges"), "ORANG", "trigger")
    assert not matches(POLICIES.policy("oranges"), "orang", "owner")
    assert matches(POLICIES.policy("oranges"), "", "id")
    assert trigger_words(POLICIES.policy("in-stock-only")) == "always"


def test_rows_compare_with_the_other_environment() -> None:
    changed = policy(priority=71)
    other = PolicySet.model_construct(policies=(changed,))
    rows = {r.id: r.compared for r in policy_rows(POLICIES, other, "", "any")}
    assert rows["oranges"] == "changed"
    assert rows["orange-juice"] == "only here"
    assert {r.compared for r in policy_rows(POLICIES, None, "", "any")} == {""}
    same = PolicySet.model_construct(policies=(POLICIES.policy("oranges"),))
    assert [r.compared for r in policy_rows(same, POLICIES, "oranges", "id")] == ["same"]


def test_field_changes_of_one_policy() -> None:
    event = {"diff": {"added": ["x"], "removed": [], "changed": [
        {"id": "oranges", "changes": [{"field": "enabled", "before": True, "after": False}]},
        {"id": "other", "changes": [{"field": "title", "before": "a", "after": "b"}]},
    ]}}
    assert field_changes(event, "oranges") == [
        {"policy": "oranges", "field": "enabled", "before": "true", "after": "false"}
    ]
    assert len(field_changes(event, None)) == 3
