"""Percolation and publishing at scale, on the real engine, made small.

- One document per distinct trigger query: policies sharing a phrase or a cue share one
  percolator document and are all matched, each with the spans (and captures) of its
  own phrases; the index holds no per-policy document.
- Paging: an index whose ``index.max_result_window`` is lowered below both the number of
  trigger documents and the number of policies an intent matches (and a page smaller than
  the window): every match is found. The same request without paging is refused by the
  engine, so the test would fail if ``match`` asked for everything in one page. And one
  word triggering more policies than the default window (10,000) returns them all.
- Filters moved from the engine to memory (enabled, cohorts, active window) and spans from
  trigger documents give exactly what the earlier layouts give: an index written the way
  earlier releases wrote it (one percolator document per policy, with or without phrase
  documents, their mapping without the newer fields) is still served, with the same
  matches, spans and captures, and its policies' own highlighted queries agree too.
- Batches: bounded in documents and bytes, every document present after; a batch the
  engine refuses mid-publish leaves no index and no alias.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from control_plane import matcher, policy_store
from control_plane.engine import Engine, EngineError
from control_plane.loader import build_policy_set
from control_plane.policy import Governance, Policy, PolicySet
from tests.clocks import FIXED_NOW

GOVERNANCE = Governance(filterable_fields=("brand",), boostable_fields=("brand",))


def small_set(count: int, *, pattern_every: int = 0, mixed: bool = False) -> PolicySet:
    """``count`` policies on "dark chocolate" or ``bar<n>``; every ``pattern_every``-th a
    ``(without|sans) {item}`` pattern; ``mixed``: also cohorts, windows, disabled, exact,
    any and always triggers (what the engine used to filter)."""
    policies = []
    for number in range(count):
        trigger: dict[str, Any] = {"phrase": ["dark chocolate", f"bar{number}"]}
        rules: list[dict[str, Any]] = [{"boost": {"field": "brand", "values": [f"b{number}"], "weight": 1.5}}]
        extra: dict[str, Any] = {}
        if pattern_every and number % pattern_every == 0:
            trigger = {"pattern": ["(without|sans) {item}"], "consume": True}
            rules = [{"filter": {"field": "brand", "values": ["{item}"]}}]
        elif mixed:
            trigger = [
                trigger,
                {"exact": ["dark chocolate", "bar1"]},
                {"any": ["chocolate", f"bar{number}"], "consume": True},
                {"always": True},
            ][number % 4]
        if mixed:
            extra = [
                {},
                {"cohorts": ["vegan"]},
                {"active": {"from": (FIXED_NOW - timedelta(days=1)).isoformat()}},
                {"active": {"until": (FIXED_NOW - timedelta(hours=1)).isoformat()}},
                {"enabled": False},
                {"cohorts": ["gold", "vegan"], "active": {"from": FIXED_NOW.isoformat()}},
            ][number % 6]
        policies.append(Policy.model_validate({
            "id": f"p-{number:03d}",
            "title": f"policy {number}",
            "owner": "test",
            "trigger": trigger,
            "rules": rules,
            **extra,
        }))
    return build_policy_set(policies, (), GOVERNANCE)


def by_type(engine: Engine, index: str, doc_type: str) -> int:
    engine.refresh(index)
    body = {"size": 0, "track_total_hits": True, "query": {"term": {"doc_type": doc_type}}}
    total: int = engine.search(index, body)["hits"]["total"]["value"]
    return total


def publish_legacy(
    engine: Engine, prefix: str, policy_set: PolicySet, monkeypatch: pytest.MonkeyPatch, *, phrases: bool
) -> str:
    """The set's index as earlier releases wrote it: one percolator document per policy and
    (``phrases``) one per distinct phrase, in a mapping without the fields added since."""
    mapping = json.loads(json.dumps(policy_store.policies_mapping()))
    del mapping["mappings"]["properties"]["trigger"]
    del mapping["mappings"]["properties"]["intent"]["index_options"]  # offsets since ADR 0037
    if not phrases:
        del mapping["mappings"]["properties"]["phrase"]

    def documents(
        policies: Iterable[Policy], count_tokens: matcher.TokenCounter
    ) -> Iterator[tuple[str, Any]]:
        for policy in policies:
            yield policy.id, matcher.percolator_document(policy, policy_set.version, count_tokens)
        if phrases:
            yield from matcher.phrase_documents(policies)

    with monkeypatch.context() as patch:
        patch.setattr(policy_store, "policies_mapping", lambda *_analysis: mapping)
        patch.setattr(policy_store, "index_documents", documents)
        return policy_store.publish(engine, f"{prefix}-{'phrases' if phrases else 'old'}", policy_set, "live")


def test_policies_sharing_a_trigger_share_its_document_and_all_match(
    engine: Engine, index_prefix: str
) -> None:
    boost = [{"boost": {"field": "brand", "values": ["a"], "weight": 2}}]
    capture = [{"filter": {"field": "brand", "values": ["{item}"]}}]
    triggers = [
        ({"phrase": ["dark chocolate"]}, boost),
        ({"any": ["dark chocolate"], "consume": True}, boost),
        ({"pattern": ["(sans|without) {item}"], "consume": True}, capture),
        ({"pattern": ["(without|sans) {item}"], "consume": True}, capture),
    ]
    policies = [
        Policy.model_validate({"id": f"share-{n}", "title": "t", "owner": "o", "trigger": t, "rules": r})
        for n, (t, r) in enumerate(triggers)
    ]
    policy_set = build_policy_set(policies, (), GOVERNANCE)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    # "dark chocolate", "sans", "without" and the layout marker; no policy documents
    assert by_type(engine, index, matcher.TRIGGER_DOC) == 3
    assert by_type(engine, index, "policy") == 0
    intent = "Fine dark  chocolates sans noisette"
    cleaned = matcher.clean_intent(intent)
    by_id = policy_store.read_index(engine, index).policy_set.lookups().by_id
    found = matcher.match(engine, index, cleaned, by_id, now=FIXED_NOW)
    assert [m.policy_id for m in found] == ["share-0", "share-1", "share-2", "share-3"]
    for m in found[:2]:
        assert [(s.start, s.end, s.text) for s in m.spans] == [(5, 20, "dark chocolates")]
        assert m.captures == ()
    for m in found[2:]:
        assert [(s.start, s.end, s.text) for s in m.spans] == [(21, 25, "sans")]
        assert [(c.name, c.text, c.span.start) for c in m.captures] == [("item", "noisette", 26)]


def test_matches_beyond_the_result_window_are_all_found(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = small_set(37, pattern_every=9)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    engine.request("PUT", f"/{index}/_settings", body={"index.max_result_window": 3})
    policies = {p.id: p for p in policy_set.policies}
    intent = "dark chocolate bar1 bar2 bar3 bar4 sans noisette"
    with pytest.raises(EngineError, match=r"(?i)result window"):  # one page of everything is refused
        engine.percolate(index, {"intent": intent}, size=10, source=False)
    monkeypatch.setattr(matcher, "PAGE", 2)

    found = matcher.match(engine, index, intent, policies, now=FIXED_NOW)

    assert [m.policy_id for m in found] == sorted(policies)
    for m in found:
        number = int(m.policy_id[2:])
        if policies[m.policy_id].trigger.kind == "pattern":
            assert [s.text for s in m.spans] == ["sans"]
            assert [c.text for c in m.captures] == ["noisette"]
        else:  # adjacent highlighted words merge: "dark chocolate" and "bar1" are one span
            expected = ["dark chocolate bar1"] if number == 1 else ["dark chocolate"]
            if 2 <= number <= 4:
                expected.append(f"bar{number}")
            assert [s.text for s in m.spans] == expected, m.policy_id


def test_one_word_triggering_more_policies_than_the_default_window(
    engine: Engine, index_prefix: str
) -> None:
    count = 10_050  # index.max_result_window defaults to 10,000
    template = Policy.model_validate({
        "id": "w-template",
        "title": "t",
        "owner": "o",
        "trigger": {"any": ["truffle"]},
        "rules": [{"boost": {"field": "brand", "values": ["b"], "weight": 1.5}}],
    })
    policies = [template.model_copy(update={"id": f"w-{n:05d}"}) for n in range(count)]
    policy_set = build_policy_set(policies, (), GOVERNANCE)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    by_id = policy_store.read_index(engine, index).policy_set.lookups().by_id

    found = matcher.match(engine, index, "white truffle oil", by_id, now=FIXED_NOW)

    assert len(found) == count and len({m.policy_id for m in found}) == count
    assert {tuple(s.text for s in m.spans) for m in found} == {("truffle",)}


INTENTS = (
    "dark chocolate",
    "Dark Chocolates bar3 without milk",
    "bar1 bar2 and dark chocolate sans lait",
    "chocolate dark",
    "l'huile sans palme, dark  chocolate",
    "bar1",
)


def test_earlier_layouts_are_served_with_the_same_matches(
    engine: Engine, index_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Indices written by earlier releases keep serving after an upgrade (same matches,
    spans, captures), and the filters now applied in memory (enabled, cohorts, window)
    agree with the engine's, which the earlier layouts still use."""
    policy_set = small_set(48, pattern_every=7, mixed=True)
    policies = {p.id: p for p in policy_set.policies}
    current = policy_store.publish(engine, index_prefix, policy_set, "live")
    with_phrases = publish_legacy(engine, index_prefix, policy_set, monkeypatch, phrases=True)
    oldest = publish_legacy(engine, index_prefix, policy_set, monkeypatch, phrases=False)
    assert "phrase" not in engine.request("GET", f"/{oldest}/_mapping")[oldest]["mappings"]["properties"]
    assert by_type(engine, oldest, "phrase") == 0 and by_type(engine, with_phrases, "phrase") > 0
    assert by_type(engine, oldest, "policy") == len(policies)
    matched: set[str] = set()
    for intent in INTENTS:
        cleaned = matcher.clean_intent(intent)
        for cohorts in ((), ("vegan",), ("gold",)):
            for now in (FIXED_NOW, FIXED_NOW - timedelta(days=2)):
                expected = matcher.match(engine, current, cleaned, policies, cohorts=cohorts, now=now)
                for old in (with_phrases, oldest):
                    served = matcher.match(engine, old, cleaned, policies, cohorts=cohorts, now=now)
                    assert served == expected, (intent, cohorts, now, old)
                matched |= {m.policy_id for m in expected}
    kinds = {policies[i].trigger.kind for i in matched}
    assert kinds == {"phrase", "any", "exact", "pattern", "always"}  # every kind compared, for real
    assert {i for i in policies if not policies[i].enabled} & matched == set()


