"""Clauses rendered once per distinct values (``renderer._FRAGMENTS``) give what Jinja gives.

The renderer reuses the skeleton and holes of a clause whose values it has seen before. The
reference is the text round trip of ``test_text_equivalence`` (every clause through Jinja,
printed and parsed): on every composer case file, both engines, all tiers, with the cache
cold, warm, and warmed by other cases first, ``json.dumps(body)`` (key order included) must
be the same. A policy that changes in a new version must never get its old fragment back.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import control_plane.renderer as renderer
from control_plane.composer import compose
from control_plane.plan import Boost, Constraint, Plan
from control_plane.renderer import render
from tests.composer.casefile import all_cases
from tests.renderer.cases import PROFILE
from tests.renderer.test_text_equivalence import text_clause

PLANS = [
    (case.id, compose(case.policy_set, case.intent, case.matches, case.context).plan)
    for case in all_cases()
    if "error" not in case.expect
]


def _bodies(plan: Plan) -> list[str]:
    return [
        json.dumps(
            render(plan, PROFILE, engine=engine, tier=tier, personalization=[("p1", 2.0)]),
            ensure_ascii=False,
        )
        for engine in renderer.ENGINES
        for tier in renderer.TIERS
    ]


def _reference(plan: Plan, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patched:
        patched.setattr(renderer, "_clause", text_clause)
        patched.setattr(renderer, "_FRAGMENT_CACHE", False)  # the kept facets and boosts too
        return _bodies(plan)


def test_composer_cases_render_as_the_reference_cold_warm_and_mixed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert PLANS
    references = {name: _reference(plan, monkeypatch) for name, plan in PLANS}
    renderer._FRAGMENTS.clear()
    for name, plan in PLANS:  # cold for this case's own clauses, warmed by the earlier cases
        assert _bodies(plan) == references[name], name
    for name, plan in reversed(PLANS):  # every clause from the cache
        assert _bodies(plan) == references[name], name
    assert renderer._FRAGMENTS  # the fast path was taken


def test_the_cache_off_is_the_same_path_as_jinja(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renderer, "_FRAGMENT_CACHE", False)
    renderer._FRAGMENTS.clear()
    for name, plan in PLANS[:20]:
        assert _bodies(plan) == _reference(plan, monkeypatch), name
    assert not renderer._FRAGMENTS


def _versioned(values: tuple[Any, ...], weight: float) -> Plan:
    """The plan of policy ``p`` in one version: same id and clause names, other values."""
    return Plan(
        residual="chocolate",
        filters=(Constraint(field="brand", values=values, policies=("p",)),),
        boosts=(Boost(field="labels", values=values, weight=weight, policy="p"),),
    )


@pytest.mark.parametrize(
    "old, new",
    [
        (("a",), ("b",)),
        ((1,), (True,)),  # equal and hash-equal in Python, different JSON
        ((1,), (1.0,)),
        ((0.0,), (-0.0,)),
        (("a", "b"), ("a",)),
    ],
)
def test_a_new_version_of_a_policy_never_gets_the_old_fragment(
    old: tuple[Any, ...], new: tuple[Any, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    renderer._FRAGMENTS.clear()
    first = _bodies(_versioned(old, 2.0))
    second = _bodies(_versioned(new, 2.0))
    assert first == _reference(_versioned(old, 2.0), monkeypatch)
    assert second == _reference(_versioned(new, 2.0), monkeypatch)
    assert first != second
    reweighted = _bodies(_versioned(old, 3))  # an int weight: 3, not 3.0
    assert reweighted == _reference(_versioned(old, 3), monkeypatch)
    assert reweighted != first


def test_rendered_bodies_share_nothing_with_the_cache() -> None:
    renderer._FRAGMENTS.clear()
    plan = _versioned(("a", "b"), 2.0)
    body = render(plan, PROFILE, engine="opensearch", tier="strict")
    expected = json.dumps(body)
    body["query"]["bool"]["filter"][0]["terms"]["brand"].append("mutated")  # a caller edits its body
    body["aggs"].clear()
    assert json.dumps(render(plan, PROFILE, engine="opensearch", tier="strict")) == expected


def test_one_boost_object_under_other_clause_names_renders_as_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A boost's fragment is kept per boost object and clause name: the same object shown
    once, twice (``#2``) or after another boost of its policy gets its own name each time."""
    one = Boost(field="labels", values=("vegan",), weight=2.0, policy="p")
    other = Boost(field="brand", values=("acme",), weight=0.5, policy="p")
    plans = [
        Plan(residual="tea", boosts=(one,)),
        Plan(residual="tea", boosts=(other, one)),  # "boost:p" after "bury:p": still the first
        Plan(residual="tea", boosts=(one, one)),  # the same object twice: "boost:p#2"
        Plan(residual="tea", boosts=(one, other, one)),
    ]
    expected = [_reference(plan, monkeypatch) for plan in plans]
    renderer._FRAGMENTS.clear()
    for _ in range(2):
        for plan, bodies in zip(plans, expected, strict=True):
            assert _bodies(plan) == bodies
    text = json.dumps(render(plans[3], PROFILE, engine="opensearch", tier="strict"))
    names = re.findall(r'"_name": "((?:boost|bury):[^"]*)"', text)
    assert names == ["boost:p", "bury:p", "boost:p#2"]


def test_the_facets_are_kept_per_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two profiles with other facets, rendered alternately: each gets its own."""
    facets = PROFILE.facets.model_copy(update={"price_ranges": (0.0, 10.0, 100.0)})
    other = PROFILE.model_copy(update={"facets": facets})
    plan = Plan(residual="tea")
    expected = {}
    for profile in (PROFILE, other):
        with monkeypatch.context() as patched:
            patched.setattr(renderer, "_clause", text_clause)
            patched.setattr(renderer, "_FRAGMENT_CACHE", False)  # the kept facets and boosts too
            expected[id(profile)] = json.dumps(render(plan, profile, engine="opensearch", tier="strict"))
    assert len(set(expected.values())) == 2
    for _ in range(3):
        for profile in (PROFILE, other):
            body = render(plan, profile, engine="opensearch", tier="strict")
            assert json.dumps(body) == expected[id(profile)]


def test_a_full_table_drops_its_oldest_clauses_not_all_of_them() -> None:
    """Past its bound, the clause table loses one old entry per new one: the clauses of the
    latest requests stay (a cleared table sent every clause of the next requests through
    Jinja again), and the table never holds more than its bound."""
    renderer._FRAGMENTS.clear()
    bound = 8192
    for number in range(bound + 50):  # a new intent's text each time: its own clauses
        render(Plan(residual=f"tea {number}"), PROFILE, engine="opensearch", tier="strict")
    held = len(renderer._FRAGMENTS)
    assert bound - 10 <= held <= bound
    latest = render(Plan(residual=f"tea {bound + 49}"), PROFILE, engine="opensearch", tier="strict")
    assert len(renderer._FRAGMENTS) == held  # its clauses were still there: nothing added
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(renderer, "_clause", text_clause)
        patched.setattr(renderer, "_FRAGMENT_CACHE", False)
        expected = render(Plan(residual=f"tea {bound + 49}"), PROFILE, engine="opensearch", tier="strict")
    assert json.dumps(latest) == json.dumps(expected)
