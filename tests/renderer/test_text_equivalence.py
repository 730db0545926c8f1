"""Rendering into data gives what the JSON text round trip gives, key order included.

The renderer fills parsed template skeletons instead of printing every value into JSON text
and parsing it back. The reference here is that round trip: the same templates in a plain
Jinja environment whose ``tojson`` prints ``json.dumps(sort_keys=True, allow_nan=False)``,
each clause parsed with ``json.loads``. The two must agree byte for byte on
``json.dumps(body)`` *without* ``sort_keys`` (so the key order the engine receives is the
same too), for every golden case, every hostile slot and text, both engines, all tiers.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from jinja2 import Environment, PackageLoader, StrictUndefined

import control_plane.renderer as renderer
from control_plane.renderer import render
from tests.renderer.cases import CASES, PROFILE
from tests.renderer.test_hostile import HISTORY, HOSTILE, SLOTS

TEXT = Environment(
    loader=PackageLoader("control_plane", "templates"),
    undefined=StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
)
TEXT.policies["json.dumps_kwargs"] = {"sort_keys": True, "allow_nan": False}


def text_clause(template: str, _outermost: bool = False, **values: Any) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(TEXT.get_template(template).render(**values))
    return parsed


def both(monkeypatch: pytest.MonkeyPatch, call: Any) -> tuple[str, str]:
    data = json.dumps(call(), ensure_ascii=False)
    with monkeypatch.context() as patched:
        patched.setattr(renderer, "_clause", text_clause)
        patched.setattr(renderer, "_FRAGMENT_CACHE", False)  # the kept facets and boosts too
        text = json.dumps(call(), ensure_ascii=False)
    return data, text


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_cases_render_as_the_text_round_trip(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, args = CASES[name]
    for engine in renderer.ENGINES:
        for tier in renderer.TIERS:
            options = {**args, "engine": engine, "tier": tier}
            data, text = both(monkeypatch, lambda o=options: render(plan, PROFILE, **o))
            assert data == text, f"{name} on {engine}, {tier}"


@pytest.mark.parametrize("slot", sorted(SLOTS))
@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_hostile_slots_render_as_the_text_round_trip(
    hostile: str, slot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, history = SLOTS[slot](HOSTILE[hostile])
    for engine in renderer.ENGINES:
        data, text = both(
            monkeypatch,
            lambda e=engine: render(plan, PROFILE, engine=e, tier="broad", personalization=history),
        )
        assert data == text


def test_a_clause_is_fresh_data_every_time() -> None:
    plan, history = SLOTS["residual"]("chocolate")
    first = render(plan, PROFILE, engine="opensearch", tier="strict", personalization=HISTORY)
    first["query"]["bool"]["filter"].clear()
    first["aggs"]["brand"]["terms"]["size"] = -1
    second = render(plan, PROFILE, engine="opensearch", tier="strict", personalization=history)
    assert second["query"]["bool"]["filter"]
    assert second["aggs"]["brand"]["terms"]["size"] == renderer.FACET_SIZE
