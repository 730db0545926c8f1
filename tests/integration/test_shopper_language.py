"""Shopper language against the real engine and the demo catalog.

Every case of ``tests/composer/cases/shopper/language.yaml`` is matched (percolation over a
published copy of the file's policy set), composed and, when it names ``excluded``,
searched on the demo catalog: no hit may mention the excluded word, and the same search
without the exclusions must return one that does (so the exclusion removed something).
``GOVSEARCH_ENGINE_URL=... python -m tests.integration.test_shopper_language`` measures the
capture accuracy (:func:`measure`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from control_plane import matcher, policy_store
from control_plane.catalog.profile import CatalogProfile, load_profile
from control_plane.catalog_loader import load_catalog
from control_plane.composer import ComposeContext, compose
from control_plane.composer_captures import normalise
from control_plane.engine import Engine
from control_plane.loader import build_policy_set
from control_plane.plan import Composition
from control_plane.policy import Governance, Policy, PolicySet, Vocabulary
from control_plane.renderer import render
from control_plane.shopper_language import field_types_of
from tests.clocks import FIXED_NOW

ROOT = Path(__file__).resolve().parents[2]
CASES_FILE = ROOT / "tests" / "composer" / "cases" / "shopper" / "language.yaml"
DOCUMENT: dict[str, Any] = yaml.safe_load(CASES_FILE.read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = DOCUMENT["cases"]
PROFILE = load_profile(ROOT / "mappings" / "catalog.profile.yaml")


def policy_set(profile: CatalogProfile = PROFILE) -> PolicySet:
    policies = [
        Policy.model_validate({"title": raw["id"], "owner": "merch", **raw}) for raw in DOCUMENT["policies"]
    ]
    return build_policy_set(
        policies,
        [Vocabulary.model_validate(v) for v in DOCUMENT["vocabularies"]],
        Governance.model_validate(DOCUMENT["governance"]),
        field_types=field_types_of(profile),
    )


@pytest.fixture(scope="module")
def published(engine: Engine) -> Iterator[tuple[str, PolicySet]]:
    prefix = f"gstest-shopper-{uuid.uuid4().hex[:8]}"
    frozen = policy_set()
    yield policy_store.publish(engine, prefix, frozen, "live"), frozen
    for name in engine.list_indices(prefix + "*"):
        engine.delete_index(name)


@pytest.fixture(scope="module")
def catalog(engine: Engine) -> Iterator[tuple[str, CatalogProfile]]:
    alias = f"gstest-shopper-catalog-{uuid.uuid4().hex[:8]}"
    profile = PROFILE.model_copy(update={"alias": alias})
    report = load_catalog(engine, profile, ROOT / "data" / "catalog.ndjson")
    yield alias, profile
    engine.delete_index(report.index)


def composed(engine: Engine, published: tuple[str, PolicySet], intent: str) -> Composition:
    index, frozen = published
    cleaned = matcher.clean_intent(intent)
    found = matcher.match(engine, index, cleaned, {p.id: p for p in frozen.policies}, now=FIXED_NOW)
    return compose(frozen, cleaned, found, ComposeContext(category_field="categories"))


@pytest.mark.parametrize("case", CASES, ids=[c["intent"] for c in CASES])
def test_case(engine: Engine, published: tuple[str, PolicySet], case: dict[str, Any]) -> None:
    composition = composed(engine, published, case["intent"])
    assert _by_name(composition) == {k: [str(t) for t in v] for k, v in (case.get("captures") or {}).items()}
    assert composition.plan.residual == case["residual"]
    explanation = composition.explanation
    if "applied" in case:
        assert list(composition.plan.applied) == case["applied"]
    skipped = {s.policy_id: s.code for s in explanation.skipped}
    assert skipped == case.get("skipped", {}), explanation.skipped
    for field, values in (case.get("filter") or {}).items():
        assert [list(c.values) for c in composition.plan.filters if c.field == field] == [values]


def _by_name(composition: Composition) -> dict[str, list[str]]:
    """Captures recorded in the explanation (name -> texts in the order recorded)."""
    names: dict[str, list[str]] = {}
    for mapping in composition.explanation.captures:
        texts = names.setdefault(mapping.name, [])
        if mapping.text not in texts:
            texts.append(mapping.text)
    return names


EXCLUDING = [c for c in CASES if "excluded" in c]


@pytest.mark.parametrize("case", EXCLUDING, ids=[c["intent"] for c in EXCLUDING])
def test_exclusions_remove_every_product_that_mentions_the_word(
    engine: Engine,
    published: tuple[str, PolicySet],
    catalog: tuple[str, CatalogProfile],
    case: dict[str, Any],
) -> None:
    alias, profile = catalog
    plan = composed(engine, published, case["intent"]).plan
    assert plan.exclusions and all(c.match == "phrase" for c in plan.exclusions)
    word = re.compile(rf"\b(?:{case['excluded']})\b")

    def mentions(plan_: Any) -> list[str]:
        body = render(plan_, profile, engine="opensearch", tier="relaxed", size=200, facets=False)
        body["_source"] = ["id", "title", "text"]
        hits = engine.search(alias, body)["hits"]["hits"]
        assert hits, "the search returns products"
        return [
            h["_source"]["id"] for h in hits
            if word.search(normalise(f"{h['_source'].get('title', '')} {h['_source'].get('text', '')}"))
        ]

    assert mentions(plan) == []
    assert mentions(plan.model_copy(update={"exclusions": ()})), "without the exclusion some hit mentions it"


def test_one_colour_policy_turns_every_spelling_into_the_same_filter(
    engine: Engine, published: tuple[str, PolicySet]
) -> None:
    filters = {
        intent: composed(engine, published, intent).plan.filters
        for intent in ("black shoes", "shoes in black", "noir")
    }
    assert len({f for f in filters.values()}) == 1, filters
    assert [c.values for c in filters["noir"]] == [("black",)]


def test_gluten_free_and_sans_gluten_apply_the_same_policy(
    engine: Engine, published: tuple[str, PolicySet]
) -> None:
    english = composed(engine, published, "gluten free pasta").plan
    french = composed(engine, published, "pâtes sans gluten").plan
    assert english.applied == french.applied == ("negation",)
    assert english.exclusions == french.exclusions


def test_a_coordinated_negation_requires_neither_item_and_excludes_both(
    engine: Engine, published: tuple[str, PolicySet]
) -> None:
    plan = composed(engine, published, "flask without strap or lid").plan
    assert plan.residual == "flask"
    assert {v for c in plan.exclusions for v in c.values} == {"strap", "lid"}


def measure(engine: Engine) -> tuple[int, int, list[str]]:
    """Capture accuracy on the case file, from the engine: (right, total, intents missed).
    A case is right when what the matcher captures is what a person would (the case's
    ``wrong.captures`` when it has one, else its ``captures``)."""
    prefix = f"gstest-shopper-measure-{uuid.uuid4().hex[:8]}"
    frozen = policy_set()
    published = (policy_store.publish(engine, prefix, frozen, "live"), frozen)
    missed = []
    try:
        for case in CASES:
            right = (case.get("wrong") or {}).get("captures", case.get("captures")) or {}
            got = _by_name(composed(engine, published, case["intent"]))
            if got != {k: [str(t) for t in v] for k, v in right.items()}:
                missed.append(case["intent"])
    finally:
        for name in engine.list_indices(prefix + "*"):
            engine.delete_index(name)
    return len(CASES) - len(missed), len(CASES), missed


if __name__ == "__main__":
    import os

    from control_plane.config import EngineSettings
    from control_plane.engine import connect

    client = connect(EngineSettings(url=os.environ["GOVSEARCH_ENGINE_URL"], timeout_s=30))
    right, total, missed = measure(client)
    print(f"capture accuracy: {right}/{total} = {right / total:.1%}")
    for intent in missed:
        why = next(c.get("wrong", {}).get("why", "") for c in CASES if c["intent"] == intent)
        print(f"  wrong: {intent!r}: {why}")
