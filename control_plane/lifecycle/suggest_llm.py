"""Model suggestions: drafts asked of a Chat Completions model, validated item by item.

:func:`suggest_llm` (``origin: llm``) shows the model the intents no existing policy triggers
on exactly, their counts and reformulations only: never mappings, fields, prices or other
policies, and never an intent holding contact details. Each item of its answer becomes a
``rewrite`` or ``synonyms`` draft (see :mod:`control_plane.lifecycle.suggest`) or is dropped
with a reason (:func:`llm_drafts` returns them).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import openai
from pydantic import ValidationError

from control_plane.audit.record import has_contact_details
from control_plane.lifecycle.suggest import (
    Signal,
    by_intent,
    draft,
    match_key,
    normalize,
    policy_id,
    triggered_exactly,
)
from control_plane.loader import check_policy_set, written_violations
from control_plane.matcher import clean_intent
from control_plane.policy import Policy, PolicySet

log = logging.getLogger("govsearch.suggest")

MAX_TEXT = 100
MAX_TERMS = 5
MAX_LLM_INTENTS = 100


class SuggestionError(RuntimeError):
    """The model could not be asked, or its answer was not the JSON object asked for."""


@dataclass(frozen=True)
class Dropped:
    index: int
    """the item's position in the model's ``suggestions``"""
    item: Any
    reason: str


@dataclass(frozen=True)
class Drafts:
    policies: list[Policy]
    dropped: list[Dropped] = field(default_factory=list)
    sent: dict[str, Any] = field(default_factory=dict)
    """the searches the model was shown (exactly what it saw, besides the instructions)"""


INSTRUCTIONS = (
    "You help the search team of an online grocery store. You receive searches that shoppers typed"
    " and that found nothing or too little, how often each happened and, sometimes, what the"
    " shoppers typed next (searches that then worked). For each search you can help with, propose"
    ' one suggestion: either kind "rewrite" (the words the search should look for instead, in "to")'
    ' or kind "synonyms" (up to 5 alternative phrasings to search as well, in "terms"). Use the'
    " words shoppers use; a French search gets French words. Only suggest for searches of the list,"
    ' copied exactly in "intent". Skip searches you cannot help with. Give a short "reason".'
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["suggestions"],
    "properties": {
        "suggestions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["intent", "kind", "to", "terms", "reason"],
                "properties": {
                    "intent": {"type": "string"},
                    "kind": {"type": "string", "enum": ["rewrite", "synonyms"]},
                    "to": {"type": ["string", "null"]},
                    "terms": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string"},
                },
            },
        }
    },
}


def suggest_llm(
    signals: Iterable[Signal],
    *,
    client: openai.OpenAI,
    model: str,
    existing: PolicySet,
    timeout_s: float,
) -> list[Policy]:
    """The model's valid suggestions, sorted by id; dropped items are logged."""
    drafts = llm_drafts(signals, client=client, model=model, existing=existing, timeout_s=timeout_s)
    for dropped in drafts.dropped:
        log.warning("model suggestion %d dropped: %s", dropped.index, dropped.reason)
    return drafts.policies


def llm_drafts(
    signals: Iterable[Signal],
    *,
    client: openai.OpenAI,
    model: str,
    existing: PolicySet,
    timeout_s: float,
) -> Drafts:
    """Ask the model about the intents no existing policy triggers on exactly; validate."""
    skip = triggered_exactly(existing)
    # a shopper's e-mail or phone number typed into the search box never leaves for the model
    grouped = {
        i: e for i, e in by_intent(signals).items()
        if match_key(i) not in skip and not _has_contact_details(i, e)
    }
    shown = dict(sorted(grouped.items(), key=lambda item: (-_weight(item[1]), item[0]))[:MAX_LLM_INTENTS])
    if not shown:
        return Drafts([])
    sent = {"searches": [_searched(intent, evidence) for intent, evidence in sorted(shown.items())]}
    items = _ask(client, model, sent, timeout_s)
    taken = {p.id for p in existing.policies}
    policies: list[Policy] = []
    dropped: list[Dropped] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        try:
            policy = _validated(item, shown, seen, taken, existing)
        except ValueError as error:
            dropped.append(Dropped(index, item, str(error)))
            continue
        policies.append(policy)
    return Drafts(sorted(policies, key=lambda p: p.id), dropped, sent)


