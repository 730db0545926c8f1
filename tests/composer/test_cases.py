"""The composer's table-driven cases: every ``cases/*.yaml`` (format in ``casefile.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from control_plane.composer import compose
from control_plane.plan import Composition
from tests.composer.casefile import Case, all_cases, dig

CASES = all_cases()


def _subset(expected: dict[str, Any], actual: dict[str, Any]) -> bool:
    for key, value in expected.items():
        if key == "reason_contains":
            if value not in actual["reason"]:
                return False
        elif actual.get(key) != value:
            return False
    return True


def _check(case: Case, composition: Composition) -> None:
    expect = case.expect
    plan = composition.plan.model_dump(mode="json")
    explanation = composition.explanation.model_dump(mode="json")
    if "applied" in expect:
        assert list(composition.plan.applied) == expect["applied"]
        assert [step["policy_id"] for step in explanation["applied"]] == expect["applied"]
    if "matched" in expect:
        assert [m["policy_id"] for m in explanation["matched"]] == expect["matched"]
    if "skipped" in expect:
        skipped = {s["policy_id"]: s["code"] for s in explanation["skipped"]}
        assert skipped == expect["skipped"], explanation["skipped"]
    if "residual" in expect:
        assert composition.plan.residual == expect["residual"]
        assert explanation["residual"] == expect["residual"]
    for path, value in (expect.get("plan") or {}).items():
        assert dig(plan, path) == value, f"plan.{path}"
    for path, value in (expect.get("explanation") or {}).items():
        assert dig(explanation, path) == value, f"explanation.{path}"
    for wanted in expect.get("resolutions") or []:
        assert any(_subset(wanted, r) for r in explanation["resolutions"]), (
            f"no resolution like {wanted} in {explanation['resolutions']}"
        )
    for wanted in expect.get("captures") or []:
        assert any(_subset(wanted, c) for c in explanation["captures"]), (
            f"no capture like {wanted} in {explanation['captures']}"
        )
    steps = {step["policy_id"]: step for step in explanation["applied"]}
    for policy_id, fields in (expect.get("changes") or {}).items():
        assert [c["field"] for c in steps[policy_id]["changes"]] == fields, policy_id


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case(case: Case) -> None:
    if "error" in case.expect:
        with pytest.raises(ValueError, match=case.expect["error"]):
            compose(case.policy_set, case.intent, case.matches, case.context)
        return
    composition = compose(case.policy_set, case.intent, case.matches, case.context)
    _check(case, composition)
    again = compose(case.policy_set, case.intent, tuple(reversed(case.matches)), case.context)
    assert again.model_dump_json() == composition.model_dump_json()


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
