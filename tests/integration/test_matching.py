"""The matcher against the real engine, table-driven from ``matching_cases.yaml``.

One small policy set is published once for the module; every case percolates one intent
and must match exactly the policies it lists, with the spans and captures it lists.
Hostile intents go through :func:`matcher.clean_intent` first, as the service does, and
must neither crash nor yield a span outside the text.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane import matcher, policy_store
from control_plane.engine import Engine
from control_plane.loader import build_policy_set
from control_plane.plan import Match, Span
from control_plane.policy import Governance, Policy, PolicySet, Vocabulary

CASES_FILE = Path(__file__).with_name("matching_cases.yaml")
CASES: dict[str, Any] = yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))


def build(document: dict[str, Any]) -> PolicySet:
    return build_policy_set(
        [Policy.model_validate(p) for p in document["policies"]],
        [Vocabulary.model_validate(v) for v in document["vocabularies"]],
        Governance.model_validate(document["governance"]),
    )


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def hostile_intent(entry: str | dict[str, Any]) -> str:
    if isinstance(entry, str):
        return entry
    repeated: str = entry["repeat"] * (entry["length"] // len(entry["repeat"]) + 1)
    return repeated[: entry["length"]]


@pytest.fixture(scope="module")
def published(engine: Engine) -> Iterator[tuple[str, dict[str, Policy]]]:
    """The case file's policy set, live in its own index for this module."""
    prefix = f"gstest-match-{uuid.uuid4().hex[:8]}"
    policy_set = build(CASES)
    index = policy_store.publish(engine, prefix, policy_set, "live")
    yield index, {p.id: p for p in policy_set.policies}
    for name in engine.list_indices(prefix + "*"):
        engine.delete_index(name)


def percolate(
    engine: Engine,
    published: tuple[str, dict[str, Policy]],
    intent: str,
    *,
    cohorts: tuple[str, ...] = (),
    now: datetime | None = None,
) -> tuple[Match, ...]:
    index, policies = published
    return matcher.match(
        engine, index, intent, policies, cohorts=cohorts, now=now or moment(CASES["now"])
    )


def observed(intent: str, found: Match) -> dict[str, Any]:
    """A match in the case file's shape, after checking every span covers its own text."""
    spans = [*found.spans, *(c.span for c in found.captures)]
    for span in spans:
        assert 0 <= span.start < span.end <= len(intent), span
        assert intent[span.start : span.end] == span.text, span
    result: dict[str, Any] = {"spans": [[s.start, s.end] for s in found.spans]}
    if found.captures:
        result["captures"] = [[c.text, c.span.start, c.span.end] for c in found.captures]
    return result


def expected(entry: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"spans": entry.get("spans", [])}
    if entry.get("captures"):
        result["captures"] = [[str(t), s, e] for t, s, e in entry["captures"]]
    return result


@pytest.mark.parametrize("case", CASES["cases"], ids=[c["name"] for c in CASES["cases"]])
def test_case(engine: Engine, published: tuple[str, dict[str, Policy]], case: dict[str, Any]) -> None:
    intent = case["intent"]
    assert matcher.clean_intent(intent) == intent, "case intents are written already cleaned"
    found = percolate(
        engine,
        published,
        intent,
        cohorts=tuple(case.get("cohorts", ())),
        now=moment(case["now"]) if "now" in case else None,
    )
    assert {m.policy_id: observed(intent, m) for m in found} == {
        policy_id: expected(entry) for policy_id, entry in (case.get("matches") or {}).items()
    }


def test_matches_are_sorted_by_policy_id(
    engine: Engine, published: tuple[str, dict[str, Policy]]
) -> None:
    found = percolate(engine, published, "cheap chocolate without milk", cohorts=("vegan", "staff"))
    ids = [m.policy_id for m in found]
    assert ids == sorted(ids) and len(ids) == 5


