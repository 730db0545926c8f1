"""Drill: two approvers move live at the same instant, through the HTTP API on the real
engine. Every trial must end with exactly one index under live, the loser answered 409
``concurrent_change`` naming the version that won, no history event for the loser, and the
history's newest live event naming the version actually served.

The promotion racing a rollback or the kill switch is forced, not hoped for: the API's
workflow runs on the real engine wrapped with a gate (tests/drills/gates.py) that holds both
live alias moves until both calls have read live and checked against it, then lets one
through first, the promotion in even trials and the other move in odd ones. The one let
through first must win and the other must lose the compare-and-swap.

Figures: ``bench/results/drills/concurrent-promotion.json`` and
``promote-vs-rollback-disable.json`` (``make drills``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.lifecycle.export import export_policy_set
from control_plane.lifecycle.suite import load_suite
from control_plane.lifecycle.workflow import LIVE_MOVES
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy
from tests.drills.gates import GatedEngine, alias_move, gated_api, send
from tests.drills.results import record
from tests.e2e.conftest import ready, service, settings  # noqa: F401
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401

pytestmark = pytest.mark.drill

TRIALS = 20
MIXED_TRIALS = 4


@dataclass(frozen=True)
class Answer:
    who: str
    what: str
    status: int
    body: dict[str, Any]

    @property
    def code(self) -> str | None:
        error = self.body.get("error")
        return error["code"] if error else None


def candidates(lc: Lifecycle, tmp_path: Path) -> tuple[str, str, str]:
    """Two staging versions (the demo set plus one policy each), authored by dan, tested,
    approved by bob; and the policy only the first one has."""
    wf, people = lc.workflow, lc.principals
    demo, suite = load_policy_set("policies"), load_suite("policies")
    versions = []
    for n, word in enumerate(("clementines", "mandarins")):
        extra = Policy.model_validate({
            "id": f"drill-{word}", "title": word, "owner": "drill",
            "trigger": {"phrase": [word]}, "rules": [{"category": {"values": ["Clementines"]}}],
        })
        candidate = build_policy_set([*demo.policies, extra], demo.vocabularies, demo.governance)
        export_policy_set(candidate, tmp_path / f"candidate{n}", suite=suite)
        version = wf.apply_directory(people["dan"], tmp_path / f"candidate{n}", f"drill {word}").version
        assert wf.test(people["dan"], version).passed
        wf.approve(people["bob"], version, "drill")
        versions.append(version)
    return versions[0], versions[1], "drill-clementines"


def at_once(lc: Lifecycle, calls: list[tuple[str, str, str, dict[str, Any]]]) -> list[Answer]:
    """Send every (who, what, path, body) at the same instant; the answers, in order."""
    barrier = threading.Barrier(len(calls))
    answers: list[Answer | None] = [None] * len(calls)

    def send(n: int, who: str, what: str, path: str, body: dict[str, Any]) -> None:
        barrier.wait()
        response = lc.call("POST", path, who, json=body)
        answers[n] = Answer(who, what, response.status_code, response.json())

    threads = [threading.Thread(target=send, args=(n, *call)) for n, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert all(answers), "a request did not come back"
    return [a for a in answers if a is not None]


def served(lc: Lifecycle) -> tuple[list[str], str]:
    """The indices under live, and the version the API serves."""
    alias = policy_store.alias_name(lc.settings.policies.index_prefix, "live")
    targets = lc.engine.alias_targets(alias)
    search = lc.client.post("/v1/search", json={"intent": "oranges"})
    assert search.status_code == 200, search.text
    return targets, search.json()["policy_set_version"]


def check_trial(lc: Lifecycle, answers: list[Answer], moves_before: int) -> dict[str, Any]:
    """The invariants of one trial; its figures."""
    targets, version = served(lc)
    assert len(targets) == 1, f"live is on {targets}"
    assert policy_store.read_index(lc.engine, targets[0]).policy_set.version == version
    moves = lc.workflow.history(env="live", action=LIVE_MOVES)
    won = [a for a in answers if a.status == 200]
    lost = [a for a in answers if a.status != 200]
    assert len(moves) - moves_before == len(won), "a live move without its event, or the reverse"
    assert moves[0].version == version, "the history's newest live event is not what is served"
    for answer in lost:
        assert (answer.status, answer.code) == (409, "concurrent_change"), answer
        assert answer.body["error"]["details"][0]["version"] == version, answer.body
    refused = lc.workflow.history(outcome="refused", action=("promote", "rollback", "disable"))
    assert all(e.code != "concurrent_change" for e in refused), "the loser was recorded"
    return {
        "statuses": [a.status for a in answers],
        "outcomes": [f"{a.who} {a.what}: {a.status} {a.code or 'ok'}" for a in answers],
        "winner": next((a.what for a in won), None),
        "live_indices": len(targets),
        "history_names_served": moves[0].version == version,
    }


def reset_live(lc: Lifecycle, version: str) -> None:
    if lc.workflow.environment("live").version != version:
        lc.workflow.rollback(lc.principals["bob"], version, "drill reset")


def test_concurrent_promotions(lifecycle: Lifecycle, tmp_path: Path) -> None:  # noqa: F811
    lc = lifecycle
    original = lc.workflow.environment("live").version
    first, second, _ = candidates(lc, tmp_path)
    started = time.monotonic()
    trials = []
    for trial in range(TRIALS):
        reset_live(lc, original)
        moves_before = len(lc.workflow.history(env="live", action=LIVE_MOVES))
        pair = (first, second) if trial % 2 == 0 else (second, first)
        answers = at_once(lc, [
            ("alice", f"promote {pair[0][:12]}", "/v1/policies/promote", {"version": pair[0]}),
            ("bob", f"promote {pair[1][:12]}", "/v1/policies/promote", {"version": pair[1]}),
        ])
        figures = check_trial(lc, answers, moves_before)
        assert sorted(figures["statuses"]) == [200, 409], figures
        trials.append(figures)
    seconds = round(time.monotonic() - started, 1)
    record("concurrent-promotion", {
        "drill": "two approvers promote two staging versions at the same instant (HTTP API, real engine)",
        "command": "make drills (pytest -m drill tests/drills/test_concurrent_promotion.py)",
        "trials": TRIALS,
        "one_index_under_live": sum(t["live_indices"] == 1 for t in trials),
        "one_200_one_409": sum(sorted(t["statuses"]) == [200, 409] for t in trials),
        "history_consistent": sum(t["history_names_served"] for t in trials),
        "winners": dict(Counter(str(t["winner"]) for t in trials)),
        "winning_approver": dict(Counter(
            next(o.split()[0] for o in t["outcomes"] if " 200 " in o) for t in trials
        )),
        "seconds": seconds,
        "per_trial": trials,
    })


def forced(
    lc: Lifecycle,
    gated: GatedEngine,
    calls: list[tuple[str, str, str, dict[str, Any]]],
    promoted: str,
    promotion_first: bool,
) -> list[Answer]:
    """Send a promotion of ``promoted`` (``calls[0]``) and another live move (``calls[1]``)
    at once, and make them race for certain: each is held at its live alias move until both
    have read live and checked against it; then the promotion's move goes through first (or
    the other's), then the other. The answers, in ``calls`` order."""
    prefix = lc.settings.policies.index_prefix
    live = lc.workflow.environment("live").index
    gate = gated.gate(alias_move(prefix, "live"), limit=2)
    sent = [send(lc, "POST", path, who, json=body) for who, _, path, body in calls]
    held = gate.reached()
    # the race happened: both calls read the same live index and are about to move it
    assert [h.expects() for h in held] == [[live], [live]], [h.body for h in held]
    promotion = [h for h in held if h.adds() == [policy_store.index_name(prefix, promoted)]]
    assert len(promotion) == 1, [h.body for h in held]
    other = next(h for h in held if h is not promotion[0])
    before, after = (promotion[0], other) if promotion_first else (other, promotion[0])
    before.through()
    after.open()
    responses = [future.result(timeout=120) for future in sent]
    return [
        Answer(who, what, response.status_code, response.json())
        for (who, what, _, _), response in zip(calls, responses, strict=True)
    ]


