"""The plan and its explanation as JSON data in one pass are what the two passes gave
(``json.loads(model.model_dump_json())``): the same data and the same JSON text, on every
case file, on random requests and on values JSON cannot write (ADR 0046)."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from pydantic import BaseModel

from control_plane.audit.record import canonical_bytes
from control_plane.composer import ComposeContext, compose
from control_plane.composer_state import made
from control_plane.plan import (
    AppliedStep,
    Boost,
    Bound,
    Change,
    Composition,
    Constraint,
    Explanation,
    Match,
    Plan,
    PriceBounds,
    Sponsored,
    Weight,
)
from control_plane.plan_data import explanation_data, plan_data
from control_plane.policy import PolicySet
from tests.composer.casefile import all_cases
from tests.composer.test_properties import requests

NOT_FINITE = (float("inf"), float("-inf"), float("nan"))


def _text(data: Any) -> str:
    """Types matter (``1 == 1.0``): compare the JSON text too, ``nan`` included."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def _same(model: BaseModel, data: dict[str, Any]) -> None:
    reference = json.loads(model.model_dump_json())
    assert data == reference  # lists, not tuples
    assert _text(data) == _text(reference)
    assert list(data) == list(reference)  # the key order too (the answer's explanation keeps it)
    assert canonical_bytes(data) == canonical_bytes(reference)  # what the record hashes


def _holds(composition: Composition) -> None:
    _same(composition.explanation, explanation_data(composition.explanation))
    _same(composition.plan, plan_data(composition.plan))


def _case_file_compositions() -> list[Composition]:
    return [
        compose(case.policy_set, case.intent, case.matches, case.context)
        for case in all_cases()
        if "error" not in case.expect
    ]


def test_every_case_file_composition() -> None:
    compositions = _case_file_compositions()
    assert any(c.plan.price.min or c.plan.price.max for c in compositions)
    assert any(c.plan.boosts for c in compositions)
    assert any(c.explanation.applied and c.explanation.applied[0].changes for c in compositions)
    for composition in compositions:
        _holds(composition)


@settings(max_examples=200, deadline=None)
@given(requests())
def test_random_compositions(request: tuple[PolicySet, str, list[Match], ComposeContext]) -> None:
    policies, intent, matches, context = request
    _holds(compose(policies, intent, matches, context))


@pytest.mark.parametrize("number", NOT_FINITE)
@pytest.mark.parametrize(
    "where",
    ["price.min", "price.max", "boost.weight", "boost.values", "sponsored", "margin", "popularity",
     "category", "filter", "exclusion", "guard", "guard_exclusion"],
)
def test_a_plan_with_a_float_that_is_not_finite_gives_what_json_gave(number: float, where: str) -> None:
    """JSON writes it ``null``; pydantic's JSON mode would keep it: the two passes then."""
    def boost(values: tuple[object, ...], weight: float) -> Boost:
        return Boost(field="f", values=values, weight=weight, policy="p")

    keyword = Constraint(field="brand", values=("acme", number), policies=("p",))
    plans = {
        "price.min": Plan(residual="x", price=PriceBounds(min=Bound(value=number, policy="p"))),
        "price.max": Plan(residual="x", price=PriceBounds(max=Bound(value=number, policy="p", relative=9))),
        "boost.weight": Plan(residual="x", boosts=(boost(values=("a",), weight=number),)),
        "boost.values": Plan(residual="x", boosts=(boost(values=(1, number), weight=2),)),
        "sponsored": Plan(residual="x", sponsored=(Sponsored(ids=("a",), weight=number, policy="p"),)),
        "margin": Plan(residual="x", margin_weight=Weight(value=number, policy="p")),
        "popularity": Plan(residual="x", popularity_weight=Weight(value=number, policy="p")),
        "category": Plan(residual="x", category=keyword),
        "filter": Plan(residual="x", filters=(keyword,)),
        "exclusion": Plan(residual="x", exclusions=(keyword,)),
        "guard": Plan(residual="x", guards=(keyword,)),
        "guard_exclusion": Plan(residual="x", guard_exclusions=(keyword,)),
    }
    plan = plans[where]
    if "boost" in where or where in ("price.min", "price.max", "sponsored", "margin", "popularity"):
        assert plan.model_dump(mode="json") != json.loads(plan.model_dump_json())  # what it guards against
    # (a constraint's own serialiser hands its values on untyped: null either way, checked all the same)
    _same(plan, plan_data(plan))


