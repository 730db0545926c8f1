"""Container templates rendered once per shape (``renderer._SHAPES``) give what Jinja gives.

A template that embeds rendered clauses (the envelope, the scoring layers, the request
body) is rendered by Jinja once per shape of its values, with a stand-in for each clause,
and later calls fill that skeleton with their own clauses (ADR 0029). The reference is the
text round trip of ``test_text_equivalence``; ``test_fragments`` compares whole bodies on
every composer case with the caches cold, warm and mixed. Here: the shapes that must not
share a skeleton, a template that looks inside a clause (never cached), and bodies that
share nothing with the cache.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jinja2 import DictLoader, Environment, StrictUndefined

import control_plane.renderer as renderer
from control_plane.plan import Boost, Constraint, Plan, Sponsored, Weight
from control_plane.renderer import render
from tests.renderer.cases import PROFILE
from tests.renderer.test_text_equivalence import text_clause


def _body(plan: Plan, **options: Any) -> str:
    return json.dumps(render(plan, PROFILE, engine="opensearch", tier="strict", **options))


def _reference(plan: Plan, monkeypatch: pytest.MonkeyPatch, **options: Any) -> str:
    with monkeypatch.context() as patched:
        patched.setattr(renderer, "_clause", text_clause)
        patched.setattr(renderer, "_FRAGMENT_CACHE", False)  # the kept facets and boosts too
        return _body(plan, **options)


PLANS = {
    "text only": Plan(residual="dark chocolate"),
    "no text": Plan(residual=""),
    "one synonym": Plan(residual="choc", synonyms=("chocolate",)),  # two text clauses
    "two synonyms": Plan(residual="choc", synonyms=("chocolate", "cocoa")),
    "filters": Plan(
        residual="tea",
        filters=(
            Constraint(field="brand", values=("a",), policies=("p",)),
            Constraint(field="labels", values=("organic", "vegan"), policies=("q",)),
        ),
        exclusions=(Constraint(field="allergens", values=("milk",), policies=("r",)),),
    ),
    "boosts and a sponsor": Plan(
        residual="tea",
        boosts=(Boost(field="labels", values=("organic",), weight=2.0, policy="p"),),
        sponsored=(Sponsored(ids=("s1",), weight=3.0, policy="s"),),
    ),
    "no economics": Plan(
        residual="tea", margin_weight=Weight(value=0.0), popularity_weight=Weight(value=0.0)
    ),
    "margin only": Plan(residual="tea", popularity_weight=Weight(value=0.0, policy="e")),
    "an int weight": Plan(residual="tea", margin_weight=Weight(value=3, policy="e")),
    "pins": Plan(residual="tea", pins=("x", "y")),
}


def test_every_shape_renders_as_the_reference_cold_and_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    references = {name: _reference(plan, monkeypatch) for name, plan in PLANS.items()}
    renderer._SHAPES.clear()
    for _ in range(2):  # cold, then every container from its shape
        for name, plan in PLANS.items():
            assert _body(plan) == references[name], name
            assert _body(plan, facets=False, page=3, size=7) == _reference(
                plan, monkeypatch, facets=False, page=3, size=7
            ), name
            personalized = [("p1", 2.0), ("p2", 1.5)]
            assert _body(plan, personalization=personalized) == _reference(
                plan, monkeypatch, personalization=personalized
            ), name
    assert renderer._SHAPES
    assert all(found is not None for found in renderer._SHAPES.values())  # all kept


def test_the_cache_off_renders_containers_through_jinja(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(renderer, "_FRAGMENT_CACHE", False)
    renderer._SHAPES.clear()
    for name, plan in PLANS.items():
        assert _body(plan) == _reference(plan, monkeypatch), name
    assert not renderer._SHAPES


def test_a_template_that_looks_inside_a_clause_is_rendered_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stand-in refuses everything but tojson, so such a template never gets a shape:
    each call renders the real values, and the output follows them."""
    templates = Environment(
        loader=DictLoader(
            {
                "peek.json.j2": '{"wrapped": {{ clause|tojson }},'
                ' "kind": {{ (clause.terms is defined)|tojson }}}',
                "count.json.j2": '{"n": {{ (clause|length)|tojson }}, "c": {{ clause|tojson }}}',
                "items.json.j2": '{"k": {{ (clause|dictsort|first|first)|tojson }},'
                ' "c": {{ clause|tojson }}}',
                "typed.json.j2": '{"m": {{ (clause is mapping)|tojson }}, "c": {{ clause|tojson }}}',
            }
        ),
        undefined=StrictUndefined,
        autoescape=False,
    )
    templates.filters["tojson"] = renderer._hole
    monkeypatch.setattr(renderer, "TEMPLATES", templates)
    renderer._SHAPES.clear()
    terms = {"terms": {"brand": ["a"]}}
    match = {"match": {"title": {"query": "x"}}, "boost": {"nested": 1}}
    assert renderer._clause("peek.json.j2", clause=terms) == {"wrapped": terms, "kind": True}
    assert renderer._clause("peek.json.j2", clause=match) == {"wrapped": match, "kind": False}
    assert renderer._clause("count.json.j2", clause=terms) == {"n": 1, "c": terms}
    assert renderer._clause("count.json.j2", clause=match) == {"n": 2, "c": match}
    assert renderer._clause("items.json.j2", clause=terms) == {"k": "terms", "c": terms}
    assert renderer._clause("items.json.j2", clause=match) == {"k": "boost", "c": match}
    assert renderer._SHAPES and all(found is None for found in renderer._SHAPES.values())
    # a type test answers for the stand-in what it answers for a clause: that one is kept
    assert renderer._clause("typed.json.j2", clause=terms) == {"m": True, "c": terms}
    assert renderer._clause("typed.json.j2", clause=match) == {"m": True, "c": match}
    assert sum(found is not None for found in renderer._SHAPES.values()) == 1


def test_a_stand_in_refuses_everything_but_tojson() -> None:
    uses = [
        bool, len, iter, str, repr, dict, list, sorted,
        lambda s: s.terms, lambda s: s["terms"], lambda s: s == 1, lambda s: s < 1,
        lambda s: "terms" in s, lambda s: s.items(), lambda s: s.keys(), lambda s: s.get("terms"),
        lambda s: s | {}, lambda s: f"{s}", lambda s: hasattr(s, "__html__"),
    ]  # fmt: skip
    for use in uses:
        with pytest.raises(renderer._Touched):
            use(renderer._Slot(0))


def test_rendered_bodies_share_nothing_with_the_shape_cache() -> None:
    renderer._SHAPES.clear()
    plan = PLANS["filters"]
    expected = _body(plan)
    body = render(plan, PROFILE, engine="opensearch", tier="strict")
    body["query"]["bool"]["filter"].clear()  # a caller edits the envelope's own lists
    body["query"]["bool"]["must"].append("mutated")
    body["_source"].append("mutated")
    body["track_total_hits"] = False
    assert _body(plan) == expected
