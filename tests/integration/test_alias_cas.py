"""Alias moves are compare-and-swap on the real engine: a move names the index it expects
to replace, the loser of a race changes nothing, and the alias never points at two
indices. An alias found on several indices is refused, never resolved to one of them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from control_plane import policy_store
from control_plane.engine import Engine
from control_plane.policy_store import AliasMoved, AmbiguousAlias, point_alias

POLICIES = Path(__file__).resolve().parents[2] / "policies"


@pytest.fixture()
def indices(engine: Engine, index_prefix: str) -> list[str]:
    names = [f"{index_prefix}-v{n}" for n in range(4)]
    for name in names:
        engine.create_index(name, {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    return names


def race(movers: list[tuple[str, str | None]], alias: str, engine: Engine) -> list[str]:
    """Run every (index, expected) move at once; the outcomes, in mover order."""
    barrier = threading.Barrier(len(movers))
    outcomes = ["?"] * len(movers)

    def move(n: int, index: str, expected: str | None) -> None:
        barrier.wait()
        try:
            point_alias(engine, alias, index, expected=expected)
            outcomes[n] = "moved"
        except AliasMoved:
            outcomes[n] = "lost"

    threads = [threading.Thread(target=move, args=(n, *m)) for n, m in enumerate(movers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_a_stale_expectation_changes_nothing(engine: Engine, index_prefix: str, indices: list[str]) -> None:
    alias = f"{index_prefix}-live"
    point_alias(engine, alias, indices[0], expected=None)
    point_alias(engine, alias, indices[1], expected=indices[0])
    with pytest.raises(AliasMoved) as lost:
        point_alias(engine, alias, indices[2], expected=indices[0])
    assert lost.value.current == [indices[1]]
    assert engine.alias_targets(alias) == [indices[1]]
    with pytest.raises(AliasMoved):  # a first move when the alias exists
        point_alias(engine, alias, indices[2], expected=None)
    assert engine.alias_targets(alias) == [indices[1]]
    point_alias(engine, alias, indices[1], expected=indices[1])  # re-pointing in place holds
    assert engine.alias_targets(alias) == [indices[1]]
    assert not engine.index_exists(alias) or engine.alias_targets(alias)  # no placeholder left


def test_of_concurrent_first_moves_exactly_one_wins(
    engine: Engine, index_prefix: str, indices: list[str]
) -> None:
    for trial in range(5):
        alias = f"{index_prefix}-first{trial}"
        outcomes = race([(index, None) for index in indices], alias, engine)
        assert sorted(outcomes) == ["lost", "lost", "lost", "moved"], outcomes
        assert engine.alias_targets(alias) == [indices[outcomes.index("moved")]]


def test_of_concurrent_moves_from_one_index_exactly_one_wins(
    engine: Engine, index_prefix: str, indices: list[str]
) -> None:
    alias = f"{index_prefix}-live"
    point_alias(engine, alias, indices[0], expected=None)
    current = indices[0]
    for _ in range(5):
        others = [i for i in indices if i != current]
        outcomes = race([(index, current) for index in others], alias, engine)
        assert sorted(outcomes) == ["lost", "lost", "moved"], outcomes
        current = others[outcomes.index("moved")]
        assert engine.alias_targets(alias) == [current]


def test_an_alias_on_two_indices_is_refused(engine: Engine, index_prefix: str, indices: list[str]) -> None:
    alias = policy_store.alias_name(index_prefix, "live")
    engine.update_aliases([{"add": {"index": i, "alias": alias}} for i in indices[:2]])
    with pytest.raises(AmbiguousAlias) as refused:
        policy_store.resolve(engine, index_prefix, "live")
    assert refused.value.code == "policy_set_ambiguous"
    assert refused.value.targets == indices[:2]
    with pytest.raises(AliasMoved):
        point_alias(engine, alias, indices[2], expected=indices[3])
    assert engine.alias_targets(alias) == indices[:2]
    # An operator's explicit move from one of them leaves exactly one target.
    point_alias(engine, alias, indices[2], expected=indices[0])
    assert engine.alias_targets(alias) == [indices[2]]
