"""Impact figures and the plan diff, as pure functions."""

from __future__ import annotations

from typing import Any

from control_plane.audit.impact import impact
from control_plane.audit.replay import diff


def _record(rid: str, intent: str, applied: list[str], hits: int = 5, error: bool = False) -> dict[str, Any]:
    return {
        "request_id": rid,
        "intent_sha256": intent,
        "applied_policies": applied,
        "hits": hits,
        "error": {"code": "engine_unavailable"} if error else None,
    }


def test_impact_against_the_same_intents_without_the_policy() -> None:
    records = [
        _record("a", "i1", ["promo"]),
        _record("b", "i1", ["promo"], hits=0),
        _record("c", "i1", []),
        _record("d", "i1", []),
        _record("e", "i2", []),
        _record("f", "i1", ["promo"], error=True),
    ]
    events = [
        {"request_id": "a", "type": "click"},
        {"request_id": "a", "type": "purchase"},
        {"request_id": "c", "type": "click"},
        {"request_id": "d", "type": "click"},
        {"request_id": "e", "type": "click"},
    ]
    report = impact("promo", records, events)
    assert report["fired"] == {
        "requests": 2,
        "zero_results": 1,
        "zero_result_rate": 0.5,
        "clicks": 1,
        "click_through_rate": 0.5,
        "add_to_cart_rate": 0.0,
        "conversions": 1,
        "conversion_rate": 0.5,
    }
    without = report["without"]
    assert without["requests"] == 2 and without["click_through_rate"] == 1.0  # "e" is another intent
    assert without["conversion_rate"] == 0.0
    assert impact("unknown", records, events)["fired"]["requests"] == 0


def test_diff_is_field_level() -> None:
    before = {"residual": "x", "price": {"max": {"value": 5.0, "policy": "cheap"}, "min": None}, "pins": []}
    after = {"residual": "x", "price": {"max": {"value": 4.0, "policy": "xmas"}, "min": None}, "pins": ["p1"]}
    assert diff(before, after) == [
        {"field": "pins", "before": [], "after": ["p1"]},
        {"field": "price.max.policy", "before": "cheap", "after": "xmas"},
        {"field": "price.max.value", "before": 5.0, "after": 4.0},
    ]