@pytest.mark.parametrize("intent", INTENTS)
def test_trigger_spans_equal_the_policies_own_highlights(
    engine: Engine, index_prefix: str, intent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy_set = small_set(12, pattern_every=5)
    index = policy_store.publish(engine, index_prefix, policy_set, "live")
    oldest = publish_legacy(engine, index_prefix, policy_set, monkeypatch, phrases=False)
    policies = {p.id: p for p in policy_set.policies}
    cleaned = matcher.clean_intent(intent)
    found = matcher.match(engine, index, cleaned, policies, now=FIXED_NOW)
    filters = matcher.percolate_filters((), FIXED_NOW)
    own = matcher._highlighted(engine, oldest, cleaned, list(policy_set.policies), filters)
    assert sorted(p.id for p, _ in own) == [m.policy_id for m in found]
    expected = {p.id: matcher.spans_of(cleaned, ranges) for p, ranges in own}
    for m in found:
        if policies[m.policy_id].trigger.kind != "exact" and expected[m.policy_id]:
            assert m.spans == expected[m.policy_id], m.policy_id


def test_publish_batches_are_bounded_and_complete(engine: Engine, index_prefix: str) -> None:
    policy_set = small_set(23, pattern_every=4)
    triggers = len(list(matcher.index_documents(policy_set.policies, lambda _phrase: 1)))
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
    total = triggers
    assert len(progress) >= total // 5
    assert [t for _, t in progress] == [total] * len(progress)
    done = [d for d, _ in progress]
    steps = [b - a for a, b in zip([0, *done[:-1]], done, strict=True)]
    assert all(0 < step <= 5 for step in steps) and progress[-1][0] == total
    # "dark chocolate", bar<n> of the 17 phrase policies, the two cues; and the marker
    assert by_type(engine, index, matcher.TRIGGER_DOC) == 1 + 17 + 2
    assert by_type(engine, index, "layout") == 1
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
    assert by_type(engine, index, matcher.TRIGGER_DOC) == 1 + 20
