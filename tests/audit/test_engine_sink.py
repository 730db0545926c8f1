"""``audit.sink: engine``: records written through the engine index chain and verify, a
tampered document is found at that record, and ``govsearch audit verify --engine``, ``show``
and ``replay`` read the index. Real engine; the CLI is configured with a file in ``tmp_path``."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from agent_gateway.gateway import AgentGateway
from control_plane.api import create_app
from control_plane.audit.chain import record_hash
from control_plane.audit.checkpoints import EngineCheckpoints
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import EngineSink
from control_plane.audit.verify import verify_lines
from control_plane.bootstrap import Ready, profile_of
from control_plane.cli import main
from control_plane.cli_support import EXIT_AUDIT_BROKEN
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.service import SearchService
from tests.audit.conftest import write_keys
from tests.clocks import FIXED_CLOCK


@dataclass
class EngineAudit:
    client: TestClient
    sink: EngineSink
    config: Path
    recorder: Recorder

    def records(self) -> list[dict[str, Any]]:
        return list(self.sink.scan())

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
        code = main(["--config", str(self.config), "audit", *argv])
        return code, capsys.readouterr().out


@pytest.fixture()
def engine_audit(
    tmp_path: Path, engine: Engine, engine_url: str, settings: Settings, ready: Ready
) -> Iterator[EngineAudit]:
    index = f"gstest-audit-{uuid.uuid4().hex[:10]}"
    sink = EngineSink(engine, index)
    events = EngineSink(engine, index + "-events")
    key_file, keys = write_keys(tmp_path)
    checkpoints = EngineCheckpoints(engine, index + "-checkpoints")
    recorder = Recorder(
        sink, events, instance_id="engine-writer", keys=keys, checkpoints=checkpoints, clock=FIXED_CLOCK
    )
    service = SearchService(settings, engine, profile_of(settings), recorder=recorder)
    app = create_app(service, clock=FIXED_CLOCK)
    app.state.agent_gateway = AgentGateway(service, clock=FIXED_CLOCK)  # rules extraction
    config = tmp_path / "govsearch.yaml"
    config.write_text(yaml.safe_dump({
        "engine": {"url": engine_url, "timeout_s": 30},
        "audit": {"sink": "engine", "index": index, "instance_id": "cli-reader", "key_file": str(key_file)},
    }))
    client = TestClient(app, raise_server_exceptions=False)
    try:
        yield EngineAudit(client, sink, config, recorder)
    finally:
        client.close()
        service.close()
        for name in (index, index + "-events", index + "-checkpoints"):
            if engine.index_exists(name):
                engine.delete_index(name)


def _search(audit: EngineAudit, intent: str) -> str:
    response = audit.client.post("/v1/search", json={"intent": intent})
    assert response.status_code == 200, response.text
    return str(response.json()["request_id"])


def _agent(audit: EngineAudit, message: str) -> str:
    response = audit.client.post("/v1/agent/query", json={"message": message})
    assert response.status_code == 200, response.text
    return str(response.json()["request_id"])


def _fill(audit: EngineAudit) -> list[str]:
    """Five requests, five records: searches, an agent query, an abstention and a refusal."""
    ids = [_search(audit, "cheap chocolate"), _agent(audit, "Hi, I'm looking for oranges please")]
    ids.append(_agent(audit, "Hello, thank you!"))  # abstained: nothing to search for
    refused = audit.client.post("/v1/search", json={"intent": ""})
    assert refused.status_code == 422
    ids.append(refused.json()["error"]["request_id"])
    ids.append(_search(audit, "chocolate without peanuts"))
    return ids


def test_engine_sink_records_chain_and_verify(
    engine_audit: EngineAudit, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _fill(engine_audit)
    records = engine_audit.records()
    assert [r["request_id"] for r in records] == ids
    assert [r["sequence"] for r in records] == [0, 1, 2, 3, 4]
    assert [r["endpoint"] for r in records] == ["search", "agent", "agent", "search", "search"]
    assert all(record_hash(r) == r["hash"] for r in records)
    assert all(after["prev_hash"] == before["hash"] for before, after in itertools.pairwise(records))

    engine_audit.recorder.close()  # the shutdown checkpoint, into <index>-checkpoints
    code, out = engine_audit.cli(capsys, "verify")  # audit.sink: engine in the configuration
    assert code == 0 and out.startswith(f"OK: 5 records in {engine_audit.sink.describe()}")
    assert f"head engine-writer: sequence 4 hash {records[-1]['hash']}" in out
    code, out = engine_audit.cli(capsys, "verify", "--engine", "--index", engine_audit.sink.index, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and report["records"] == 5

    missing = main(["--config", str(engine_audit.config), "audit", "verify", "--engine", "--index",
                    "gstest-audit-none"])
    assert missing == 1  # no such index: an error, not "OK: 0 records"


def test_a_tampered_engine_record_is_found_at_that_record(
    engine_audit: EngineAudit, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = _fill(engine_audit)
    engine_audit.recorder.close()
    index = engine_audit.sink.index
    doc_id = "engine-writer:2"
    stored = engine.get_document(index, doc_id)
    assert stored is not None
    original = stored["_source"]
    assert original["request_id"] == ids[2]
    tampered = {**original, "status": "ok"}  # an abstention rewritten as served
    engine.index_document(index, doc_id, tampered, refresh=True)

    report = verify_lines((n, json.dumps(r)) for n, r in enumerate(engine_audit.records(), start=1))
    assert report.broken is not None
    assert (report.broken.line, report.broken.request_id, report.broken.problem) == (3, ids[2], "edited")
    assert report.records == 2
    code, out = engine_audit.cli(capsys, "verify")
    assert code == EXIT_AUDIT_BROKEN
    assert f"BROKEN at record 3 (request {ids[2]}, writer engine-writer): edited" in out

    engine.index_document(index, doc_id, original, refresh=True)  # put back: the chain holds again
    assert engine_audit.cli(capsys, "verify")[0] == 0
    engine.request("DELETE", f"/{index}/_doc/engine-writer%3A1", params={"refresh": "true"})
    code, out = engine_audit.cli(capsys, "verify", "--engine", "--index", index)
    assert code == EXIT_AUDIT_BROKEN and f"BROKEN at record 2 (request {ids[2]}" in out and "deleted" in out


def test_cli_show_and_replay_read_the_engine_sink(
    engine_audit: EngineAudit, capsys: pytest.CaptureFixture[str]
) -> None:
    search_id = _search(engine_audit, "cheap chocolate")
    agent_id = _agent(engine_audit, "Bonjour, je cherche du chocolat pas cher")

    code, out = engine_audit.cli(capsys, "show", search_id)
    shown = json.loads(out)
    assert code == 0 and shown == engine_audit.records()[0]
    code, out = engine_audit.cli(capsys, "show", agent_id)
    shown = json.loads(out)
    assert code == 0 and (shown["endpoint"], shown["intent"]) == ("agent", "chocolat pas cher")
    assert main(["--config", str(engine_audit.config), "audit", "show", "no-such-request"]) == 1

    for request_id in (search_id, agent_id):  # an agent record replays like a search record
        code, out = engine_audit.cli(capsys, "replay", request_id, "--json")
        result = json.loads(out)
        assert code == 0 and result["request_id"] == request_id
        assert result["original"]["reproduced"] is True and result["identical"] is True
        assert result["original"]["policy_set_version"] == result["replayed"]["policy_set_version"]
    code, out = engine_audit.cli(capsys, "replay", search_id)
    assert code == 0 and "(reproduced: True)" in out and "identical plans" in out


def test_a_cut_engine_tail_is_found_against_the_checkpoint_index(
    engine_audit: EngineAudit, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill(engine_audit)
    engine_audit.recorder.close()
    index = engine_audit.sink.index
    checkpoints = list(EngineCheckpoints(engine, index + "-checkpoints").scan())
    assert [(c["log"], c["sequence"], c["reason"]) for c in checkpoints] == [("decisions", 4, "shutdown")]
    engine.request("DELETE", f"/{index}/_doc/engine-writer%3A4", params={"refresh": "true"})
    code, out = engine_audit.cli(capsys, "verify")
    assert code == EXIT_AUDIT_BROKEN
    assert "BROKEN: truncated: writer engine-writer: checkpoint at seq 4 but the log ends at seq 3" in out
