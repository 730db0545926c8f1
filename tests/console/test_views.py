"""The console's pure shaping (no engine): the intent cut at consumed spans, trigger words,
rows compared across environments, field diffs as rows, moves without an event as rows."""

from __future__ import annotations

from pathlib import Path

from control_plane.console.views import (
    field_changes,
    marked_intent,
    matches,
    move_rows,
    policy_rows,
    trigger_words,
    what_is_live,
)
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


def test_what_a_move_without_an_event_means_for_what_is_live() -> None:
    a, b = "a" * 64, "b" * 64
    said = {
        (state, marker): what_is_live(state, marker, "live", a, b)
        for state, marker in (("open", "open"), ("open", "applied"), ("open", "recording"),
                              ("open", None), ("dropped", None), ("withdrawn", None))
    }
    assert said == {
        ("open", "open"): "not moved yet: live serves aaaaaaaaaaaa",
        ("open", "applied"): "moved: live serves bbbbbbbbbbbb; its event is not written yet",
        ("open", "recording"): "moved: live serves bbbbbbbbbbbb; its event is not written yet",
        ("open", None): "no marker: the move cannot be made; live serves aaaaaaaaaaaa",
        ("dropped", None): "live never served bbbbbbbbbbbb through this move",
        ("withdrawn", None): "live was moved back from bbbbbbbbbbbb (to aaaaaaaaaaaa, unless another"
        " move stood on top)",
    }
    assert what_is_live("dropped", None, "staging", None, b).startswith("staging never served")
    assert what_is_live("open", "open", "live", None, b) == "not moved yet: live serves nothing"


def test_move_rows_from_journal_entries() -> None:
    entry = {
        "intent_id": "0001-ab", "state": "withdrawn", "marker": None, "env": "live",
        "owner": {"host": "h", "pid": 7}, "expires": "2026-12-01T00:00:01Z",
        "closed": {"at": "2026-12-01T00:00:00Z", "by": "h pid 7", "note": "moved back"},
        "event": {"action": "promote", "actor": "bob", "time": "2026-11-30T23:59:59Z",
                  "previous_version": "a" * 64, "version": "b" * 64, "reason": None},
    }
    (row,) = move_rows([entry])
    assert (row.state, row.action, row.actor, row.owner, row.reason) == (
        "withdrawn", "promote", "bob", "h pid 7", ""
    )
    assert (row.closed_at, row.closed_by, row.note) == ("2026-12-01T00:00:00Z", "h pid 7", "moved back")
    assert (row.from_version, row.to_version) == ("a" * 64, "b" * 64)
    (open_row,) = move_rows([{**entry, "state": "open", "marker": "open", "closed": None}])
    assert open_row.closed_at is None and open_row.live.startswith("not moved yet")
