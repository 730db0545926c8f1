"""Publishing policy sets: one immutable index per version, behind atomically moved aliases."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from control_plane import matcher, policy_store
from control_plane.bootstrap import profile_of
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy, PolicySet
from control_plane.service import SearchService

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture(scope="module")
def first() -> PolicySet:
    return load_policy_set(POLICIES)


@pytest.fixture(scope="module")
def second(first: PolicySet) -> PolicySet:
    """The demo set with one more policy: a different version."""
    extra = Policy.model_validate({
        "id": "extra-clementines",
        "title": "clementines",
        "owner": "test",
        "trigger": {"phrase": ["clementines"]},
        "rules": [{"category": {"values": ["Clementines"]}}],
    })
    return build_policy_set([*first.policies, extra], first.vocabularies, first.governance)


def live(engine: Engine, prefix: str) -> list[str]:
    return engine.alias_targets(policy_store.alias_name(prefix, "live"))


def stored(policy_set: PolicySet) -> int:
    """Documents in a set's index: one per distinct trigger query, the layout marker, the
    set's own."""
    return len(list(matcher.index_documents(policy_set.policies, lambda _phrase: 1))) + 1


def count(engine: Engine, index: str) -> int:
    engine.refresh(index)
    result = engine.search(index, {"size": 0, "track_total_hits": True, "query": {"match_all": {}}})
    total: int = result["hits"]["total"]["value"]
    return total


def test_publish_is_idempotent(engine: Engine, index_prefix: str, first: PolicySet) -> None:
    index = policy_store.publish(engine, index_prefix, first, "live")
    assert index == policy_store.index_name(index_prefix, first.version)
    documents = count(engine, index)
    assert documents == stored(first)  # the triggers, the marker and the policy-set document
    again = policy_store.publish(engine, index_prefix, first, "live")
    assert again == index
    assert engine.list_indices(index_prefix + "*") == [index]
    assert live(engine, index_prefix) == [index]
    assert count(engine, index) == documents


def test_new_version_moves_the_alias_and_keeps_the_old_index(
    engine: Engine, index_prefix: str, first: PolicySet, second: PolicySet
) -> None:
    assert first.version != second.version
    old = policy_store.publish(engine, index_prefix, first, "live")
    new = policy_store.publish(engine, index_prefix, second, "live")
    assert new != old
    assert live(engine, index_prefix) == [new]
    assert engine.list_indices(index_prefix + "*") == sorted([old, new])
    assert count(engine, old) == stored(first)
    # Rollback: publishing the old set again reuses its index and moves the alias back.
    assert policy_store.publish(engine, index_prefix, first, "live") == old
    assert live(engine, index_prefix) == [old]
    assert engine.list_indices(index_prefix + "*") == sorted([old, new])


def test_environments_have_their_own_alias(
    engine: Engine, index_prefix: str, first: PolicySet, second: PolicySet
) -> None:
    old = policy_store.publish(engine, index_prefix, first, "live")
    new = policy_store.publish(engine, index_prefix, second, "staging")
    assert live(engine, index_prefix) == [old]
    assert engine.alias_targets(policy_store.alias_name(index_prefix, "staging")) == [new]


def test_alias_always_has_exactly_one_target_while_moving(
    engine: Engine, index_prefix: str, first: PolicySet, second: PolicySet
) -> None:
    indices = [policy_store.publish(engine, index_prefix, s, "live") for s in (first, second)]
    seen: list[list[str]] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            seen.append(live(engine, index_prefix))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for turn in range(20):
            policy_store.point_alias(
                engine, policy_store.alias_name(index_prefix, "live"), indices[turn % 2],
                expected=indices[(turn + 1) % 2],
            )
    finally:
        stop.set()
        watcher.join()
    assert seen and all(len(targets) == 1 and targets[0] in indices for targets in seen)


def test_index_is_read_only_after_publish(engine: Engine, index_prefix: str, first: PolicySet) -> None:
    index = policy_store.publish(engine, index_prefix, first, "live")
    settings = engine.request("GET", f"/{index}/_settings")
    assert settings[index]["settings"]["index"]["blocks"]["write"] == "true"
    with pytest.raises(EngineError):
        engine.index_document(index, "intruder", {"doc_type": "policy", "policy_id": "intruder"})
    with pytest.raises(EngineError):
        engine.request("DELETE", f"/{index}/_doc/{first.policies[0].id}")
    assert count(engine, index) == stored(first)


