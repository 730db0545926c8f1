"""Captures, vocabularies and context values for the composer (see :mod:`control_plane.composer`).

:func:`bind` turns a policy's rules into rule bodies with every ``"{name}"`` replaced:
captured words go through the vocabulary the rule names (filter and exclude rules), or are
used as written; ``{market}`` comes from the request. It also says what went wrong, if
anything, and records every mapping for the explanation.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from control_plane.composer_state import Remembered
from control_plane.money import MoneyNotation, Unreadable, parse_amount
from control_plane.plan import CapturedText, CaptureMapping, DroppedRule
from control_plane.policy import (
    CAPTURE,
    CONTEXT_VALUES,
    ExcludeRule,
    FilterRule,
    Policy,
    PolicySet,
    PriceRule,
    RuleBody,
    Value,
)

#: normalised word -> the catalog values it means
VocabularyIndex = Mapping[str, tuple[str, ...]]

_EDGES = re.compile(r"^[\W_]+|[\W_]+$")
#: "women's" also looks up "women" and "womens"
_POSSESSIVE = re.compile(r"['\u2019]s$")
_APOSTROPHES = re.compile(r"['\u2019]")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+")
_CURRENCY_SIGNS = r"[$€£¥]"
_CURRENCY_WORDS = r"euros?|eur|dollars?|usd|pounds?|gbp|bucks|balles"
#: one amount: an optional sign, a number, an optional sign or currency word
_AMOUNT = re.compile(
    rf"(?:{_CURRENCY_SIGNS}\s*)?(?P<number>\d+(?:[.,]\d+)*)(?:\s*{_CURRENCY_SIGNS}|\s+(?:{_CURRENCY_WORDS}))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Problem:
    code: Literal["capture_missing", "capture_unmapped"]
    reason: str


@dataclass(frozen=True)
class Binding:
    """A policy's rules, ready for the cascade, or the problem that stops it."""

    bodies: tuple[RuleBody, ...]
    dropped: tuple[DroppedRule, ...]
    mappings: tuple[CaptureMapping, ...]
    problem: Problem | None


