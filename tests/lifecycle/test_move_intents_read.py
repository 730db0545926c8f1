"""Reading the journal of environment moves (ADR 0053, docs/api.md ``GET
/v1/policies/intents``, ``govsearch policy intents``): the moves no history event names
(in flight, dropped, withdrawn) are listed with the event they have or would have had and
why they were closed; and the text history says which events a reader recovered.

Through the real API and CLI on the real engine; the crashes are made as in
tests/lifecycle/test_move_intents.py (a wrapper raising at the chosen request)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane.cli_support import EXIT_USAGE
from control_plane.config import Settings
from control_plane.engine import EngineError
from tests.api.test_search_api import assert_error_shape
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_cli import cli_env, run  # noqa: F401
from tests.lifecycle.test_history_semantics import candidate
from tests.lifecycle.test_move_intents import (
    Crash,
    Crashing,
    alias_move,
    crash_promotion,
    dead_owner,
    elsewhere,
    event_write,
    workflow,
)

LEASE_PASSED = int(61e9)
"""past the default lease (60 s)"""


def withdrawn_disable(lc: Lifecycle) -> None:
    """bob's kill switch whose event the engine refuses (a write block): withdrawn, moved back."""
    history = lc.workflow.store.history
    lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": True})
    try:
        with pytest.raises(EngineError):
            lc.workflow.disable(lc.principals["bob"], "cheap", "the history cannot be written")
    finally:
        lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": False})


def dropped_promotion(lc: Lifecycle) -> str:
    """bob's promotion whose process died before its alias call: dropped by the next reader."""
    version = candidate(lc, "herbal", "herbal tea")
    doomed = workflow(lc, Crashing(lc.engine, alias_move(lc, "live")), dead_owner)
    with pytest.raises(Crash):
        doomed.promote(lc.principals["bob"], version, "never sent")
    return version


def listed(lc: Lifecycle, who: str | None = "carol", **params: Any) -> Any:
    return lc.call("GET", "/v1/policies/intents", who, params=params)


def summary(entries: list[dict[str, Any]]) -> list[tuple[str, str, str | None, str | None]]:
    return [(e["event"]["action"], e["state"], e["marker"], e["event"]["version"]) for e in entries]


def test_the_moves_no_history_event_names_are_read_through_the_api(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    withdrawn_disable(lc)
    dropped = dropped_promotion(lc)
    # another host's process died after its move: in its owner's hands until the lease passes
    pending = crash_promotion(lc, event_write(lc, "promote"), elsewhere)

    answer = listed(lc)
    assert answer.status_code == 200, answer.text
    entries = answer.json()["intents"]
    assert summary(entries) == [
        ("promote", "open", "applied", pending),  # moved, its event not written yet
        ("promote", "dropped", None, dropped),
        ("disable", "withdrawn", None, entries[2]["event"]["version"]),
    ], "newest first; the recorded ones (bootstrap, staging drafts) are in the history"
    held, never, taken_back = entries
    assert held["closed"] is None and held["owner"]["host"] == "another-host" and held["expires"]
    assert (held["event"]["actor"], held["event"]["reason"]) == ("bob", "teas for winter")
    assert never["closed"]["note"] and never["event"]["reason"] == "never sent"
    assert "moved back" in taken_back["closed"]["note"]
    assert taken_back["event"]["reason"] == "the history cannot be written"
    assert taken_back["env"] == "live" and taken_back["to_index"] and taken_back["from_index"]
    moves = lc.call("GET", "/v1/policies/history", "carol", params={"env": "live"}).json()["events"]
    listed_ids = {e["intent_id"] for e in entries}
    assert not listed_ids & {e["event_id"] for e in moves}, "none of them is in the history"

    # filters: environment, state, limit; every reader role reads it
    assert listed(lc, env="staging").json() == {"intents": []}
    assert summary(listed(lc, "dan", state="withdrawn").json()["intents"]) == [summary(entries)[2]]
    assert summary(listed(lc, "bob", limit=1).json()["intents"]) == [summary(entries)[0]]
    recorded = listed(lc, state="recorded").json()["intents"]
    assert {e["event"]["action"] for e in recorded} >= {"bootstrap", "draft"}
    assert all(e["closed"]["note"] for e in recorded)

    # the lease passes: the next reader records the move, and it leaves the default list
    lc.client.app.state.workflow.intents.now_ns = lambda: lc.workflow.intents.now_ns() + LEASE_PASSED  # type: ignore[attr-defined]
    assert summary(listed(lc).json()["intents"]) == summary(entries)[1:]
    (completed,) = [e for e in listed(lc, state="recorded").json()["intents"]
                    if e["intent_id"] == held["intent_id"]]
    assert completed["closed"]["note"] == "its event was recovered by a reader"


def test_the_journal_is_read_with_the_history_s_roles_and_error_shape(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    withdrawn_disable(lc)
    refused = listed(lc, None)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "missing_api_key"
    forbidden = listed(lc, "shop")
    assert forbidden.status_code == 403
    assert_error_shape(forbidden.json(), "forbidden_role")
    for bad in ({"state": "recording"}, {"env": "production"}, {"limit": 0}, {"limit": 1001}):
        answer = listed(lc, **bad)
        assert answer.status_code == 422, (bad, answer.text)
        assert_error_shape(answer.json(), answer.json()["error"]["code"])
    assert [e["state"] for e in listed(lc, "alice").json()["intents"]] == ["withdrawn"]


def test_the_command_line_lists_the_journal_and_flags_recovered_events(
    lifecycle: Lifecycle, cli_env: Settings, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    lc = lifecycle
    assert cli_env.policies.index_prefix == lc.settings.policies.index_prefix
    withdrawn_disable(lc)
    recovered = crash_promotion(lc, event_write(lc, "promote"), dead_owner)

    code, out, err = run(capsys, "policy", "history", "--env", "live")
    assert code == 0, err
    newest = out.splitlines()[0]
    assert "bob" in newest and "promote" in newest and recovered[:12] in newest
    assert "RECOVERED by " in newest and "teas for winter" in newest, newest
    assert "RECOVERED" not in "".join(out.splitlines()[1:]), "only the recovered event says so"
    code, out, _ = run(capsys, "policy", "history", "--env", "live", "--json")
    assert json.loads(out)["events"][0]["details"]["recovered"]

    code, out, err = run(capsys, "policy", "intents")
    assert code == 0, err
    (line,) = out.splitlines()
    assert "bob" in line and "disable" in line and "live" in line
    assert "WITHDRAWN: its event could not be written; the alias was moved back" in line, line
    code, out, _ = run(capsys, "policy", "intents", "--json")
    (entry,) = json.loads(out)["intents"]
    assert entry["state"] == "withdrawn" and entry["event"]["reason"] == "the history cannot be written"
    code, out, _ = run(capsys, "policy", "intents", "--state", "recorded", "--env", "live", "--json")
    assert {e["event"]["action"] for e in json.loads(out)["intents"]} == {"bootstrap", "promote"}
    with pytest.raises(SystemExit) as usage:
        run(capsys, "policy", "intents", "--state", "recording")
    assert usage.value.code == EXIT_USAGE
