"""Per-policy impact: what happened on the requests a policy fired on, against requests
of the same intents where it did not fire (another version, a window, a cohort).

Rates are per request: ``zero_result_rate`` (no results), ``click_through_rate`` (at
least one click), ``add_to_cart_rate`` and ``conversion_rate`` (at least one purchase).
Failed requests and agent abstentions (no search was served) are left out. The comparison
is None when no such request exists.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from control_plane.audit.record import intent_key


def figures(records: list[dict[str, Any]], events: dict[str, set[str]]) -> dict[str, Any]:
    count = len(records)

    def rate(hits: int) -> float | None:
        return round(hits / count, 4) if count else None

    def with_event(kind: str) -> int:
        return sum(1 for r in records if kind in events.get(r["request_id"], set()))

    return {
        "requests": count,
        "zero_results": sum(1 for r in records if r.get("hits", 0) == 0),
        "zero_result_rate": rate(sum(1 for r in records if r.get("hits", 0) == 0)),
        "clicks": with_event("click"),
        "click_through_rate": rate(with_event("click")),
        "add_to_cart_rate": rate(with_event("add_to_cart")),
        "conversions": with_event("purchase"),
        "conversion_rate": rate(with_event("purchase")),
    }


def impact(
    policy_id: str, records: Iterable[dict[str, Any]], events: Iterable[dict[str, Any]]
) -> dict[str, Any]:
    served = [r for r in records if not r.get("error") and r.get("status") != "abstained"]
    kinds: dict[str, set[str]] = {}
    for event in events:
        kinds.setdefault(event["request_id"], set()).add(event["type"])
    fired = [r for r in served if policy_id in r.get("applied_policies", [])]
    intents = {key for r in fired if (key := intent_key(r)) is not None}
    without = [
        r for r in served if policy_id not in r.get("applied_policies", []) and intent_key(r) in intents
    ]
    return {
        "policy_id": policy_id,
        "fired": figures(fired, kinds),
        "without": figures(without, kinds) if without else None,
        "intents": len(intents),
    }
