"""The explanation records the composer builds without validation are what validation gives.

Inside the cascade the composer makes its records (``MatchedPolicy``, ``AppliedStep``,
``Change``, ``Skipped``, ``Resolution``) with :func:`control_plane.composer_state.made` and
copies plans with :func:`~control_plane.composer_state.replaced`, skipping pydantic's
validation: their inputs were validated at the edges. Revalidating a whole composition from
its dump must give an equal composition (a list where a tuple belongs, a missing field or
a wrong type would differ), on every case file and on random requests.
"""

from __future__ import annotations

from hypothesis import given, settings

from control_plane.composer import ComposeContext, compose
from control_plane.composer_state import made, replaced
from control_plane.plan import Composition, Match, Plan, Resolution
from control_plane.policy import PolicySet
from tests.composer.casefile import all_cases
from tests.composer.test_properties import requests


def _revalidates(composition: Composition) -> None:
    again = Composition.model_validate(composition.model_dump())
    assert again == composition
    assert again.model_dump_json() == composition.model_dump_json()
    assert Composition.model_validate_json(composition.model_dump_json()) == composition


def test_every_case_file_composition_revalidates_to_itself() -> None:
    compositions = [
        compose(case.policy_set, case.intent, case.matches, case.context)
        for case in all_cases()
        if "error" not in case.expect
    ]
    assert any(c.explanation.resolutions for c in compositions)
    assert any(c.explanation.skipped for c in compositions)
    for composition in compositions:
        _revalidates(composition)


@settings(max_examples=200, deadline=None)
@given(requests())
def test_random_compositions_revalidate_to_themselves(
    request: tuple[PolicySet, str, list[Match], ComposeContext],
) -> None:
    policies, intent, matches, context = request
    _revalidates(compose(policies, intent, matches, context))


def test_the_helpers_give_what_pydantic_gives() -> None:
    fields = {"field": "category", "strategy": "override", "winner": "a", "losers": ("b",), "reason": "r"}
    assert made(Resolution, dict(fields)) == Resolution(**fields)
    assert made(Resolution, dict(fields)).model_dump_json() == Resolution(**fields).model_dump_json()
    plan = Plan(residual="cheap chocolate", pins=("p1",))
    copied = replaced(plan, {"residual": "chocolate"})
    assert copied == plan.model_copy(update={"residual": "chocolate"})
    assert copied.model_fields_set == plan.model_copy(update={"residual": "chocolate"}).model_fields_set
    assert plan.residual == "cheap chocolate"  # the original is untouched
    assert made(Resolution, {**fields, "losers": ["b"]}) != Resolution(**fields)  # what the check catches


def test_made_records_share_one_fields_set_and_copies_do_not_touch_it() -> None:
    """``made`` gives every record of a class the same set of (all) its fields: pydantic
    reads it (``model_fields_set``, ``exclude_unset``) and copies it before changing it."""
    values = {"field": "category", "strategy": "override", "winner": "a", "losers": ("b",), "reason": "r"}
    first, second = made(Resolution, dict(values)), made(Resolution, dict(values))
    assert first.model_fields_set == set(Resolution.model_fields) == second.model_fields_set
    copied = first.model_copy(update={"reason": "other"})
    assert copied.reason == "other" and first.reason == "r"
    assert first.model_fields_set == set(Resolution.model_fields)
    assert first.model_dump(exclude_unset=True) == Resolution(**values).model_dump(exclude_unset=True)
