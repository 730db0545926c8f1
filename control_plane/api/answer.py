"""The search answer: :func:`search_answer` writes its JSON bytes straight from the
execution, with ``orjson`` and without pydantic (ADR 0041); :func:`search_response` builds
the same answer as a validated :class:`SearchResponse` (the schema, the agent gateway's and
the CLI's answer, and the reference the bytes are held to).

The bytes are exactly ``search_response(...).model_dump_json()``: the same keys in the same
order, the same values, the same number and time formats (``orjson`` and pydantic-core
write floats alike, NaN and infinities as ``null``, a UTC instant with ``Z``). What the
schema types narrowly and the engine hands over as stored, a hit's title, brand and price
from its ``_source`` and its ``_score``, is checked on the way: a ``str`` or None title or
brand, a ``float``, an exactly representable ``int`` (written as pydantic writes it, a
float) or None price and score. Anything else (a price stored as text, a title that is an
array), an instant not in UTC, or a value ``orjson`` cannot write (an integer beyond 64
bits, a lone surrogate) makes the whole answer go through :func:`search_response` instead,
which answers it as it always did: coerced where pydantic coerces (``"3.5"`` is 3.5), a
``ValidationError`` (the app's 500 ``internal_error``) where it refuses.

The explanation, when asked, is spliced in as bytes: the composition's part is written
once per cached plan (kept with the plan's renderings), then the tier, the DSL served and
the request's personalization.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

import orjson

from control_plane.api.models import SearchResponse
from control_plane.service import Outcome, SearchRequest

EXACT = 2**53
"""an ``int`` up to this size is a float exactly (pydantic's float of it is Python's)"""
SPLICED = frozenset({"tier", "dsl", "personalization"})
"""the explanation's keys added per request, after the composition's own"""


def explanation_of(outcome_or_compiled: Any, tier: str | None, dsl: Any) -> dict[str, Any]:
    compiled = getattr(outcome_or_compiled, "compiled", outcome_or_compiled)
    explanation: dict[str, Any] = dict(compiled.explanation_data())  # dumped once per cached plan
    explanation["tier"] = tier
    explanation["dsl"] = dsl
    explanation["personalization"] = [list(p) for p in compiled.personalization]
    return explanation


def search_response(
    rid: str, request: SearchRequest, outcome: Outcome, profile: Any
) -> SearchResponse:
    """The answer to ``request``, validated as one :class:`SearchResponse` (one call into
    pydantic-core for the whole answer and its hits, not one per hit: the same model and
    values as building each ``HitOut`` first)."""
    execution = outcome.execution
    title, brand, price, display = profile.title, profile.brand, profile.price, profile.display
    hits = [
        {
            "id": hit.id,
            "title": hit.source.get(title),
            "brand": hit.source.get(brand),
            "price": hit.source.get(price),
            "score": hit.score,
            "sponsored": bool(hit.sponsored_by),
            "policies": list(hit.policies),
            "display": {name: hit.source[name] for name in display if name in hit.source},
        }
        for hit in execution.hits
    ]
    return SearchResponse.model_validate(
        {
            "request_id": rid,
            "policy_set_version": outcome.compiled.policy_set_version,
            "now": outcome.now,
            "status": execution.status,
            "tier": execution.tier,
            "total": execution.total,
            "hits": hits,
            "facets": dict(execution.facets),
            "reason": execution.reason,
            "explanation": explanation_of(outcome, execution.tier, execution.dsl)
            if request.explain
            else None,
        }
    )


class Unwritten(Exception):
    """A value of the answer that pydantic must see: it coerces it, or refuses it."""


def search_answer(rid: str, request: SearchRequest, outcome: Outcome, profile: Any) -> bytes:
    """The answer to ``request`` as JSON bytes: ``search_response(...).model_dump_json()``,
    written without pydantic when every value is one it would pass unchanged."""
    try:
        return orjson.dumps(_answer(rid, request, outcome, profile), option=orjson.OPT_UTC_Z)
    except (Unwritten, orjson.JSONEncodeError):  # orjson cannot write a value: pydantic may
        return search_response(rid, request, outcome, profile).model_dump_json().encode()


def _answer(rid: str, request: SearchRequest, outcome: Outcome, profile: Any) -> dict[str, Any]:
    """The answer as data ``orjson`` writes as pydantic would (:class:`Unwritten` when a
    value needs pydantic)."""
    execution = outcome.execution
    if outcome.now.tzinfo is not UTC:
        raise Unwritten("now")  # pydantic writes another zone's offset its own way
    title, brand, price, display = profile.title, profile.brand, profile.price, profile.display
    hits = []
    for hit in execution.hits:
        source = hit.source
        hits.append({
            "id": hit.id,
            "title": _text(source.get(title)),
            "brand": _text(source.get(brand)),
            "price": _number(source.get(price)),
            "score": _number(hit.score),
            "sponsored": bool(hit.sponsored_by),
            "policies": hit.policies,
            "display": {name: source[name] for name in display if name in source},
        })
    return {
        "request_id": rid,
        "policy_set_version": outcome.compiled.policy_set_version,
        "now": outcome.now,
        "status": execution.status,
        "tier": execution.tier,
        "total": execution.total,
        "hits": hits,
        "facets": execution.facets if type(execution.facets) is dict else dict(execution.facets),
        "reason": execution.reason,
        "explanation": _explanation(outcome) if request.explain else None,
    }


def _text(value: Any) -> str | None:
    """``value`` as a ``str | None`` field writes it."""
    if value is None or type(value) is str:
        return value
    raise Unwritten("text")


def _number(value: Any) -> float | None:
    """``value`` as a ``float | None`` field writes it."""
    kind = type(value)
    if kind is float or value is None:
        return value  # type: ignore[no-any-return]
    if kind is int and -EXACT <= value <= EXACT:
        return float(value)
    raise Unwritten("number")


def _explanation(outcome: Outcome) -> orjson.Fragment:
    """The explanation's bytes: the composition's part once per plan, then this request's."""
    compiled = outcome.compiled
    head = compiled.renderings.memo("explanation.json", lambda: _head(compiled.explanation_data()))
    if head is None:
        raise Unwritten("explanation")
    execution = outcome.execution
    return orjson.Fragment(b"".join((
        head,
        b',"tier":', orjson.dumps(execution.tier),
        b',"dsl":', orjson.dumps(execution.dsl),
        b',"personalization":', orjson.dumps(compiled.personalization),
        b"}",
    )))


def _head(explanation: dict[str, Any]) -> bytes | None:
    """The explanation's own keys as JSON without the closing brace, for the request's keys
    to follow (None when they cannot simply follow, or ``orjson`` cannot write it)."""
    if not explanation or SPLICED & explanation.keys():
        return None
    try:
        return orjson.dumps(explanation)[:-1]
    except orjson.JSONEncodeError:
        return None
