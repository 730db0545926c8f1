"""Percolation and publishing at scale, on the real engine, made small.

- Paging: an index whose ``index.max_result_window`` is lowered below the number of
  policies an intent matches (and a page smaller than the window): every match is found.
  The same request without paging is refused by the engine, so the test would fail if
  ``match`` asked for everything in one page.
- Phrase highlighting: spans from the phrase documents equal the spans the policies' own
  highlighted queries give (the old path, still used for indices without phrases); an
  index published before phrase documents (and their mapped field) existed matches the same.
- Batches: bounded in documents and bytes, every document present after; a batch the
  engine refuses mid-publish leaves no index and no alias.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from control_plane import matcher, policy_store
from control_plane.engine import Engine, EngineError
from control_plane.loader import build_policy_set
from control_plane.policy import Governance, Policy, PolicySet
from tests.clocks import FIXED_NOW

GOVERNANCE = Governance(filterable_fields=("brand",), boostable_fields=("brand",))


def small_set(count: int, *, pattern_every: int = 0) -> PolicySet:
    policies = []
    for number in range(count):
        trigger: dict[str, Any] = {"phrase": ["dark chocolate", f"bar{number}"]}
        rules: list[dict[str, Any]] = [{"boost": {"field": "brand", "values": [f"b{number}"], "weight": 1.5}}]
        if pattern_every and number % pattern_every == 0:
            trigger = {"pattern": ["(without|sans) {item}"], "consume": True}
            rules = [{"filter": {"field": "brand", "values": ["{item}"]}}]
        policies.append(Policy.model_validate({
            "id": f"p-{number:03d}",
            "title": f"policy {number}",
            "owner": "test",
            "trigger": trigger,
            "rules": rules,
        }))
    return build_policy_set(policies, (), GOVERNANCE)


def by_type(engine: Engine, index: str, doc_type: str) -> int:
    engine.refresh(index)
    body = {"size": 0, "track_total_hits": True, "query": {"term": {"doc_type": doc_type}}}
    total: int = engine.search(index, body)["hits"]["total"]["value"]
    return total


def test_matches_beyond_the_result_window_are_all_found(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = small_set(37, pattern_every=9)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    engine.request("PUT", f"/{index}/_settings", body={"index.max_result_window": 10})
    policies = {p.id: p for p in policy_set.policies}
    with pytest.raises(EngineError, match=r"(?i)result window"):  # one page of everything is refused
        engine.percolate(index, {"intent": "dark chocolate"}, size=len(policies), source=["policy_id"])
    monkeypatch.setattr(matcher, "PAGE", 4)

    found = matcher.match(engine, index, "dark chocolate sans noisette", policies, now=FIXED_NOW)

    assert [m.policy_id for m in found] == sorted(policies)
    for m in found:
        if policies[m.policy_id].trigger.kind == "pattern":
            assert [s.text for s in m.spans] == ["sans"]
            assert [c.text for c in m.captures] == ["noisette"]
        else:
            assert [s.text for s in m.spans] == ["dark chocolate"]


INTENTS = (
    "dark chocolate",
    "Dark Chocolates bar3 without milk",
    "bar1 bar2 and dark chocolate sans lait",
    "chocolate dark",
    "l'huile sans palme, dark  chocolate",
)


@pytest.mark.parametrize("intent", INTENTS)
def test_phrase_spans_equal_the_policies_own_highlights(
    engine: Engine, index_prefix: str, intent: str
) -> None:
    policy_set = small_set(12, pattern_every=5)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    policies = {p.id: p for p in policy_set.policies}
    cleaned = matcher.clean_intent(intent)
    found = matcher.match(engine, index, cleaned, policies, now=FIXED_NOW)
    filters = matcher.percolate_filters((), FIXED_NOW)
    own = matcher._highlighted(engine, index, cleaned, list(policy_set.policies), filters)
    assert sorted(p.id for p, _ in own) == [m.policy_id for m in found]
    expected = {p.id: matcher.spans_of(cleaned, ranges) for p, ranges in own}
    for m in found:
        if policies[m.policy_id].trigger.kind != "exact" and expected[m.policy_id]:
            assert m.spans == expected[m.policy_id], m.policy_id


def test_publish_batches_are_bounded_and_complete(engine: Engine, index_prefix: str) -> None:
    policy_set = small_set(23)
    phrases = len(list(matcher.phrase_documents(policy_set.policies)))
    progress: list[tuple[int, int]] = []
    sizes = [
        len(batch.payload.encode("utf-8"))
        for batch in policy_store.batches("x", _documents(policy_set), 5, 2500)
    ]
    assert sizes and all(size <= 2500 for size in sizes)
    with policy_store.reporting(lambda done, total: progress.append((done, total))):
        index = policy_store.write_index(
            engine, index_prefix, policy_set, batch_documents=5, batch_bytes=2500
        )
    total = len(policy_set.policies) + phrases
    assert len(progress) >= total // 5
    assert [t for _, t in progress] == [total] * len(progress)
    done = [d for d, _ in progress]
    steps = [b - a for a, b in zip([0, *done[:-1]], done, strict=True)]
    assert all(0 < step <= 5 for step in steps) and progress[-1][0] == total
    assert by_type(engine, index, "policy") == len(policy_set.policies)
    assert by_type(engine, index, "phrase") == phrases
    assert policy_store.read_index(engine, index).policy_set == policy_set


def _documents(policy_set: PolicySet) -> list[tuple[str, dict[str, Any]]]:
    return [(p.id, json.loads(p.model_dump_json())) for p in policy_set.policies]


def test_a_refused_batch_leaves_no_index_and_no_alias(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = small_set(20)
    monkeypatch.setattr(policy_store, "BATCH_DOCUMENTS", 5)
    calls: list[int] = []
    live = policy_store.alias_name(index_prefix, "live")
    name = policy_store.index_name(index_prefix, policy_set.version)

    def refuse_the_rest(done: int, total: int) -> None:  # the engine itself refuses the next batch
        calls.append(done)
        engine.request("PUT", f"/{name}/_settings", body={"index.blocks.write": True})

    with policy_store.reporting(refuse_the_rest), pytest.raises(EngineError):
        policy_store.publish(engine, index_prefix, policy_set, "live")
    assert calls == [5]  # the second batch was refused
    assert not engine.index_exists(name)
    assert engine.alias_targets(live) == []
    # and the next publish writes it whole
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    assert engine.alias_targets(live) == [index]
    assert by_type(engine, index, "policy") == len(policy_set.policies)


def test_an_index_published_before_phrase_documents_matches_the_same(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live index written by an earlier release (no ``phrase`` field in its mapping, no
    phrase documents) keeps serving after an upgrade: same matches, same spans."""
    policy_set = small_set(12, pattern_every=5)
    policies = {p.id: p for p in policy_set.policies}
    current = policy_store.publish(engine, index_prefix, policy_set, "live")
    mapping = json.loads(json.dumps(policy_store.policies_mapping()))
    del mapping["mappings"]["properties"]["phrase"]
    with monkeypatch.context() as patch:
        patch.setattr(policy_store, "policies_mapping", lambda *_analysis: mapping)
        patch.setattr(policy_store, "phrase_documents", lambda _policies: iter(()))
        old = policy_store.publish(engine, f"{index_prefix}-old", policy_set, "live")
    assert "phrase" not in engine.request("GET", f"/{old}/_mapping")[old]["mappings"]["properties"]
    assert by_type(engine, old, "phrase") == 0
    matched = 0
    for intent in INTENTS:
        cleaned = matcher.clean_intent(intent)
        expected = matcher.match(engine, current, cleaned, policies, now=FIXED_NOW)
        assert matcher.match(engine, old, cleaned, policies, now=FIXED_NOW) == expected, intent
        matched += len(expected)
    assert matched > len(INTENTS)  # the comparison is between real matches, not empty answers
