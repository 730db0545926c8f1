"""Kept clauses and container shapes copied from their bytes give what Jinja gives (ADR 0040).

A clause rendered before (``renderer._FRAGMENTS``, a boost by its name, the facets) is a
fresh copy loaded from the bytes of its first rendering, and a container shape seen before
(``renderer._SHAPES``) is its own part loaded from bytes with the call's clauses put in
their places. The reference is the text round trip of ``test_text_equivalence``; here: the
values whose bytes would not give them back (they must be filled as before), every kind of
scalar warm against the reference, a container that prints a clause twice, and copies that
share nothing with each other.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2 import DictLoader, Environment, StrictUndefined

import control_plane.renderer as renderer
from control_plane.plan import Boost, Bound, Constraint, Plan, PriceBounds, Sponsored
from control_plane.renderer import render
from tests.renderer.cases import PROFILE
from tests.renderer.test_text_equivalence import text_clause


def _body(plan: Plan) -> str:
    body = render(plan, PROFILE, engine="opensearch", tier="strict", personalization=[("p1", 2.0)])
    return json.dumps(body, ensure_ascii=False)


def _reference(plan: Plan) -> str:
    saved = renderer._clause, renderer._FRAGMENT_CACHE
    renderer._clause, renderer._FRAGMENT_CACHE = text_clause, False
    try:
        return _body(plan)
    finally:
        renderer._clause, renderer._FRAGMENT_CACHE = saved


def _plan(values: tuple[Any, ...]) -> Plan:
    return Plan(
        residual="tea",
        filters=(Constraint(field="brand", values=values, policies=("p",)),),
        boosts=(Boost(field="labels", values=values, weight=2.0, policy="b"),),
        sponsored=(Sponsored(ids=("s1",), weight=3.0, policy="s"),),
        price=PriceBounds(max=Bound(value=4.2, policy="c")),
    )


#: values the bytes of a clause cannot give back: orjson refuses them when dumping
UNCOPYABLE = {
    "an integer past 64 bits": (2**64 + 1,),
    "a negative integer past 64 bits": (-(2**63) - 1,),
    "a lone surrogate": ("broken \ud800 pair",),
}


@pytest.mark.parametrize("name", sorted(UNCOPYABLE))
def test_a_clause_its_bytes_cannot_give_back_is_filled_as_before(name: str) -> None:
    plan = _plan(UNCOPYABLE[name])
    expected = _reference(plan)
    renderer._FRAGMENTS.clear()
    for _ in range(3):  # cold, then from the kept fragment
        assert _body(plan) == expected
    kept = [entry for key, entry in renderer._FRAGMENTS.items() if key[0] == "filter_terms.json.j2"]
    assert kept and all(entry[2] is None for entry in kept)  # no bytes: filled from the skeleton
    assert any(entry[2] for entry in renderer._FRAGMENTS.values())  # the others copied


def test_a_clause_gets_its_bytes_at_its_first_reuse() -> None:
    """A clause of one request's text (the residual's) is often never seen again: its
    bytes are made when it is reused, not when it is first rendered."""
    renderer._FRAGMENTS.clear()
    renderer._FACETS.clear()
    plan = _plan(("a",))
    expected = _reference(plan)
    assert _body(plan) == expected
    made = {key[0]: entry[2] is not renderer._UNMADE for key, entry in renderer._FRAGMENTS.items()}
    assert made.pop("facets.json.j2")  # kept per profile at once: made for its reuse
    assert made and not any(made.values())
    assert _body(plan) == expected
    assert all(e[2] for e in renderer._FRAGMENTS.values())  # every one reused: bytes made
    assert _body(plan) == expected


def test_the_copies_check_what_their_bytes_give_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A codec that loses a type (an integer read back as a float, as ``orjson`` reads one
    past 64 bits) must not be trusted: the check of ``_copyable`` refuses the bytes."""
    real = orjson.loads

    def lossy(data: bytes) -> Any:
        return real(data.replace(b'"weight":3}', b'"weight":3.0}'))

    monkeypatch.setattr(orjson, "loads", lossy)
    assert renderer._copyable({"weight": 3}) is None
    assert renderer._copyable({"weight": 3.5}) == b'{"weight":3.5}'


SCALARS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(SCALARS, min_size=1, max_size=4, unique_by=lambda v: (type(v), repr(v))))
def test_any_scalars_render_warm_as_the_reference(values: list[Any]) -> None:
    plan = _plan(tuple(values))
    expected = _reference(plan)
    for _ in range(3):
        assert _body(plan) == expected


def test_a_container_that_prints_a_clause_twice_renders_as_jinja(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    templates = Environment(
        loader=DictLoader(
            {
                "twice.json.j2": "{% set printed = clauses|tojson %}"
                '{"a": {{ printed }}, "b": {"c": {{ printed }}, "n": {{ n|tojson }}}}',
                "once.json.j2": '{"z": [{{ clause|tojson }}, {"k": {{ n|tojson }}}],'
                ' "a": {{ clauses|tojson }}}',
            }
        ),
        undefined=StrictUndefined,
        autoescape=False,
    )
    templates.filters["tojson"] = renderer._hole
    monkeypatch.setattr(renderer, "TEMPLATES", templates)
    renderer._SHAPES.clear()
    first, second = {"terms": {"brand": ["a"]}}, {"match": {"title": {"query": "x"}}}
    for clauses in ([first], [first, second], [second, first]):
        for _ in range(3):
            twice = renderer._clause("twice.json.j2", clauses=clauses, n=2)
            assert twice == {"a": clauses, "b": {"c": clauses, "n": 2}}
            assert list(twice["b"]) == ["c", "n"]  # keys sorted, as json.dumps(sort_keys=True)
            once = renderer._clause("once.json.j2", clause=second, clauses=clauses, n=1.0)
            assert json.dumps(once) == json.dumps({"a": clauses, "z": [second, {"k": 1.0}]})
    shapes = {key[0]: found for key, found in renderer._SHAPES.items()}
    assert shapes["twice.json.j2"] is not None and shapes["twice.json.j2"][2] is None  # filled
    assert shapes["once.json.j2"] is not None and shapes["once.json.j2"][2] is not None  # copied


def test_copies_share_nothing_with_each_other() -> None:
    plan = _plan(("a", "b"))
    render(plan, PROFILE, engine="opensearch", tier="strict")  # the fragments and shapes kept
    one = render(plan, PROFILE, engine="opensearch", tier="strict")
    two = render(plan, PROFILE, engine="opensearch", tier="strict")
    expected = json.dumps(two)
    functions = one["query"]["bool"]["must"][0]["function_score"]["query"]["function_score"]["functions"]
    functions[0]["filter"]["terms"]["labels"].append("mutated")  # a copied boost
    functions.append("mutated")  # a copied container's own list
    one["aggs"]["brand"]["terms"]["size"] = -1  # the copied facets
    one["query"]["bool"]["filter"][0]["terms"]["brand"].clear()  # a copied filter
    assert json.dumps(two) == expected
    assert json.dumps(render(plan, PROFILE, engine="opensearch", tier="strict")) == expected
