"""The text a rendered body is sent as (``RenderedTier.text``) is ``json.dumps(body,
ensure_ascii=False)``, byte for byte: on every golden case's body and on random JSON data
(ADR 0046 keeps one encoder instead of making one per body)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.plan_cache import RenderedTier
from control_plane.renderer import render
from tests.renderer.cases import CASES, PROFILE

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_golden_case_body_is_sent_as_json_dumps_writes_it(name: str) -> None:
    plan, args = CASES[name]
    body = render(plan, PROFILE, **args)
    assert RenderedTier.of(body).text == json.dumps(body, ensure_ascii=False)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON, max_size=6))
def test_any_body_is_sent_as_json_dumps_writes_it(body: dict[str, Any]) -> None:
    assert RenderedTier.of(body).text == json.dumps(body, ensure_ascii=False)


def test_a_shared_container_is_written_twice_as_before() -> None:
    clause = {"term": {"brand": "é"}}
    body = {"query": {"bool": {"filter": [clause, clause]}}, "size": 10, "boost": 1e-7}
    assert RenderedTier.of(body).text == json.dumps(body, ensure_ascii=False)