def test_resolve_returns_the_exact_set(
    engine: Engine, index_prefix: str, first: PolicySet, second: PolicySet
) -> None:
    assert policy_store.resolve(engine, index_prefix, "live") is None
    for policy_set in (first, second):
        index = policy_store.publish(engine, index_prefix, policy_set, "live")
        resolved = policy_store.resolve(engine, index_prefix, "live")
        assert resolved is not None and resolved.index == index
        assert resolved.policy_set.version == policy_set.version
        assert resolved.policy_set.model_dump_json() == policy_set.model_dump_json()
        assert resolved.policy_set == policy_set


def test_an_incomplete_index_is_rewritten(engine: Engine, index_prefix: str, first: PolicySet) -> None:
    """An index left without its policy-set document (an interrupted publish) is not served."""
    name = policy_store.index_name(index_prefix, first.version)
    engine.create_index(name, policy_store.policies_mapping())
    with pytest.raises(EngineError):
        policy_store.read_index(engine, name)
    assert policy_store.publish(engine, index_prefix, first, "live") == name
    resolved = policy_store.resolve(engine, index_prefix, "live")
    assert resolved is not None and resolved.policy_set == first
    assert count(engine, name) == stored(first)


def test_a_new_version_reuses_the_unchanged_policies_of_the_served_one(
    engine: Engine, index_prefix: str, first: PolicySet
) -> None:
    """The service loads a new version from the one it serves: unchanged policies are the
    served objects, a changed one (same id) is the new content, validated."""
    changed = first.policies[0]
    edited = changed.model_copy(update={"priority": changed.priority + 1})
    second = build_policy_set([edited, *first.policies[1:]], first.vocabularies, first.governance)
    settings = Settings()
    settings = settings.model_copy(update={  # re-read on the move only, not on an interval
        "policies": settings.policies.model_copy(update={"index_prefix": index_prefix}),
        "search": settings.search.model_copy(update={"alias_watch_interval_s": 3600.0}),
    })
    service = SearchService(settings, engine, profile_of(settings))
    try:
        policy_store.publish(engine, index_prefix, first, "live")
        served, _ = service.snapshot()
        assert served.reused == 0 and served.policy_set == first
        new_index = policy_store.publish(engine, index_prefix, second, "live")
        assert service.snapshot()[0] is served  # not re-read yet: the served version goes on
        service.alias_moved("live")
        loaded, by_id = service.snapshot()
    finally:
        service.close()
    assert loaded.index == new_index and loaded.policy_set == second
    assert loaded.reused == len(first.policies) - 1
    assert by_id[changed.id].priority == changed.priority + 1
    previous = served.policy_set.lookups().by_id
    assert by_id[changed.id] is not previous[changed.id]
    assert all(by_id[p.id] is previous[p.id] for p in first.policies[1:])
    # loaded alone (no served version), the same index gives an equal set, all validated
    alone = policy_store.read_index(engine, new_index)
    assert alone.reused == 0 and alone.policy_set == loaded.policy_set


def test_token_counts_in_batches_equal_one_analysis_per_phrase(engine: Engine, index_prefix: str) -> None:
    """Exact triggers compare the intent's token count with their phrase's: counted in
    batches, each phrase gets what analysing it alone gives (stop words, elision, accents,
    characters outside the BMP, punctuation only, repeats), across batch boundaries."""
    name = f"{index_prefix}-analysis"
    analysis = policy_store.default_analysis()
    engine.create_index(name, policy_store.policies_mapping(analysis))
    phrases = [
        "dark chocolate", "l'huile d'olive", "the of", "Ça été", "oranges", "🍫 chocolate bar",
        "a b c d e f", "!!!", "pas cher", "x", "coffee creamer free of milk", "oranges",
        *(f"word{n} and more{n}" for n in range(30)),
    ]
    alone = {p: len(engine.analyze(name, analysis.analyzer, p)) for p in phrases}
    assert len(set(alone.values())) >= 4  # the phrases do differ in count
    for batch, chars in ((500, 4000), (7, 60), (1, 4000)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(policy_store, "ANALYZE_BATCH", batch)
            patch.setattr(policy_store, "ANALYZE_CHARS", chars)
            assert policy_store.token_counts(engine, name, analysis.analyzer, phrases) == alone
