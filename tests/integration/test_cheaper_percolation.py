"""A cheaper percolation (ADR 0037), on the real engine: the same matches, spans, plans and
DSL as before.

- The ``intent`` field is indexed with offsets, so the highlighter reads the spans from the
  percolated document's postings instead of analysing the intent again per hit. An index
  of the same set without offsets (the mapping before) gives exactly the same matches,
  spans and captures for every intent of the regression corpus, the governed bench's
  intents, the matcher's case file and the synthetic generator's intents, at several
  cohorts and instants; and the same compiled plans and rendered tiers for the demo.
- The layout is read once when a version is loaded (``LivePolicySet.layout``): a service
  then percolates without the marker's ``ids`` clause, and matching with the layout known
  equals matching that asks for the marker; a legacy index is known as one and is matched
  the old way.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from bench import synthetic
from bench.governed import INTENTS as BENCH_INTENTS
from control_plane import matcher, policy_store
from control_plane.bootstrap import Ready, profile_of
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.policy import Policy, PolicySet
from control_plane.renderer import TIERS
from control_plane.service import SearchRequest, SearchService
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import QUERIES, Recording
from tests.integration.test_matching import CASES, build, hostile_intent
from tests.integration.test_percolation_scale import publish_legacy, small_set


def regression_intents() -> list[str]:
    lines = QUERIES.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def case_intents() -> list[str]:
    found = [case["intent"] for case in CASES["cases"] if isinstance(case.get("intent"), str)]
    return found + [hostile_intent(entry) for entry in CASES.get("hostile", [])]


def without_offsets(
    engine: Engine, prefix: str, policy_set: PolicySet, monkeypatch: pytest.MonkeyPatch
) -> str:
    """``policy_set`` published under the mapping before ADR 0037: no offsets on ``intent``."""
    mapping = json.loads(json.dumps(policy_store.policies_mapping()))
    assert mapping["mappings"]["properties"]["intent"].pop("index_options") == "offsets"
    with monkeypatch.context() as patch:
        patch.setattr(policy_store, "policies_mapping", lambda *_analysis: mapping)
        return policy_store.publish(engine, f"{prefix}-analysis", policy_set, "live")


def with_offsets(engine: Engine, prefix: str, policy_set: PolicySet) -> str:
    """``policy_set`` published afresh under today's mapping (offsets on ``intent``). Not the
    session's demo index: on an engine kept from before ADR 0037, the same version's index is
    reused with the mapping it was written with."""
    return policy_store.publish(engine, f"{prefix}-offsets", policy_set, "live")


def uncached(settings: Settings) -> Settings:  # noqa: F811
    """``settings`` with the plan cache off: every search compiles (percolates) afresh."""
    return settings.model_copy(
        update={"search": settings.search.model_copy(update={"plan_cache_size": 0})}
    )


def index_options(engine: Engine, index: str) -> Any:
    return engine.request("GET", f"/{index}/_mapping")[index]["mappings"]["properties"]["intent"].get(
        "index_options"
    )


def same_matches(
    engine: Engine,
    new: str,
    old: str,
    policies: dict[str, Policy],
    intents: list[str],
    cohorts: list[tuple[str, ...]],
) -> int:
    """Assert every intent matches alike on both indices, the new one with and without the
    layout known; the number of spans compared (so that nothing is compared vacuously)."""
    spans = 0
    for intent in intents:
        cleaned = matcher.clean_intent(intent)
        for group in cohorts:
            for now in (FIXED_NOW, FIXED_NOW - timedelta(days=2)):
                before = matcher.match(engine, old, cleaned, policies, cohorts=group, now=now)
                marked = matcher.match(engine, new, cleaned, policies, cohorts=group, now=now)
                known = matcher.match(
                    engine, new, cleaned, policies, cohorts=group, now=now, layout="triggers"
                )
                assert tuple(marked) == tuple(before), (intent, group, now)
                assert tuple(known) == tuple(before), (intent, group, now)
                spans += sum(len(m.spans) + len(m.captures) for m in before)
    return spans


def test_offsets_give_the_same_spans_on_the_demo_set(
    engine: Engine,
    ready: Ready,  # noqa: F811
    index_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live = policy_store.read_index(engine, ready.policies_index)
    new = with_offsets(engine, index_prefix, live.policy_set)
    old = without_offsets(engine, index_prefix, live.policy_set, monkeypatch)
    assert index_options(engine, new) == "offsets" and index_options(engine, old) is None
    intents = [*regression_intents(), *BENCH_INTENTS]
    policies = dict(live.policy_set.lookups().by_id)
    spans = same_matches(engine, new, old, policies, intents, [(), ("vegan",), ("gold",)])
    assert spans > len(intents)


def test_offsets_give_the_same_spans_on_the_case_file(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = build(CASES)
    new = policy_store.publish(engine, index_prefix, policy_set, "live")
    old = without_offsets(engine, index_prefix, policy_set, monkeypatch)
    policies = {p.id: p for p in policy_set.policies}
    cohorts = sorted({tuple(case.get("cohorts", ())) for case in CASES["cases"]})
    assert same_matches(engine, new, old, policies, case_intents(), cohorts) > 0


def test_offsets_give_the_same_spans_on_a_synthetic_set(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    vocabulary = synthetic.Vocabulary.from_catalog()
    policy_set = synthetic.policy_set(400, vocabulary)
    new = policy_store.publish(engine, index_prefix, policy_set, "live")
    old = without_offsets(engine, index_prefix, policy_set, monkeypatch)
    policies = {p.id: p for p in policy_set.policies}
    intents = synthetic.intents(vocabulary, 50)
    assert same_matches(engine, new, old, policies, intents, [(), ("vegan",)]) > len(intents)


def test_the_demo_compiles_and_renders_alike_on_both_mappings(
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
    index_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plans and rendered tiers of every regression intent: the service on the offsets index
    (layout known, no marker) against a service on the same set without offsets."""
    live = policy_store.read_index(engine, ready.policies_index)
    new = with_offsets(engine, index_prefix, live.policy_set)
    old = without_offsets(engine, index_prefix, live.policy_set, monkeypatch)
    tuned = uncached(settings)
    new_service = SearchService(tuned, engine, profile_of(tuned), index=new)
    old_service = SearchService(tuned, engine, profile_of(tuned), index=old)
    try:
        for intent in regression_intents():
            for request in (SearchRequest(intent=intent), SearchRequest(intent=intent, cohorts=("vegan",))):
                new_plan = new_service.compile(request, FIXED_NOW)
                old_plan = old_service.compile(request, FIXED_NOW)
                assert new_plan.composition == old_plan.composition, intent
                for tier in TIERS:
                    rendered = new_service.rendered(new_plan, request, tier)
                    assert rendered == old_service.rendered(old_plan, request, tier), (intent, tier)
    finally:
        new_service.close()
        old_service.close()


