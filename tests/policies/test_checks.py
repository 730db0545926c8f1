"""The checks' semantics on plain data (no engine): conformance, DSL subsets, operators,
paths, and that the documentation lists every expectation and operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control_plane.lifecycle.checks import conforms, resolve, satisfies, subset
from control_plane.lifecycle.suite import OPERATORS, Condition, Expectation, Results, TestCase
from control_plane.plan import Plan

DOCS = Path(__file__).resolve().parents[2] / "docs" / "policy-tests.md"

PLAN: dict[str, Any] = {
    "filters": [{"field": "brand", "values": ["x"], "policies": ["a"]}],
    "boosts": [
        {"field": "diet", "values": ["vegan"], "weight": 2.0, "policy": "v"},
        {"field": "diet", "values": ["keto"], "weight": 2.0, "policy": "k"},
    ],
    "price": {"min": None, "max": {"value": 5.0, "policy": "p", "relative": None}},
}


@pytest.mark.parametrize(
    ("path", "found", "value"),
    [
        ("filters.0.values", True, ["x"]),
        ("filters.brand.policies", True, ["a"]),
        ("boosts.k.values", True, ["keto"]),
        ("price.max.value", True, 5.0),
        ("price.min", True, None),
        ("boosts.diet", False, "plan.boosts has 2 elements whose field is 'diet'; pick one by position"),
        ("filters.1", False, "plan.filters has 1 elements (no index 1)"),
        ("filters.x", False, "plan.filters has no element whose field or policy is 'x' (elements: brand)"),
        ("price.avg", False, "plan.price has no field 'avg' (fields: min, max)"),
        ("price.max.value.x", False, "plan.price.max.value is 5.0, not a mapping or a list"),
    ],
)
def test_plan_paths(path: str, found: bool, value: Any) -> None:
    assert resolve(PLAN, path) == (found, value)


@pytest.mark.parametrize(
    ("expected", "actual", "result"),
    [
        ({"value": 5}, {"value": 5.0, "policy": "p"}, True),
        ({"value": 5, "policy": "q"}, {"value": 5.0, "policy": "p"}, False),
        ([{"field": "a"}], [{"field": "a", "values": []}], True),
        ([{"field": "a"}], [{"field": "a"}, {"field": "b"}], False),
        (["a", "b"], ["b", "a"], False),
        ([True], [1], False),
        (1, True, False),
        (None, None, True),
        (None, {"value": 1}, False),
    ],
)
def test_plan_values_conform(expected: Any, actual: Any, result: bool) -> None:
    assert conforms(expected, actual) is result


@pytest.mark.parametrize(
    ("fragment", "node", "result"),
    [
        ({"terms": {"a": [1]}}, {"terms": {"a": [1, 2], "_name": "x"}}, True),
        ({"must_not": [{"b": 2}, {"a": 1}]}, {"must_not": [{"a": 1}, {"b": 2, "c": 3}]}, True),
        ({"must_not": [{"a": 9}]}, {"must_not": [{"a": 1}]}, False),
        ({"x": True}, {"x": 1}, False),
        ({"x": 1}, {"x": 1.0}, True),
    ],
)
def test_dsl_fragments_are_deep_subsets(fragment: Any, node: Any, result: bool) -> None:
    assert subset(fragment, node) is result


@pytest.mark.parametrize(
    ("condition", "value", "result"),
    [
        ({"lte": 5}, 5.0, True),
        ({"gte": 1, "lt": 5}, 5, False),
        ({"gt": 0}, True, False),
        ({"gt": 0}, "7", False),
        ("Oranges", "Oranges", True),
        ({"eq": ["a", "b"]}, ["a", "b"], True),
        ({"ne": "x"}, "y", True),
        ({"in": ["fr", "de"]}, "fr", True),
        ({"in": ["fr", "de"]}, ["us", "de"], True),
        ({"in": ["fr"]}, ["us"], False),
        ({"contains": "peanuts"}, ["milk", "peanuts"], True),
        ({"contains": "nut"}, ["peanuts"], False),
        ({"contains": "Choc"}, "Dark Chocolate", True),
        ({"ne": "x"}, None, False),
        ({"eq": True}, 1, False),
    ],
)
def test_condition_operators(condition: Any, value: Any, result: bool) -> None:
    assert satisfies(value, Condition.model_validate(condition)) is result


def test_the_reference_lists_every_expectation_operator_and_plan_field() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for model in (TestCase, Expectation, Results):
        for name in model.model_fields:
            if name not in ("file", "line"):
                assert f"| `{name}` |" in text, name
    for op in OPERATORS:
        assert f"| `{op}` |" in text, op
    for name in Plan.model_fields:
        assert f"`{name}`" in text, name