def test_an_explanation_with_values_json_cannot_write_gives_what_json_gave() -> None:
    """A change's values are ``object``: not finite, tuples, keys that are not text, integers
    past 64 bits, tiny floats, text outside ASCII."""
    change = Change(
        field="price",
        before={"min": {"value": float("inf"), "pair": (1, 2)}, 3: float("nan")},
        after=[float("-inf"), 10**30, 1e-7, 2.0, "é", None, True],
    )
    step = AppliedStep(policy_id="p", consumed=(), changes=(change,), explain="why")
    explanation = Explanation(
        policy_set_version="v", intent="x", matched=(), applied=(step,), skipped=(), residual="x",
        resolutions=(), captures=(),
    )
    _same(explanation, explanation_data(explanation))


def _float_fields(model: type[BaseModel], seen: set[type] | None = None) -> set[str]:
    """``Class.field`` of every field in ``model``'s tree whose type holds a ``float``,
    inside any container or union."""
    seen = set() if seen is None else seen
    if model in seen:
        return set()
    seen.add(model)
    found: set[str] = set()
    hints = typing.get_type_hints(model)
    for name in model.model_fields:
        for part in _parts(hints[name]):
            if part is float:
                found.add(f"{model.__name__}.{name}")
            elif isinstance(part, type) and issubclass(part, BaseModel):
                found |= _float_fields(part, seen)
    return found


def _parts(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is None:
        return [annotation]
    if origin is typing.Literal:
        return []
    arguments = [argument for argument in typing.get_args(annotation) if argument is not Ellipsis]
    return [part for argument in arguments for part in _parts(argument)]


def test_parts_sees_floats_in_every_container() -> None:
    class Holder(BaseModel):
        ratings: dict[str, float] = {}
        nested: list[tuple[int, float | None]] = []
        text: str = ""

    assert _float_fields(Holder) == {"Holder.ratings", "Holder.nested"}


def test_the_explanation_has_no_float_field() -> None:
    """Why the explanation may take the one pass without a walk: a field typed ``float``
    anywhere in its tree fails here."""
    assert _float_fields(Explanation) == set()


def _plain(value: object) -> bool:
    if value is None or type(value) in (str, int, float, bool):
        return True
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(map(_plain, value))
    return False


def _changes_are_plain(composition: Composition) -> None:
    for step in composition.explanation.applied:
        for change in step.changes:
            assert _plain(change.before), change
            assert _plain(change.after), change


def test_the_composer_records_changes_as_plain_data_on_every_case_file() -> None:
    """The other half of why the explanation takes the one pass: its untyped values are plain
    data (a model kept there would keep a float that is not finite in JSON mode)."""
    compositions = _case_file_compositions()
    assert any(step.changes for c in compositions for step in c.explanation.applied)
    for composition in compositions:
        _changes_are_plain(composition)


@settings(max_examples=200, deadline=None)
@given(requests())
def test_the_composer_records_changes_as_plain_data(
    request: tuple[PolicySet, str, list[Match], ComposeContext],
) -> None:
    policies, intent, matches, context = request
    _changes_are_plain(compose(policies, intent, matches, context))


class _Later(Plan):
    """A plan with fields added after ``plan_data`` was written: of a type the plan has
    already (a weight), in a container, and a float subclass where a float is typed."""

    discount_weight: Weight = Weight()
    ratings: dict[str, float] = {}


class _Float(float):
    pass


@pytest.mark.parametrize("number", NOT_FINITE)
@pytest.mark.parametrize("where", ["new weight", "new mapping", "float subclass"])
def test_a_float_that_is_not_finite_anywhere_in_the_plan_gives_what_json_gave(
    number: float, where: str
) -> None:
    """A plan keeps the two passes: a field added later is written as JSON text writes it."""
    if where == "new weight":
        plan: Plan = _Later(residual="x", discount_weight=Weight(value=number, policy="p"))
    elif where == "new mapping":
        plan = _Later(residual="x", ratings={"a": 1.5, "b": number})
    else:
        plan = Plan(residual="x", margin_weight=made(Weight, {"value": _Float(number), "policy": "p"}))
    assert plan.model_dump(mode="json") != json.loads(plan.model_dump_json())  # what it guards against
    _same(plan, plan_data(plan))