def test_the_layout_is_read_once_per_version_and_the_marker_not_asked_for(
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
) -> None:
    assert policy_store.read_index(engine, ready.policies_index).layout == "triggers"
    recording = Recording(engine)
    tuned = uncached(settings)
    service = SearchService(tuned, recording, profile_of(tuned), index=ready.policies_index)
    try:
        service.search(SearchRequest(intent="oranges"), FIXED_NOW)  # the version loaded
        recording.sent.clear()
        service.search(SearchRequest(intent="chocolate without peanuts"), FIXED_NOW)
        service.search(SearchRequest(intent="chocolate without peanuts", user_id="alice"), FIXED_NOW)
    finally:
        service.close()
    percolations = [
        body for _, path, body in recording.sent if ready.policies_index in str(path) + str(body)
    ]
    assert len(percolations) == 2  # alone or with its first tiers (ADR 0049), then with the purchases
    assert all("percolate" in str(body) and matcher.LAYOUT_ID not in str(body) for body in percolations)
    assert not any(path.endswith(f"/_doc/{matcher.LAYOUT_ID}") for _, path, _ in recording.sent)


def test_a_legacy_index_is_known_as_one_and_matched_the_old_way(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = small_set(24, pattern_every=5, mixed=True)
    policies = {p.id: p for p in policy_set.policies}
    current = policy_store.publish(engine, index_prefix, policy_set, "live")
    oldest = publish_legacy(engine, index_prefix, policy_set, monkeypatch, phrases=False)
    assert policy_store.read_index(engine, current).layout == "triggers"
    assert policy_store.read_index(engine, oldest).layout == "legacy"
    for intent in (
        "dark chocolate",
        "bar1 bar2 and dark chocolate sans lait",
        "Dark Chocolates bar3 without milk",
    ):
        cleaned = matcher.clean_intent(intent)
        expected = matcher.match(engine, current, cleaned, policies, now=FIXED_NOW)
        assert expected
        assert matcher.match(engine, oldest, cleaned, policies, now=FIXED_NOW, layout="legacy") == expected
        assert matcher.match(engine, oldest, cleaned, policies, now=FIXED_NOW) == expected


def test_a_legacy_index_and_a_user_send_no_trigger_percolation(
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
    index_prefix: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A user whose purchases are not cached, on a legacy index: the purchases are looked up
    alone and the index matched the old way, with no trigger percolation sent beside them to
    be thrown away (found in review); the plan is the one the current layout gives."""
    live = policy_store.read_index(engine, ready.policies_index)
    oldest = publish_legacy(engine, index_prefix, live.policy_set, monkeypatch, phrases=False)
    tuned = uncached(settings)
    recording = Recording(engine)
    legacy = SearchService(tuned, recording, profile_of(tuned), index=oldest)
    current = SearchService(tuned, engine, profile_of(tuned), index=ready.policies_index)
    try:
        request = SearchRequest(intent="chocolate without peanuts", user_id="alice")
        legacy.compile(SearchRequest(intent="oranges"), FIXED_NOW)  # the version loaded
        recording.sent.clear()
        plan = legacy.compile(request, FIXED_NOW)
        expected = current.compile(request, FIXED_NOW)
        assert plan.composition == expected.composition
        assert plan.purchases == expected.purchases and plan.personalization == expected.personalization
    finally:
        legacy.close()
        current.close()
    sent = [str(path) + str(body) for _, path, body in recording.sent]
    assert any("percolate" in text for text in sent)  # matched, the old way
    assert not any(f"'{matcher.TRIGGER_DOC}'" in text or f'"{matcher.TRIGGER_DOC}"' in text for text in sent)
    assert sum("purchases" in text for text in sent) == 1  # looked up, alone


def test_the_percolation_asks_for_the_marker_only_when_the_layout_is_unknown() -> None:
    _, unknown = matcher.percolation("policies", "dark chocolate")
    _, known = matcher.percolation("policies", "dark chocolate", "triggers")
    assert matcher.LAYOUT_ID in json.dumps(unknown) and matcher.LAYOUT_ID not in json.dumps(known)
    assert known["query"] == unknown["query"]["bool"]["should"][0]
    assert {k: v for k, v in known.items() if k != "query"} == {
        k: v for k, v in unknown.items() if k != "query"
    }


def test_the_mapping_file_indexes_intent_offsets() -> None:
    mapping = json.loads(
        Path(policy_store.project_path("mappings/policies.json")).read_text(encoding="utf-8")
    )
    assert mapping["mappings"]["properties"]["intent"]["index_options"] == "offsets"
