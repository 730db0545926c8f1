"""The composer's docstring is its specification: it must name everything the code can emit."""

from __future__ import annotations

from typing import get_args

import control_plane.composer as composer
from control_plane.composer import compose
from control_plane.plan import Plan, Skipped
from control_plane.policy import RULE_MODELS
from tests.composer.casefile import all_cases

SPEC = composer.__doc__ or ""


def _strategies() -> set[str]:
    found: set[str] = set()
    for model in RULE_MODELS.values():
        if "strategy" in model.model_fields:
            found.update(get_args(model.model_fields["strategy"].annotation))
    return found


def test_every_rule_kind_is_specified() -> None:
    assert [kind for kind in RULE_MODELS if f"``{kind}``" not in SPEC] == []


def test_every_rule_strategy_is_specified() -> None:
    assert sorted(s for s in _strategies() if f"``{s}``" not in SPEC) == []


def test_every_plan_field_is_specified() -> None:
    fields = [name for name in Plan.model_fields if name != "applied"]
    assert [name for name in fields if f"``{name}``" not in SPEC] == []


def test_every_skip_code_is_specified() -> None:
    codes = get_args(Skipped.model_fields["code"].annotation)
    assert [code for code in codes if f"``{code}``" not in SPEC] == []


def test_every_recorded_strategy_is_specified() -> None:
    recorded = {
        resolution.strategy
        for case in all_cases()
        if "error" not in case.expect
        for resolution in compose(
            case.policy_set, case.intent, case.matches, case.context
        ).explanation.resolutions
    }
    assert len(recorded) >= 10
    assert sorted(s for s in recorded if f"``{s}``" not in SPEC) == []
