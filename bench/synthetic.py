"""Deterministic synthetic policy sets and intents, built from the demo catalog's titles.

The same seed and size always give the same policies (hence the same policy-set version)
and the same intents, so runs on different machines or commits compare like with like.

The generator ("realistic" sets, the issue-14 figures): trigger terms are the 1,000 most
frequent words, adjacent word pairs and word triples of catalog titles (``Vocabulary``);
triggers are 55% ``phrase`` (one or two phrases of 1-3 words: 50% one word, 35% a pair,
15% a triple), 30% ``any`` (two to four single words, consuming), 10% ``exact`` (a word or
a pair) and 5% ``pattern`` (a price or an allergen cue, consuming). Rules: patterns map
their capture (price ceiling, allergen exclusion); the others set a category (50%), boost
organic labels (30%) or a relative price ceiling (20%). 10% of policies carry a cohort,
10% an active window (half of them open at :data:`NOW`), 2% are disabled.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy, PolicySet

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "data" / "catalog.ndjson"
POLICIES = ROOT / "policies"
SEED = 20261130
#: the moment every percolation is evaluated at
NOW = datetime(2026, 12, 10, 12, tzinfo=UTC)
COHORTS = ("vegan", "staff", "members", "b2b")
ALLERGENS = ("peanuts", "arachide", "milk", "lait", "gluten", "eggs", "soja", "sesame")
#: words never used as trigger terms: capture stops and pattern cues
RESERVED = frozenset([
    "and", "or", "but", "with", "for", "in", "at", "by", "et", "ou", "mais", "avec", "pour",
    "dans", "chez", "par", "without", "sans", "under", "below", "less", "than", "moins", "de",
    "no", "free", "pas",
])
_WORDS = re.compile(r"[^\W\d_]{4,}")


class Vocabulary:
    """Words and adjacent word pairs of catalog titles, most frequent first; leaf categories."""

    def __init__(self, words: list[str], pairs: list[str], categories: list[str], triples: list[str]) -> None:
        self.words = words
        self.pairs = pairs
        self.categories = categories
        self.triples = triples

    @classmethod
    def from_catalog(cls, path: Path = CATALOG, size: int = 1000) -> Vocabulary:
        words: Counter[str] = Counter()
        pairs: Counter[str] = Counter()
        triples: Counter[str] = Counter()
        categories: Counter[str] = Counter()
        for line in path.read_text(encoding="utf-8").splitlines():
            product = json.loads(line)
            title = [w for w in _WORDS.findall(product["title"].casefold()) if w not in RESERVED]
            words.update(title)
            pairs.update(f"{a} {b}" for a, b in pairwise(title))
            triples.update(" ".join(title[i : i + 3]) for i in range(len(title) - 2))
            categories[product["category"]] += 1
        def top(counter: Counter[str], n: int) -> list[str]:
            return [w for w, _ in sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]

        return cls(top(words, size), top(pairs, size), top(categories, 50), top(triples, size))


def _phrase(rng: random.Random, vocabulary: Vocabulary) -> str:
    roll = rng.random()
    pool = vocabulary.words if roll < 0.5 else vocabulary.pairs if roll < 0.85 else vocabulary.triples
    return rng.choice(pool)


def _trigger(rng: random.Random, vocabulary: Vocabulary, roll: float) -> dict[str, Any]:
    if roll < 0.55:
        return {"phrase": sorted({_phrase(rng, vocabulary) for _ in range(rng.randint(1, 2))})}
    if roll < 0.85:
        return {"any": sorted(set(rng.sample(vocabulary.words, rng.randint(2, 4)))), "consume": True}
    if roll < 0.95:
        pool = vocabulary.pairs if rng.random() < 0.3 else vocabulary.words
        return {"exact": [rng.choice(pool)]}
    if rng.random() < 0.5:
        return {"pattern": ["(under|below|less than|moins de) {amount}"], "consume": True}
    return {"pattern": ["(without|no|free of|sans|pas de) {allergen}"], "consume": True}


def _rules(rng: random.Random, vocabulary: Vocabulary, trigger: dict[str, Any]) -> list[dict[str, Any]]:
    if "pattern" in trigger:
        if "{amount}" in trigger["pattern"][0]:
            return [{"price": {"max": "{amount}"}}]
        return [{"exclude": {"field": "allergens", "values": ["{allergen}"], "vocabulary": "allergens"}}]
    roll = rng.random()
    if roll < 0.5:
        return [{"category": {"values": [rng.choice(vocabulary.categories)]}}]
    if roll < 0.8:
        return [{"boost": {"field": "labels", "values": ["organic"], "weight": 1.5}}]
    return [{"price": {"max": {"percentile": rng.choice([20, 30, 50])}}}]


def policy_set(size: int, vocabulary: Vocabulary, seed: int = SEED) -> PolicySet:
    """``size`` synthetic policies, with the demo vocabularies and governance."""
    rng = random.Random(f"{seed}:{size}")
    demo = load_policy_set(POLICIES)
    policies: list[Policy] = []
    for number in range(size):
        trigger = _trigger(rng, vocabulary, rng.random())
        document: dict[str, Any] = {
            "id": f"syn-{number:05d}",
            "title": f"synthetic policy {number}",
            "owner": "bench",
            "priority": rng.randint(1, 100),
            "trigger": trigger,
            "rules": _rules(rng, vocabulary, trigger),
        }
        extra = rng.random()
        if extra < 0.10:
            document["cohorts"] = [rng.choice(COHORTS)]
        elif extra < 0.15:
            document["active"] = {"from": "2026-12-01T00:00:00Z", "until": "2027-01-01T00:00:00Z"}
        elif extra < 0.20:
            document["active"] = {"from": "2027-01-01T00:00:00Z", "until": "2027-02-01T00:00:00Z"}
        elif extra < 0.22:
            document["enabled"] = False
        policies.append(Policy.model_validate(document))
    return build_policy_set(policies, demo.vocabularies, demo.governance)


#: intents a shopper types, alongside the generated ones
HAND_WRITTEN = (
    "oranges",
    "orange juice",
    "cheap chocolate",
    "chocolate without peanuts",
    "chocolat sans arachide et sans lait",
    "dark chocolate under 5",
    "french fries",
    "vanilla ice cream pas cher",
    "coffee creamer free of milk",
    "salad dressing moins de 3 euros",
)


def intents(vocabulary: Vocabulary, count: int = 50, seed: int = SEED) -> list[str]:
    """``count`` intents: the hand-written ones, then generated ones (1-3 catalog words or a
    title word pair, sometimes followed by an allergen or a price cue)."""
    rng = random.Random(f"{seed}:intents")
    out = list(HAND_WRITTEN[:count])
    while len(out) < count:
        words = (
            [rng.choice(vocabulary.pairs)]
            if rng.random() < 0.4
            else rng.sample(vocabulary.words, rng.randint(1, 3))
        )
        tail = rng.random()
        if tail < 0.2:
            words.append(f"without {rng.choice(ALLERGENS)}")
        elif tail < 0.35:
            words.append(f"under {rng.randint(2, 20)}")
        intent = " ".join(words)
        if intent not in out:
            out.append(intent)
    return out