def test_promotion_racing_rollback_and_kill_switch(lifecycle: Lifecycle, tmp_path: Path) -> None:  # noqa: F811
    lc = lifecycle
    original = lc.workflow.environment("live").version
    first, second, only_in_first = candidates(lc, tmp_path)
    lc.workflow.promote(lc.principals["bob"], first, "drill")
    races: dict[str, Callable[[], list[tuple[str, str, str, dict[str, Any]]]]] = {
        "promote-vs-rollback": lambda: [
            ("alice", "promote", "/v1/policies/promote", {"version": second}),
            ("bob", "rollback", "/v1/policies/rollback", {"to": original}),
        ],
        "promote-vs-disable": lambda: [
            ("alice", "promote", "/v1/policies/promote", {"version": second}),
            ("bob", "disable", f"/v1/policies/live/policies/{only_in_first}/disable", {"reason": "drill"}),
        ],
    }
    gated, _ = gated_api(lc)
    figures: dict[str, Any] = {}
    for name, calls in races.items():
        trials = []
        for trial in range(MIXED_TRIALS):
            reset_live(lc, first)
            moves_before = len(lc.workflow.history(env="live", action=LIVE_MOVES))
            promotion_first = trial % 2 == 0
            answers = forced(lc, gated, calls(), second, promotion_first)
            figures_of_trial = check_trial(lc, answers, moves_before)
            # the move let through first won; the other lost the compare-and-swap
            assert [a.status for a in answers] == ([200, 409] if promotion_first else [409, 200]), answers
            trials.append(figures_of_trial)
        figures[name] = {
            "trials": MIXED_TRIALS,
            "one_index_under_live": sum(t["live_indices"] == 1 for t in trials),
            "history_consistent": sum(t["history_names_served"] for t in trials),
            "outcomes": dict(Counter(" / ".join(sorted(t["outcomes"])) for t in trials)),
        }
    record("promote-vs-rollback-disable", {
        "drill": "a promotion racing a rollback, and one racing the kill switch (HTTP API, real engine)",
        "command": "make drills (pytest -m drill tests/drills/test_concurrent_promotion.py)",
        "note": "the race is forced: a gate around the real engine holds both live alias moves until both"
        " calls read live, then lets one through first (the promotion in even trials, the other move in odd"
        " ones); the first wins, the other is 409 concurrent_change",
        **figures,
    })