def normalise(text: str) -> str:
    """Casefold, strip accents (NFKD), collapse white space, trim."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(bare.casefold().split())


def index_vocabularies(policy_set: PolicySet) -> dict[str, VocabularyIndex]:
    """Each vocabulary as normalised word -> catalog values. A catalog value also means itself."""
    indexes: dict[str, VocabularyIndex] = {}
    for vocabulary in policy_set.vocabularies:
        words: dict[str, set[str]] = {}
        for value, synonyms in vocabulary.entries.items():
            for word in (value, *synonyms):
                key = normalise(word)
                if key:
                    words.setdefault(key, set()).add(value)
        indexes[vocabulary.name] = {word: tuple(sorted(values)) for word, values in words.items()}
    return indexes


def look_up(index: VocabularyIndex, text: str) -> tuple[str, ...]:
    """The catalog values for ``text``: the whole text first, else the union over its words."""
    whole = normalise(text)
    bare = _EDGES.sub("", whole)
    for key in (whole, bare, _POSSESSIVE.sub("", bare), _APOSTROPHES.sub("", bare)):
        if key in index:
            return index[key]
    found = {value for word in whole.split() for value in index.get(_EDGES.sub("", word), ())}
    return tuple(sorted(found))


def parse_price(text: str) -> float | None:
    """``"5"``, ``"5€"``, ``"$5"``, ``"5,50"``, ``"1,000.50"``, ``"12,50 euros"`` -> a number.

    None unless the text is one amount: a number, with at most a currency sign or word
    (:data:`_AMOUNT`). A number followed by any other word counts something else ("10
    words", "500 g", "3 packs") and is not a price."""
    amount = _AMOUNT.fullmatch(text.strip())
    if amount is None:
        return None
    number = amount.group("number")
    if ("," in number and "." in number) or _THOUSANDS.fullmatch(number):
        number = number.replace(",", "")
    elif number.count(",") == 1:
        number = number.replace(",", ".")
    try:
        return float(number)
    except ValueError:
        return None


def read_price(text: str, money: MoneyNotation | None) -> tuple[float | None, str]:
    """A captured amount in the catalog's notation (:mod:`control_plane.money`), or in the
    built-in one (:func:`parse_price`) when the profile declares none; else None and why."""
    if money is None:
        number = parse_price(text)
        return number, "" if number is not None else "is not a price"
    amount = parse_amount(text, money)
    if isinstance(amount, Unreadable):
        return None, amount.reason
    return amount.value, ""


def _expand(value: Value, bindings: Mapping[str, tuple[str, ...]]) -> tuple[Value, ...]:
    """``"{item}"`` -> each bound value; placeholders inside a longer text are expanded too."""
    if not isinstance(value, str) or not CAPTURE.search(value):
        return (value,)
    results = [""]
    position = 0
    for found in CAPTURE.finditer(value):
        literal = value[position : found.start()]
        results = [r + literal + option for r in results for option in bindings[found[1]]]
        position = found.end()
    return tuple(r + value[position:] for r in results)


def _substitute(
    body: RuleBody, bindings: Mapping[str, tuple[str, ...]], prices: Mapping[str, tuple[float, ...]]
) -> RuleBody:
    update: dict[str, object] = {}
    for name in type(body).model_fields:
        current = getattr(body, name)
        if isinstance(body, PriceRule) and name in ("min", "max") and isinstance(current, str):
            found = CAPTURE.fullmatch(current)
            if found is None:
                raise ValueError(f"price bound {current!r} is not a capture")
            numbers = prices[found[1]]
            update[name] = max(numbers) if name == "min" else min(numbers)
        elif isinstance(current, tuple):
            update[name] = tuple(v for item in current for v in _expand(item, bindings))
        elif isinstance(current, str) and CAPTURE.search(current):
            update[name] = " ".join(str(v) for v in _expand(current, bindings))
    return body.model_copy(update=update) if update else body


#: policy -> its rules as written, for a match that captured nothing (most of them)
_PLAIN: Remembered[Binding] = Remembered()


def bind(
    policy: Policy,
    captures: Sequence[CapturedText],
    vocabularies: Mapping[str, VocabularyIndex],
    market: str | None,
    rule_captures: Sequence[tuple[str, ...]] | None = None,
    money: MoneyNotation | None = None,
) -> Binding:
    """``rule_captures``: each rule's ``captures``, when already known (the set's lookups);
    ``money``: the catalog's amount notation (None: the built-in one)."""
    if rule_captures is None:
        rule_captures = [rule.captures for rule in policy.rules]
    if not captures and not any(rule_captures):  # nothing to bind: the bodies as written
        return _PLAIN.get(policy) or _PLAIN.put(
            policy, Binding(tuple([rule.body for rule in policy.rules]), (), (), None)
        )
    texts: dict[str, list[str]] = {}
    for capture in sorted(captures, key=lambda c: (c.span.start, c.span.end, c.name, c.text)):
        text = " ".join(capture.text.split())
        if text:
            texts.setdefault(capture.name, []).append(text)
    captured_by_trigger = set(policy.trigger.captures)
    bodies: list[RuleBody] = []
    dropped: list[DroppedRule] = []
    mappings: list[CaptureMapping] = []
    used: set[str] = set()

    def mapping(name: str, text: str, vocabulary: str | None, values: Sequence[str]) -> None:
        record = CaptureMapping(
            policy_id=policy.id, name=name, text=text, vocabulary=vocabulary, values=tuple(values)
        )
        if record not in mappings:
            mappings.append(record)

    def result(problem: Problem | None) -> Binding:
        for name in sorted(set(texts) - used):
            for text in texts[name]:
                mapping(name, text, None, [text])
        return Binding(tuple(bodies), tuple(dropped), tuple(mappings), problem)

    for index, rule in enumerate(policy.rules):
        body = rule.body
        if not rule_captures[index]:  # nothing to substitute: the body as written
            bodies.append(body)
            continue
        bindings: dict[str, tuple[str, ...]] = {}
        prices: dict[str, tuple[float, ...]] = {}
        missing_context = False
        for name in rule_captures[index]:
            used.add(name)
            from_context = name in CONTEXT_VALUES and name not in captured_by_trigger
            if from_context and market is None:
                missing_context = True
                continue
            if not from_context and name not in texts:
                reason = f"rule {index} ({rule.kind}) uses {{{name}}} but the match captured no words for it"
                return result(Problem("capture_missing", reason))
            sources = [market] if from_context and market is not None else texts[name]
            if isinstance(body, PriceRule):
                numbers: list[float] = []
                for text in sources:
                    number, why = read_price(text, money)
                    mapping(name, text, None, [] if number is None else [str(number)])
                    if number is None:
                        return result(Problem("capture_unmapped", f"'{text}' ({{{name}}}) {why}"))
                    numbers.append(number)
                prices[name] = tuple(numbers)
                continue
            vocabulary = body.vocabulary if isinstance(body, FilterRule | ExcludeRule) else None
            trigger = policy.trigger
            if vocabulary is None and trigger.kind == "vocabulary" and name == trigger.vocabulary_capture:
                vocabulary = trigger.vocabulary  # a vocabulary trigger binds the matched entry
            if from_context:
                vocabulary = None
            values: list[str] = []
            for text in sources:
                if vocabulary is None:
                    found: tuple[str, ...] = (text,)
                elif vocabulary not in vocabularies:
                    mapping(name, text, vocabulary, [])
                    reason = f"vocabulary '{vocabulary}' is not in the policy set"
                    return result(Problem("capture_unmapped", reason))
                else:
                    found = look_up(vocabularies[vocabulary], text)
                mapping(name, text, vocabulary, found)
                values.extend(v for v in found if v not in values)
            if not values:
                shown = "', '".join(sources)
                reason = f"vocabulary '{vocabulary}' has no entry for '{shown}' ({{{name}}})"
                return result(Problem("capture_unmapped", reason))
            bindings[name] = tuple(values)
        if missing_context:
            reason = f"rule {index} ({rule.kind}) uses {{market}} and the request has no market"
            dropped.append(DroppedRule(index=index, kind=rule.kind, code="context_missing", reason=reason))
            continue
        bodies.append(_substitute(body, bindings, prices))
    return result(None)
