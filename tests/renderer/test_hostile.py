"""Hostile text cannot change the structure of the DSL.

Each request-derived slot (the residual, a synonym, a filter value, an id...) is rendered
once with a benign sentinel and once with a hostile string. The two bodies must have the
same tree of keys, the hostile string must sit exactly where the sentinel sat, and every
other leaf must be unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from control_plane.plan import Boost, Constraint, Plan, Sponsored
from control_plane.renderer import render
from tests.renderer.cases import PROFILE
from tests.renderer.dsl import leaves, skeleton

SENTINEL = "benign sentinel text"

HOSTILE = {
    "quotes": "say \"hello\" 'world'",
    "braces": "{ } [ ] { [ }",
    "json_break_out": '"}}, "match_all": {}',
    "json_document": '{"query": {"match_all": {}}, "size": 10000}',
    "backslashes": 'C:\\path\\ \\" \\u0022 \\\\',
    "control_characters": "nul\x00 bell\x07 esc\x1b del\x7f\n\r\t\x0b\x0c",
    "unicode_rtl": "\u202eolleh\u202c \u200f\u0639\u0631\u0628\u064a \u05e2\u05d1\u05e8",
    "emoji": "\U0001f36b\U0001f95c\u200d\U0001f468\u200d\U0001f469 \ufe0f",
    "lone_surrogate": "broken \ud800 pair",
    "jinja_expression": "{{ 7*7 }}",
    "jinja_statement": "{% raw %}{{ x }}{% endraw %}{% for i in range(3) %}{{ i }}{% endfor %}",
    "jinja_comment": "{# hidden #} {{ config }} {{ self.__init__.__globals__ }}",
    "jinja_delimiters": "}} {{ %} {% #} {#",
    "html": "</script><script>alert(1)</script> & &amp; <b>",
    "dsl_words": "_name match_all bool must_not fulltext_match sponsored:x hide",
    "ten_kilobytes": ("chocolate " * 1024)[:10240],
}

# Each slot puts the text in one request-derived position of an otherwise rich plan.
Slot = Callable[[str], tuple[Plan, list[tuple[str, float]]]]


def rich_plan(**overrides: Any) -> Plan:
    base: dict[str, Any] = {
        "residual": "chocolate",
        "synonyms": ("chocolat",),
        "guards": (Constraint(field="in_stock", values=(True,), policies=("guard-stock",)),),
        "guard_exclusions": (
            Constraint(field="market_blocked", values=("fr",), policies=("guard-market",)),
        ),
        "filters": (Constraint(field="diet", values=("vegan",), policies=("vegan",)),),
        "category": Constraint(field="categories", values=("en:chocolates",), policies=("choc",)),
        "exclusions": (Constraint(field="allergens", values=("en:peanuts",), policies=("nuts",)),),
        "boosts": (Boost(field="labels", values=("en:organic",), weight=2.0, policy="organic"),),
        "sponsored": (Sponsored(ids=("p-sponsored",), weight=1.5, policy="sponsor"),),
        "pins": ("p-pinned",),
        "hides": ("p-hidden",),
    }
    base.update(overrides)
    return Plan.model_validate(base)


HISTORY = [("p-bought", 2.5)]

SLOTS: dict[str, Slot] = {
    "residual": lambda t: (rich_plan(residual=t), HISTORY),
    "synonym": lambda t: (rich_plan(synonyms=(t,)), HISTORY),
    "filter_value": lambda t: (
        rich_plan(filters=(Constraint(field="diet", values=(t,), policies=("vegan",)),)),
        HISTORY,
    ),
    "category_value": lambda t: (
        rich_plan(category=Constraint(field="categories", values=(t,), policies=("choc",))),
        HISTORY,
    ),
    "exclusion_value": lambda t: (
        rich_plan(exclusions=(Constraint(field="allergens", values=(t,), policies=("nuts",)),)),
        HISTORY,
    ),
    "boost_value": lambda t: (
        rich_plan(boosts=(Boost(field="labels", values=(t,), weight=2.0, policy="organic"),)),
        HISTORY,
    ),
    "sponsored_id": lambda t: (
        rich_plan(sponsored=(Sponsored(ids=(t,), weight=1.5, policy="sponsor"),)),
        HISTORY,
    ),
    "pinned_id": lambda t: (rich_plan(pins=(t,)), HISTORY),
    "hidden_id": lambda t: (rich_plan(hides=(t,)), HISTORY),
    "purchased_id": lambda t: (rich_plan(), [(t, 2.5)]),
}


def rendered(slot: Slot, text: str, engine: str, tier: str) -> dict[str, Any]:
    plan, history = slot(text)
    return render(plan, PROFILE, engine=engine, tier=tier, personalization=history)  # type: ignore[arg-type]


@pytest.mark.parametrize("engine", ["opensearch", "elasticsearch"])
@pytest.mark.parametrize("slot", sorted(SLOTS))
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_hostile_text_is_only_a_string_leaf(hostile: str, slot: str, engine: str) -> None:
    text = HOSTILE[hostile]
    benign = rendered(SLOTS[slot], SENTINEL, engine, "strict")
    attacked = rendered(SLOTS[slot], text, engine, "strict")

    assert skeleton(attacked) == skeleton(benign)
    benign_leaves = dict(leaves(benign))
    attacked_leaves = dict(leaves(attacked))
    assert attacked_leaves.keys() == benign_leaves.keys()
    slots = [path for path, value in benign_leaves.items() if value == SENTINEL]
    assert slots, f"the sentinel never reached the DSL through slot {slot}"
    for path, value in attacked_leaves.items():
        expected = text if path in slots else benign_leaves[path]
        assert value == expected, f"leaf {path} changed"
        assert type(value) is type(expected)


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("tier", ["strict", "relaxed", "broad"])
def test_hostile_residual_survives_serialisation(hostile: str, tier: str) -> None:
    body = rendered(SLOTS["residual"], HOSTILE[hostile], "opensearch", tier)
    assert json.loads(json.dumps(body)) == body
    assert json.loads(json.dumps(body, ensure_ascii=False, sort_keys=True)) == body


def test_template_syntax_in_text_is_not_evaluated() -> None:
    body = rendered(SLOTS["residual"], "{{ 7*7 }}", "opensearch", "strict")
    values = [v for _, v in leaves(body) if isinstance(v, str)]
    assert "{{ 7*7 }}" in values
    assert not any("49" in v for v in values)
