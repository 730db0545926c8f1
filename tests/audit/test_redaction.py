"""With raw storage off, no word of the intent survives in any part of the explanation a
decision record keeps: spans, captures, the residual, but also skip and resolution reasons
(which quote spans) and applied changes (which carry captured values as written)."""

from __future__ import annotations

import json
from typing import Any

from control_plane.audit.record import explanation_fields

SECRET_EMAIL, SECRET_PHONE = "jane.doe@example.com", "0612345678"


def explanation() -> dict[str, Any]:
    span = {"start": 0, "end": 20, "text": SECRET_EMAIL}
    return {
        "matched": [{"policy_id": "p", "spans": [span]}],
        "applied": [{
            "policy_id": "p",
            "consumed": [span],
            "changes": [
                {"field": "boosts", "before": None, "after": [{"values": [SECRET_PHONE], "weight": 2.0}]}
            ],
            "explain": "x",
            "dropped": [],
        }],
        "skipped": [
            {"policy_id": "q", "code": "span_consumed", "reason": f"'{SECRET_EMAIL}' was consumed by p"}
        ],
        "resolutions": [{"field": "category", "strategy": "override", "winner": "p", "losers": ["q"],
                         "reason": f"p captured {SECRET_PHONE}"}],
        "captures": [{"policy_id": "p", "name": "item", "text": SECRET_PHONE}],
        "residual": f"call {SECRET_PHONE}",
    }


def test_nothing_of_the_intent_is_kept_when_raw_storage_is_off() -> None:
    kept = json.dumps(explanation_fields(explanation(), raw=False))
    for secret in (SECRET_EMAIL, "example.com", SECRET_PHONE):
        assert secret not in kept, secret
    fields = explanation_fields(explanation(), raw=False)
    assert fields["applied"][0]["changes"][0]["after"][0]["weight"] == 2.0  # numbers are not words
    assert fields["skipped"][0]["policy_id"] == "q" and fields["resolutions"][0]["winner"] == "p"


def test_everything_is_kept_when_raw_storage_is_on() -> None:
    assert explanation_fields(explanation(), raw=True) == {
        key: value for key, value in explanation().items()
    }
