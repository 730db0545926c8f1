"""Mining the decision log: zero results, fallback tiers and reformulations in a session."""

from __future__ import annotations

import random
from typing import Any

from control_plane.lifecycle.suggest import Signal, mine


def record(
    request_id: str,
    intent: str | None,
    time: str,
    *,
    hits: int = 12,
    tier: str | None = "strict",
    status: str = "ok",
    session: str | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "kind": "decision",
        "request_id": request_id,
        "time": f"2026-11-15T12:{time}Z",
        "intent": intent,
        "status": status,
        "tier": tier,
        "hits": hits,
    }
    if session is not None:
        data["session_id"] = session
    return data


def zero(request_id: str, intent: str, time: str, session: str | None = None) -> dict[str, Any]:
    return record(request_id, intent, time, hits=0, tier=None, status="no_results", session=session)


def fallback(request_id: str, intent: str, time: str, session: str | None = None) -> dict[str, Any]:
    return record(request_id, intent, time, hits=4, tier="relaxed", session=session)


def test_zero_results_and_fallbacks_aggregate_per_normalised_intent() -> None:
    signals = mine([
        zero("r1", "Chocolat  Noire", "00:00"),
        zero("r2", "chocolat noire", "01:00"),
        record("r3", "chocolat noire", "02:00", hits=0, tier="strict"),  # 0 hits, whatever the status
        fallback("r4", "chocolate zzyzx", "03:00"),
        record("r5", "chocolate", "04:00"),
    ])
    assert signals == [
        Signal("zero_results", "chocolat noire", 3, None, ("r1", "r2", "r3")),
        Signal("fallback_tier", "chocolate zzyzx", 1, None, ("r4",)),
    ]


def test_failed_abstained_and_hashed_records_are_not_mined() -> None:
    hashed = zero("r2", "x", "01:00") | {"intent": None, "intent_sha256": "ab" * 32}
    signals = mine([
        record("r1", "chocolate", "00:00", hits=0, tier=None, status="error"),
        hashed,
        record("r3", "chocolate", "02:00", hits=0, tier=None, status="abstained"),
        {"kind": "event", "request_id": "r4", "intent": "chocolate", "hits": 0},
    ])
    assert signals == []


def test_a_reformulation_is_a_miss_followed_within_five_minutes_by_a_strict_success() -> None:
    signals = mine([
        zero("a1", "chocolat noire", "00:00", session="s1"),
        record("a2", "chocolat noire", "00:30", hits=0, tier=None, status="no_results", session="s1"),
        fallback("a3", "chocolat noir extra", "01:00", session="s1"),
        record("a4", "chocolat noir", "02:00", session="s1"),
        zero("b1", "chocolat noire", "10:00", session="s2"),
        record("b2", "chocolat noir", "14:59", session="s2"),
    ])
    reformulations = [s for s in signals if s.kind == "reformulation"]
    assert reformulations == [
        Signal("reformulation", "chocolat noire", 3, "chocolat noir", ("a1", "a2", "b1")),
        Signal("reformulation", "chocolat noir extra", 1, "chocolat noir", ("a3",)),
    ]


def test_no_reformulation_across_sessions_late_or_to_a_weak_result() -> None:
    signals = mine([
        zero("a1", "chocolat noire", "00:00", session="s1"),
        record("a2", "chocolat noir", "00:30", session="s2"),  # another session
        zero("b1", "vegan fudge", "10:00", session="s3"),
        record("b2", "fudge", "15:01", session="s3"),  # more than five minutes later
        zero("c1", "gummi bears", "20:00", session="s4"),
        fallback("c2", "gummy bears", "20:30", session="s4"),  # not served by strict
        zero("d1", "soda zero", "30:00"),
        record("d2", "soda", "30:10"),  # no session at all
    ])
    assert [s for s in signals if s.kind == "reformulation"] == []


def test_the_first_strict_success_ends_the_search_for_a_reformulation() -> None:
    signals = mine([
        zero("a1", "choco bar", "00:00", session="s1"),
        record("a2", "choco bar", "00:10", hits=0, tier=None, status="no_results", session="s1"),
        record("a3", "chocolate bar", "00:20", session="s1"),
        record("a4", "snickers", "00:30", session="s1"),
    ])
    assert [(s.intent, s.followed_by, s.count) for s in signals if s.kind == "reformulation"] == [
        ("choco bar", "chocolate bar", 2)
    ]


def test_order_of_records_does_not_matter_and_samples_are_the_earliest() -> None:
    records = [zero(f"r{n:02}", "qwxzyv", f"{n:02}:00") for n in range(10)]
    records += [fallback(f"f{n}", "chocolate zzyzx", f"{n:02}:30") for n in range(4)]
    shuffled = records[:]
    random.Random(7).shuffle(shuffled)
    assert mine(shuffled) == mine(records)
    assert mine(records)[0] == Signal("zero_results", "qwxzyv", 10, None, ("r00", "r01", "r02"))
    assert [s.kind for s in mine(records)] == ["zero_results", "fallback_tier"]
    assert mine(records)[1].as_json() == {
        "kind": "fallback_tier",
        "intent": "chocolate zzyzx",
        "count": 4,
        "followed_by": None,
        "request_ids": ["f0", "f1", "f2"],
    }

