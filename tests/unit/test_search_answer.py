"""``search_answer`` writes the bytes ``search_response(...).model_dump_json()`` gives
(ADR 0041), without pydantic for the values the schema passes unchanged: for any product
source (values of every JSON type, hostile text, integers beyond 64 bits), any score, any
instant, explained or not, the bytes are the reference's or the reference's exception is
raised; the bytes validate as a ``SearchResponse`` that writes them again; and the ordinary
answers never reach pydantic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from control_plane.api import answer as answer_module
from control_plane.api.answer import search_answer, search_response
from control_plane.api.models import SearchResponse
from control_plane.plan_cache import Renderings
from control_plane.service import SearchRequest

PROFILE = SimpleNamespace(
    title="name", brand="maker", price="cost", display=("cost", "colour", "tags", "ünï")
)
PLAIN = SearchRequest(intent="chocolate")
EXPLAINED = SearchRequest(intent="chocolate", explain=True)
NOW = datetime(2026, 12, 2, 3, 12, 20, 934309, tzinfo=UTC)
EXPLANATION = {
    "policy_set_version": "v" * 64, "intent": "chocolaté \u2028 😀",
    "matched": [{"id": "cheap", "spans": [[0, 5]]}], "applied": [], "skipped": [],
    "residual": "chocolate", "resolutions": [], "captures": [],
}
DSL = {"query": {"bool": {"filter": [{"range": {"price": {"lte": 4.99}}}]}}, "size": 10, "boost": 1e-7}

texts = st.text() | st.sampled_from(
    ["\ud800", "a\udfff", "\u0000\u001f\u007f", "\u2028\u2029", "é😀", "<script>"]
)
numbers = (
    st.floats() | st.integers() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**53, 2**53 + 1, -(2**53), 2**63, 2**64, 10**400, 0.1, 1e16, 5e-324])
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
"""what an engine's ``_source`` may hold (and what a lax JSON decoder gives: NaN, big ints)"""
field_values = (
    st.none() | st.booleans() | numbers | texts | json_values
    | st.sampled_from(["3.5", " 1e3 ", "abc", "nan"])
)
sources = st.dictionaries(
    st.sampled_from(["name", "maker", "cost", "colour", "tags", "ünï", "other"]), field_values, max_size=7
)
ZONES = [
    UTC, timezone(timedelta(0)), timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(seconds=-30))
]
instants = st.datetimes(timezones=st.sampled_from(ZONES)) | st.just(NOW)
"""any instant, in UTC or not (an offset in seconds is written by pydantic and orjson apart)"""


def outcome(
    sources: list[dict[str, Any]], *, scores: list[Any] | None = None, now: datetime = NOW,
    explanation: dict[str, Any] | None = None, dsl: Any = None, status: str = "ok",
    personalization: tuple[tuple[str, float], ...] = (("p0", 1.5), ("p1", 2.0)),
) -> Any:
    """An outcome as ``search_answer`` reads one: the execution's hits and the compiled plan."""
    hits = tuple(
        SimpleNamespace(
            id=f"p{n}", source=source, score=(scores[n] if scores else 1.25 * n),
            sponsored_by=("acme",) if n == 0 else (), policies=("acme", "vegan") if n == 0 else (),
        )
        for n, source in enumerate(sources)
    )
    facets = {"brand": [{"value": "Acme", "count": 3}], "price": [{"from": 2.0, "to": None, "count": 1}]}
    execution = SimpleNamespace(
        hits=hits, status=status, tier="relaxed" if hits else None, total=len(hits) * 7,
        facets=facets if hits else {}, reason=None if hits else "nothing", dsl=DSL if dsl is None else dsl,
    )
    data = EXPLANATION if explanation is None else explanation
    renderings = Renderings()
    compiled = SimpleNamespace(
        policy_set_version="v" * 64, personalization=personalization, renderings=renderings,
        explanation_data=lambda: renderings.memo("explanation", lambda: data),
    )
    return SimpleNamespace(execution=execution, compiled=compiled, now=now)


def reference(request: SearchRequest, answered: Any) -> bytes | type[Exception]:
    try:
        return search_response("r" * 32, request, answered, PROFILE).model_dump_json().encode()
    except Exception as error:  # what the endpoint would raise: the app's 500
        return type(error)


def written(request: SearchRequest, answered: Any) -> bytes | type[Exception]:
    try:
        return search_answer("r" * 32, request, answered, PROFILE)
    except Exception as error:
        return type(error)


def assert_as_the_reference(request: SearchRequest, answered: Any) -> None:
    expected = reference(request, answered)
    got = written(request, answered)
    assert got == expected
    if isinstance(got, bytes) and answered.now.utcoffset().seconds % 60 == 0:
        # the schema's answer, written again to the same bytes (but for an offset in seconds,
        # which pydantic writes truncated to the minute, so it reads back another instant)
        assert SearchResponse.model_validate_json(got).model_dump_json().encode() == got


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(sources, max_size=4), st.lists(st.none() | numbers, min_size=4, max_size=4), instants,
    st.booleans(),
)
def test_any_source_score_and_instant_is_answered_as_the_reference_answers_it(
    found: list[dict[str, Any]], scores: list[Any], now: datetime, explain: bool
) -> None:
    assert_as_the_reference(EXPLAINED if explain else PLAIN, outcome(found, scores=scores, now=now))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(texts, json_values, max_size=4), json_values,
    st.lists(st.tuples(texts, numbers), max_size=3),
)
def test_any_explanation_dsl_and_personalization_is_answered_as_the_reference(
    extra: dict[str, Any], dsl: Any, boosts: list[tuple[str, Any]]
) -> None:
    """Keys of the explanation's own (including a ``tier`` or ``dsl`` the request's keys
    would replace in place), any DSL (any JSON value), any boosts."""
    answered = outcome([{"name": "Dark", "cost": 3}], explanation={**EXPLANATION, **extra}, dsl=dsl,
                       personalization=tuple(boosts))
    assert_as_the_reference(EXPLAINED, answered)