def test_captures_carry_the_pattern_name(
    engine: Engine, published: tuple[str, dict[str, Policy]]
) -> None:
    found = {m.policy_id: m for m in percolate(engine, published, "sans lait moins de 3")}
    assert [c.name for c in found["without-allergen"].captures] == ["allergen"]
    assert [c.name for c in found["under-price"].captures] == ["amount"]


def test_every_trigger_kind_is_covered() -> None:
    """The case file exercises each trigger kind with at least one positive case."""
    kinds = {p["id"]: next(iter(set(p["trigger"]) - {"consume"})) for p in CASES["policies"]}
    covered = {kinds[pid] for case in CASES["cases"] for pid in (case.get("matches") or {})}
    assert covered == {"exact", "pattern", "phrase", "any", "always"}


def test_disabled_policies_never_match(
    engine: Engine, published: tuple[str, dict[str, Policy]]
) -> None:
    disabled = {p["id"] for p in CASES["policies"] if p.get("enabled") is False}
    assert disabled == {"disabled-chocolate", "disabled-always"}
    for case in CASES["cases"]:
        found = percolate(
            engine, published, case["intent"], cohorts=tuple(case.get("cohorts", ())),
            now=moment(case["now"]) if "now" in case else None,
        )
        assert not disabled & {m.policy_id for m in found}, case["name"]


@pytest.mark.parametrize(
    "entry", CASES["hostile"], ids=[f"hostile-{i}" for i in range(len(CASES["hostile"]))]
)
def test_hostile_intents_stay_inside_the_text(
    engine: Engine, published: tuple[str, dict[str, Policy]], entry: str | dict[str, Any]
) -> None:
    raw = hostile_intent(entry)
    intent = matcher.clean_intent(raw)
    assert not {matcher.PRE_TAG, matcher.POST_TAG, "\u0000"} & set(intent)
    if not intent:
        return
    found = percolate(engine, published, intent, cohorts=("vegan",))
    for match in found:
        observed(intent, match)
        for capture in match.captures:
            assert capture.text.strip() == capture.text and capture.text


@pytest.mark.parametrize(
    "raw", ["vin bon marche\u0301", "vin bon marché", "Chocolats sans cacahue\u0300tes"]
)
def test_decomposed_accents_match_like_composed_ones(
    engine: Engine, published: tuple[str, dict[str, Policy]], raw: str
) -> None:
    """Text pasted in NFD (e + combining accent) folds like NFC text: the analyzer's
    asciifolding only folds precomposed letters, so cleaning composes them first."""
    intent = matcher.clean_intent(raw)
    found = {m.policy_id: observed(intent, m) for m in percolate(engine, published, intent)}
    composed = matcher.clean_intent(unicodedata.normalize("NFC", raw))
    assert found == {
        m.policy_id: observed(composed, m) for m in percolate(engine, published, composed)
    }
    assert found.keys() & {"cheap", "chocolate"}


def test_long_intent_spans_every_occurrence(
    engine: Engine, published: tuple[str, dict[str, Policy]]
) -> None:
    intent = ("chocolat sans lait, " * 120)[:2000].strip()
    found = {m.policy_id: m for m in percolate(engine, published, intent)}
    assert len(found["chocolate"].spans) == intent.count("chocolat")
    assert [c.text for c in found["without-allergen"].captures] == ["lait"] * intent.count("sans lait")


def test_spans_from_highlight_merges_adjacent_words_only() -> None:
    pre, post = matcher.PRE_TAG, matcher.POST_TAG
    marked = f"{pre}free{post} {pre}of{post} x {pre}y{post}"
    assert matcher.spans_from_highlight(marked) == (
        Span(start=0, end=7, text="free of"),
        Span(start=10, end=11, text="y"),
    )


def test_capture_keeps_combining_accents_inside_a_word() -> None:
    intent = "sans arachide\u0300s, lait"
    capture = matcher.capture_after(intent, Span(start=0, end=4, text="sans"), [], "allergen")
    assert capture is not None and capture.text == "arachide\u0300s"
