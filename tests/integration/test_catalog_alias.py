"""The catalog alias moves by compare-and-swap too: a load moves it from the index it was on
when the load started, and a catalog alias on two indices is refused (503
``catalog_ambiguous``), never read from the first one."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from control_plane.bootstrap import profile_of
from control_plane.catalog.profile import CatalogProfile
from control_plane.catalog_loader import CatalogLoadError, load_catalog
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.policy_store import AmbiguousAlias
from control_plane.service import Catalog

CATALOG = Path(__file__).resolve().parents[2] / "data" / "catalog.ndjson"


@pytest.fixture()
def profile(index_prefix: str) -> CatalogProfile:
    return profile_of(Settings()).model_copy(update={"alias": f"{index_prefix}-catalog"})


def catalog_file(tmp_path: Path, name: str, start: int) -> Path:
    lines = CATALOG.read_text(encoding="utf-8").splitlines()[start : start + 40]
    path = tmp_path / f"{name}.ndjson"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_loads_move_the_alias_from_where_it_was(
    engine: Engine, profile: CatalogProfile, tmp_path: Path
) -> None:
    first = load_catalog(engine, profile, catalog_file(tmp_path, "first", 0))
    assert engine.alias_targets(profile.alias) == [first.index]
    second = load_catalog(engine, profile, catalog_file(tmp_path, "second", 40))
    assert engine.alias_targets(profile.alias) == [second.index] != [first.index]
    again = load_catalog(engine, profile, catalog_file(tmp_path, "first", 0))
    assert again.reused and engine.alias_targets(profile.alias) == [first.index]


def test_concurrent_loads_leave_one_index_and_say_who_lost(
    engine: Engine, profile: CatalogProfile, tmp_path: Path
) -> None:
    load_catalog(engine, profile, catalog_file(tmp_path, "base", 0))
    files = [catalog_file(tmp_path, f"load{n}", 40 * (n + 1)) for n in range(3)]
    barrier = threading.Barrier(len(files))
    outcomes: list[str] = []

    def load(path: Path) -> None:
        barrier.wait()
        try:
            outcomes.append(load_catalog(engine, profile, path).index)
        except CatalogLoadError as error:
            outcomes.append(error.problems[0])

    threads = [threading.Thread(target=load, args=(path,)) for path in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    targets = engine.alias_targets(profile.alias)
    assert len(targets) == 1
    lost = [o for o in outcomes if o.startswith("concurrent_change")]
    won = [o for o in outcomes if not o.startswith("concurrent_change")]
    assert len(lost) + len(won) == len(files) and won
    assert targets[0] in won  # the alias is where a load that succeeded put it
    for message in lost:
        assert targets[0] in message or any(w in message for w in won), message


def test_a_catalog_alias_on_two_indices_is_refused(
    engine: Engine, profile: CatalogProfile, tmp_path: Path
) -> None:
    first = load_catalog(engine, profile, catalog_file(tmp_path, "first", 0))
    second = load_catalog(engine, profile, catalog_file(tmp_path, "second", 40))
    engine.update_aliases([{"add": {"index": first.index, "alias": profile.alias}}])
    assert engine.alias_targets(profile.alias) == sorted([first.index, second.index])
    with pytest.raises(AmbiguousAlias) as refused:
        Catalog(engine, profile).stats()
    assert refused.value.code == "catalog_ambiguous"
    with pytest.raises(AmbiguousAlias):
        load_catalog(engine, profile, catalog_file(tmp_path, "third", 80))