writable = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
"""JSON values ``orjson`` writes (no lone surrogate, no integer beyond 64 bits)"""
typed_sources = st.fixed_dictionaries(
    {}, optional={
        "name": st.none() | st.text(), "maker": st.none() | st.text(),
        "cost": st.none() | st.floats() | st.integers(min_value=-(2**53), max_value=2**53),
        "colour": writable, "tags": writable, "ünï": writable, "other": writable,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(typed_sources, max_size=4),
    st.lists(
        st.none() | st.floats() | st.integers(min_value=-(2**53), max_value=2**53), min_size=4, max_size=4
    ),
    st.datetimes(timezones=st.just(UTC)), st.booleans(), st.dictionaries(st.text(), writable, max_size=3),
)
def test_sources_of_the_schemas_types_are_written_without_pydantic_as_it_writes_them(
    found: list[dict[str, Any]], scores: list[Any], now: datetime, explain: bool, dsl: dict[str, Any]
) -> None:
    answered = outcome(found, scores=scores, now=now, dsl=dsl)
    request = EXPLAINED if explain else PLAIN
    expected = reference(request, answered)
    asked = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(answer_module, "search_response", lambda *args: asked.append(args))
        got = search_answer("r" * 32, request, answered, PROFILE)
    assert asked == [] and got == expected
    assert SearchResponse.model_validate_json(got).model_dump_json().encode() == got


ORDINARY = [
    ("three hits", [
        {"name": "Dark chocolate", "maker": "Acme", "cost": 3, "colour": "brown", "tags": ["vegan", 1]},
        {"name": "Milk chocolate", "cost": 2.49, "ünï": {"é": [None, True, 1.5e300]}},
        {"maker": "Other", "cost": None, "colour": {"rgb": [1, 2, 3]}},
    ]),
    ("non-ASCII and control text", [{"name": "Chocolat noir \u2028 \u0007 😀", "maker": "Ça", "cost": 1e16}]),
    ("NaN and infinite values", [{"name": "x", "cost": float("nan"), "tags": [float("inf"), -float("inf")]}]),
    ("no hits", []),
]


@pytest.mark.parametrize(("case", "found"), ORDINARY, ids=[case for case, _ in ORDINARY])
@pytest.mark.parametrize("request_", [PLAIN, EXPLAINED], ids=["plain", "explained"])
def test_ordinary_answers_are_written_without_pydantic(
    case: str, found: list[dict[str, Any]], request_: SearchRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    answered = outcome(found)
    expected = reference(request_, answered)
    assert isinstance(expected, bytes)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the reference was asked")

    monkeypatch.setattr(answer_module, "search_response", refused)
    assert search_answer("r" * 32, request_, answered, PROFILE) == expected


@pytest.mark.parametrize(
    ("stored", "answered"),
    [
        ({"cost": "3.5"}, 3.5), ({"cost": " 1e3 "}, 1000.0), ({"cost": True}, 1.0),
        ({"cost": 2**60 + 1}, float(2**60)),
    ],
)
def test_a_price_pydantic_coerces_is_coerced_as_before(stored: dict[str, Any], answered: float) -> None:
    body = orjson.loads(search_answer("r" * 32, PLAIN, outcome([stored]), PROFILE))
    assert body["hits"][0]["price"] == answered


@pytest.mark.parametrize(
    "stored",
    [
        {"cost": "abc"}, {"cost": [3.5]}, {"cost": 10**400}, {"name": 123}, {"name": ["a", "b"]},
        {"maker": True},
    ],
    ids=["price text", "price array", "price beyond a float", "title number", "title array", "brand bool"],
)
def test_a_value_pydantic_refuses_is_refused_as_before(stored: dict[str, Any]) -> None:
    """The endpoint raises it after the search was recorded: the app's 500 ``internal_error``."""
    with pytest.raises(ValidationError):
        search_response("r" * 32, PLAIN, outcome([stored]), PROFILE)
    with pytest.raises(ValidationError):
        search_answer("r" * 32, PLAIN, outcome([stored]), PROFILE)


def test_the_explanation_of_a_plan_is_written_once_and_each_request_adds_its_own_parts() -> None:
    first = outcome([{"name": "Dark"}])
    search_answer("r" * 32, EXPLAINED, first, PROFILE)
    head = first.compiled.renderings.memo("explanation.json", lambda: None)
    assert head == orjson.dumps(EXPLANATION)[:-1]
    # another request on the same plan: another tier, DSL and boosts, the plan's part kept
    second = outcome([{"name": "Dark"}], dsl={"size": 3}, personalization=(("p9", 0.5),))
    second.compiled.renderings = first.compiled.renderings
    second.execution.tier = "broad"
    explanation = orjson.loads(search_answer("r" * 32, EXPLAINED, second, PROFILE))["explanation"]
    assert explanation == {
        **EXPLANATION, "tier": "broad", "dsl": {"size": 3}, "personalization": [["p9", 0.5]]
    }
    assert first.compiled.renderings.memo("explanation.json", lambda: None) is head
