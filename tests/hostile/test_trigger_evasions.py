"""Property: disguising a demo policy's trigger words changes nothing.

For every demo policy with a text trigger (``policies/``), each trigger phrase -- each cue
of a pattern, followed by a word its capture maps -- is the clean intent. Hypothesis then
disguises it: format and control characters (zero-width, bidi controls, BOM, soft hyphen,
NUL, ...) inserted anywhere, letters swapped for look-alikes of other scripts from the TR39
data (each word keeps a Latin letter, so it is mixed-script), compatibility forms, other
spaces between words. The disguised intent must fire the same policies, skip and resolve
the same way, and render the same DSL as the clean one, on the real engine with the demo
policy set published (plan cache off: every example percolates).

Deterministic: ``derandomize=True`` and no example database; bounded examples per phrase.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from confusable_homoglyphs import categories
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.intent_text import normalise
from control_plane.loader import load_policy_set
from control_plane.policy import Policy, PolicySet
from control_plane.service import Compiled, SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.hostile.unicode_data import FORMAT_AND_CONTROL, LOOK_ALIKES

ROOT = Path(__file__).resolve().parents[2]
DEMO: PolicySet = load_policy_set(ROOT / "policies")
SPACES = (" ", "  ", "\t", "\u00a0", "\u2009", "\u3000", " \u200b ")


def capture_word(policy: Policy, capture: str) -> str:
    """A word the capture maps: the first word of the vocabulary its rules look it up in
    (the first entry by name), else an amount."""
    rules = json.dumps([rule.model_dump(mode="json") for rule in policy.rules])
    for vocabulary in sorted(DEMO.vocabularies, key=lambda v: v.name):
        if f'"vocabulary": "{vocabulary.name}"' in rules and "{" + capture + "}" in rules:
            first = sorted(vocabulary.entries)[0]
            return vocabulary.entries[first][0]
    return "5"


def trigger_intents() -> Iterator[tuple[str, str]]:
    """(policy id, clean intent) for every text trigger phrase of the demo policies."""
    for policy in sorted(DEMO.policies, key=lambda p: p.id):
        trigger = policy.trigger
        if trigger.kind == "pattern":
            for pattern in trigger.patterns:
                word = capture_word(policy, pattern.capture)
                for cue in pattern.cues:
                    yield policy.id, f"{cue} {word}"
        else:
            for value in trigger.values:
                yield policy.id, value


CASES = list(trigger_intents())


def evaluated_at(policy: Policy) -> datetime:
    """An instant the policy is active at (its window's start, if it has one)."""
    window = policy.active
    return window.start if window and window.start else FIXED_NOW


@st.composite
def disguised(draw: st.DrawFn, clean: str) -> str:
    words = []
    for word in clean.split(" "):
        chars = list(word)
        latin = sum(1 for c in word if categories.alias(c) == "LATIN")
        swappable = [i for i, c in enumerate(chars) if c in LOOK_ALIKES]
        most = min(len(swappable), latin - 1)
        if most > 0:
            for index in draw(st.lists(st.sampled_from(swappable), unique=True, max_size=most)):
                fullwidth = chr(ord(chars[index]) + 0xFEE0)
                chars[index] = draw(st.sampled_from((*LOOK_ALIKES[chars[index]], fullwidth)))
        insertions = draw(st.lists(st.tuples(st.integers(0, len(chars)), st.sampled_from(FORMAT_AND_CONTROL)),
                                   max_size=3))
        for position, char in sorted(insertions, reverse=True):
            chars.insert(position, char)
        words.append("".join(chars))
    out = words[0]
    for word in words[1:]:
        out += draw(st.sampled_from(SPACES)) + word
    prefix = draw(st.sampled_from(("", "\ufeff", "\u202e", "\u2066")))
    return prefix + out + draw(st.sampled_from(("", "\u202c", "\x00")))


@pytest.fixture(scope="module")
def uncached(engine: Engine, settings: Settings, ready: Ready) -> Iterator[SearchService]:
    search_settings = settings.search.model_copy(update={"plan_cache_size": 0})
    service = SearchService(settings.model_copy(update={"search": search_settings}), engine,
                            profile_of(settings))
    yield service
    service.close()


def decided(service: SearchService, intent: str, now: datetime) -> dict[str, Any]:
    """What the pipeline decided for ``intent``: policies and reasons, and the DSL."""
    request = SearchRequest(intent=intent, cohorts=("vegan",), market="fr")
    compiled: Compiled = service.compile(request, now)
    explanation = json.loads(compiled.composition.explanation.model_dump_json())
    return {
        "intent": compiled.intent,
        "matched": sorted(m["policy_id"] for m in explanation["matched"]),
        "applied": list(compiled.composition.plan.applied),
        "skipped": explanation["skipped"],
        "resolutions": explanation["resolutions"],
        "dsl": service.render(compiled, request, "strict"),
    }


def test_every_text_trigger_of_the_demo_is_covered() -> None:
    covered = {policy_id for policy_id, _ in CASES}
    assert covered == {p.id for p in DEMO.policies if p.trigger.kind != "always"}
    assert all(normalise(clean) == clean for _, clean in CASES)


@pytest.mark.parametrize(("policy_id", "clean"), CASES, ids=[f"{p}:{c}" for p, c in CASES])
def test_disguised_trigger_words_decide_like_the_clean_ones(
    uncached: SearchService, policy_id: str, clean: str
) -> None:
    now = evaluated_at(DEMO.policy(policy_id))
    reference = decided(uncached, clean, now)
    assert policy_id in reference["matched"], reference

    @hypothesis_settings(max_examples=6, deadline=None, derandomize=True, database=None)
    @given(disguised(clean))
    def disguised_the_same(hostile: str) -> None:
        assert decided(uncached, hostile, now) == reference

    disguised_the_same()