def _has_contact_details(intent: str, evidence: Sequence[Signal]) -> bool:
    texts = [intent, *(s.followed_by for s in evidence if s.followed_by)]
    return any(has_contact_details(text) for text in texts)


def _weight(evidence: Sequence[Signal]) -> int:
    return sum(s.count for s in evidence)


def _searched(intent: str, evidence: Sequence[Signal]) -> dict[str, Any]:
    counts = Counter[str]()
    for signal in evidence:
        counts[signal.kind] += signal.count
    return {
        "intent": intent,
        "no_results": counts["zero_results"],
        "too_few_results": counts["fallback_tier"],
        "typed_next": [
            {"intent": s.followed_by, "times": s.count}
            for s in sorted(evidence, key=lambda s: (-s.count, s.followed_by or ""))
            if s.kind == "reformulation"
        ],
    }


def _ask(client: openai.OpenAI, model: str, sent: dict[str, Any], timeout_s: float) -> list[Any]:
    messages = [
        {"role": "system", "content": INSTRUCTIONS},
        {"role": "user", "content": json.dumps(sent, ensure_ascii=False, sort_keys=True)},
    ]
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "policy_suggestions", "strict": True, "schema": SCHEMA},
    }
    try:
        completion = client.chat.completions.create(
            model=model,
            messages=cast(Any, messages),
            response_format=cast(Any, response_format),
            temperature=0,
            timeout=timeout_s,
        )
    except openai.OpenAIError as error:
        raise SuggestionError(f"the model could not be asked: {type(error).__name__}: {error}") from error
    content = completion.choices[0].message.content if completion.choices else None
    try:
        data = json.loads(content or "")
    except ValueError as error:
        raise SuggestionError("the model's answer is not JSON") from error
    if not isinstance(data, dict) or not isinstance(data.get("suggestions"), list):
        raise SuggestionError("the model's answer has no 'suggestions' list")
    return cast(list[Any], data["suggestions"])


def _validated(
    item: Any,
    shown: Mapping[str, Sequence[Signal]],
    seen: set[str],
    taken: set[str],
    existing: PolicySet,
) -> Policy:
    """The policy a model item stands for, or ValueError with the reason to drop it."""
    if not isinstance(item, dict):
        raise ValueError("not an object")
    intent = normalize(item["intent"]) if isinstance(item.get("intent"), str) else ""
    if intent not in shown:
        raise ValueError(f"intent {item.get('intent')!r} is not one of the searches sent")
    if intent in seen:
        raise ValueError(f"a suggestion for {intent!r} came earlier")
    rule = _rule(intent, item)
    note = _reason(item.get("reason"))
    try:
        policy = draft(policy_id(intent, set(taken)), intent, rule, shown[intent], "llm", note)
    except ValidationError as error:
        first = error.errors()[0]
        raise ValueError(f"invalid policy: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    violations = check_policy_set([policy], existing.vocabularies, existing.governance)
    violations += written_violations([policy])
    if violations:
        raise ValueError(f"breaks governance: {violations[0].message}")
    seen.add(intent)
    taken.add(policy.id)
    return policy


def _rule(intent: str, item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("kind")
    if kind == "rewrite":
        to = _text(item.get("to"), "to")
        if match_key(to) == match_key(intent):
            raise ValueError("the rewrite does not change the intent")
        return {"rewrite": {"from": intent, "to": to}}
    if kind == "synonyms":
        terms = item.get("terms")
        if not isinstance(terms, list) or not terms or len(terms) > MAX_TERMS:
            raise ValueError(f"'terms' must be a list of 1 to {MAX_TERMS} phrases")
        texts = list(dict.fromkeys(_text(term, "terms") for term in terms))
        kept = [t for t in texts if match_key(t) != match_key(intent)]
        if not kept:
            raise ValueError("the synonyms only repeat the intent")
        return {"synonyms": {"terms": kept}}
    raise ValueError(f"rule kind {kind!r} is not allowed (rewrite or synonyms only)")


def _text(value: Any, name: str) -> str:
    text = clean_intent(value) if isinstance(value, str) else ""
    if not text or len(text) > MAX_TEXT:
        raise ValueError(f"'{name}' must be a non-empty phrase of at most {MAX_TEXT} characters")
    return text


def _reason(value: Any) -> str:
    text = clean_intent(value)[:300] if isinstance(value, str) else ""
    return f"Model's reason: {text}" if text else ""
