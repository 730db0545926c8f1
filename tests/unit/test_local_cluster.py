"""The pieces of the local cluster that need no engine: the state file of several nodes,
and the replica count an index gets on one node or several."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from control_plane import local_engine
from control_plane.engine.base import with_replicas


def test_a_cluster_state_round_trips_with_every_member(tmp_path: Path) -> None:
    members = tuple(
        local_engine.NodeState(100 + i, 9300 + i, f"http://127.0.0.1:{9300 + i}", f"/n{i}.out", "c")
        for i in range(3)
    )
    first = members[0]
    state = local_engine.NodeState(first.pid, first.port, first.url, first.log, "c", members)
    (tmp_path / "engine.json").write_text(json.dumps(state.to_json()))
    read = local_engine.read_state(tmp_path)
    assert read == state and [node.pid for node in read.nodes] == [100, 101, 102]


def test_a_single_node_state_is_its_own_only_node(tmp_path: Path) -> None:
    (tmp_path / "engine.json").write_text(json.dumps({"pid": 7, "port": 9200, "url": "u", "log": "l"}))
    read = local_engine.read_state(tmp_path)
    assert read is not None and read.nodes == (read,) and read.cluster == "govsearch-local"


def test_a_corrupt_state_file_reads_as_none(tmp_path: Path) -> None:
    (tmp_path / "engine.json").write_text('{"pid": 1, "members": [3]}')
    assert local_engine.read_state(tmp_path) is None


def test_zero_nodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(local_engine.LocalEngineError, match="at least 1"):
        local_engine.start(port=1, data_dir=tmp_path, nodes=0)


@pytest.mark.parametrize(
    ("settings", "nodes", "replicas"),
    [
        ({"number_of_shards": 1, "number_of_replicas": 0}, 1, 0),
        ({"number_of_shards": 1, "number_of_replicas": 0}, 3, 1),
        ({"index.number_of_replicas": 0}, 2, 1),
        ({"index": {"number_of_replicas": 0, "refresh_interval": "1s"}}, 3, 1),
        ({"number_of_replicas": 2}, 3, 2),
        ({}, 1, 0),
        ({}, 3, 1),
    ],
)
def test_an_index_gets_one_replica_on_a_cluster(
    settings: dict[str, object], nodes: int, replicas: int
) -> None:
    body = with_replicas({"settings": settings, "mappings": {"properties": {}}}, nodes)
    assert body["settings"]["number_of_replicas"] == replicas
    assert "index.number_of_replicas" not in body["settings"]
    assert "number_of_replicas" not in body["settings"].get("index", {})
    assert body["mappings"] == {"properties": {}}
