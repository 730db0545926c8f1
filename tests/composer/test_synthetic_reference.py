"""The composer's and the renderer's kept steps against their reference paths on the bench's
synthetic corpus (ADR 0031).

``bench.compose`` times compose + render on requests that match 1 to 50 policies of a
synthetic set; the per-policy, per-body and per-pair tables the fast path keeps across
composes (bindings, order heads, proposals, boosts and their dumps, held and disjoint
resolutions, boost fragment keys) are exercised hardest there. Every request below is
composed by the reference path (``composer_state.REFERENCE``: nothing remembered, a frozen
state per rule) and rendered with the fragment cache off, then by the fast path twice
(cold, then warm: the second round reads what the first kept), in a shuffled order, and
must give the same composition JSON and the same body, byte for byte. A second version
of the set, whose policies are new objects with the same ids and other rules, must not see
anything kept for the first.
"""

from __future__ import annotations

import json
import random

import pytest

import control_plane.composer_state as composer_state
import control_plane.renderer as renderer
from bench import compose as bench_compose
from bench import synthetic
from control_plane.catalog.profile import CatalogProfile, load_profile
from control_plane.catalog.stats import category_price_stats
from control_plane.composer import ComposeContext, compose
from control_plane.plan import Match
from control_plane.policy import PolicySet

SIZE = 1_500
Corpus = tuple[PolicySet, PolicySet, ComposeContext, CatalogProfile]


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    vocabulary = synthetic.Vocabulary.from_catalog()
    first = synthetic.policy_set(SIZE, vocabulary)
    other = synthetic.policy_set(SIZE, vocabulary, seed=synthetic.SEED + 1)  # same ids, other rules
    profile = load_profile(bench_compose.PROFILE, check=False)
    products = [json.loads(line) for line in synthetic.CATALOG.read_text(encoding="utf-8").splitlines()]
    context = ComposeContext(
        cohorts=("vegan",), category_field=profile.category,
        price_stats=category_price_stats(products, profile),
    )
    return first, other, context, profile


def _requests(policy_set: PolicySet, rng: random.Random) -> list[tuple[str, list[Match]]]:
    """The bench's scenarios, and shuffled subsets of its 50-policy one (other orders,
    other sets of contests)."""
    requests = [bench_compose.scenario(policy_set, count) for count in (1, 5, 10, 25, 50)]
    intent, matches = requests[-1]
    for _ in range(12):
        chosen = rng.sample(matches, rng.randint(2, len(matches)))
        requests.append((intent, chosen))
    return requests


def _reference(
    policy_set: PolicySet, intent: str, matches: list[Match], context: ComposeContext, profile: CatalogProfile
) -> tuple[str, str]:
    composer_state.REFERENCE = True
    renderer._FRAGMENT_CACHE = False
    try:
        return _both(policy_set, intent, matches, context, profile)
    finally:
        composer_state.REFERENCE = False
        renderer._FRAGMENT_CACHE = True


def _both(
    policy_set: PolicySet, intent: str, matches: list[Match], context: ComposeContext, profile: CatalogProfile
) -> tuple[str, str]:
    composition = compose(policy_set, intent, matches, context)
    body = renderer.render(composition.plan, profile, engine="opensearch", tier="strict")
    return composition.model_dump_json(), json.dumps(body)


def test_the_synthetic_corpus_composes_and_renders_as_the_reference_cold_and_warm(corpus: Corpus) -> None:
    first, other, context, profile = corpus
    rng = random.Random(31)
    for policy_set in (first, other, first):  # a version after another: nothing kept leaks
        requests = _requests(policy_set, rng)
        expected = [_reference(policy_set, intent, matches, context, profile) for intent, matches in requests]
        assert any(len(json.loads(e[0])["explanation"]["resolutions"]) > 10 for e in expected)
        for _ in range(2):
            order = list(range(len(requests)))
            rng.shuffle(order)
            for position in order:
                intent, matches = requests[position]
                assert _both(policy_set, intent, matches, context, profile) == expected[position], position


def test_the_two_versions_differ_where_their_policies_do(corpus: Corpus) -> None:
    """The second version is not the first under another name: the test above compares
    compositions that differ (else it could not tell a table kept across versions)."""
    first, other, context, profile = corpus
    one = _both(first, *bench_compose.scenario(first, 50), context, profile)
    two = _both(other, *bench_compose.scenario(other, 50), context, profile)
    assert one[0] != two[0]
    assert {p.id for p in first.policies} == {p.id for p in other.policies}
