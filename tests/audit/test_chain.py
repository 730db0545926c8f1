"""The chain and ``verify``, without an engine: records are failures written directly."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from control_plane.audit.chain import GENESIS, record_hash
from control_plane.audit.record import ErrorOut, redact
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.audit.writer import AuditBacklog
from control_plane.cli import main
from control_plane.cli_support import EXIT_AUDIT_BROKEN, EXIT_AUDIT_INCOMPLETE, EXIT_FINDINGS, EXIT_OK
from tests.audit.conftest import jsonl_recorder


def _write(tmp_path: Path, count: int = 5) -> Path:
    recorder = jsonl_recorder(tmp_path)
    for n in range(count):
        recorder.failure(f"req-{n}", ErrorOut(code="engine_unavailable", message="down", status=503))
    recorder.close()  # its shutdown checkpoint
    return tmp_path / "decisions.jsonl"


def _verify(path: Path):  # type: ignore[no-untyped-def]
    return verify_lines(JsonlSink(path).lines())


def test_records_are_chained(tmp_path: Path) -> None:
    path = _write(tmp_path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["sequence"] for r in records] == [0, 1, 2, 3, 4]
    assert records[0]["prev_hash"] == GENESIS
    for before, after in itertools.pairwise(records):
        assert after["prev_hash"] == before["hash"]
    assert all(record_hash(r) == r["hash"] for r in records)
    assert all(r["schema_version"] == 1 and r["writer"] == "test-writer" for r in records)
    report = _verify(path)
    assert report.ok and report.records == 5
    assert report.heads["test-writer"] == (4, records[-1]["hash"])


def test_a_new_recorder_continues_the_chain(tmp_path: Path) -> None:
    _write(tmp_path, 2)
    path = _write(tmp_path, 2)
    assert [json.loads(x)["sequence"] for x in path.read_text().splitlines()] == [0, 1, 2, 3]
    assert _verify(path).ok


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_an_edited_record_is_found(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = _lines(path)
    lines[2] = lines[2].replace('"engine_unavailable"', '"engine_timeout"')
    path.write_text("".join(lines))
    broken = _verify(path).broken
    assert broken is not None
    assert (broken.line, broken.request_id, broken.problem) == (3, "req-2", "edited")


def test_a_deleted_record_is_found(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = _lines(path)
    del lines[1]
    path.write_text("".join(lines))
    broken = _verify(path).broken
    assert broken is not None
    assert (broken.line, broken.request_id, broken.problem) == (2, "req-2", "deleted")
    assert "1 missing" in broken.detail


def test_reordered_records_are_found(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = _lines(path)
    lines[2], lines[3] = lines[3], lines[2]
    path.write_text("".join(lines))
    broken = _verify(path).broken
    assert broken is not None
    assert (broken.line, broken.request_id, broken.problem) == (3, "req-3", "reordered")


def test_a_forged_record_with_its_own_hash_is_found(tmp_path: Path) -> None:
    path = _write(tmp_path)
    lines = _lines(path)
    forged = json.loads(lines[2])
    forged["prev_hash"] = "f" * 64
    forged["hash"] = record_hash(forged)
    lines[2] = json.dumps(forged) + "\n"
    path.write_text("".join(lines))
    broken = _verify(path).broken
    assert broken is not None and broken.problem == "relinked" and broken.line == 3


def test_verify_reports_its_missing_files_as_findings_not_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/cli.md's exception to "a path named on the command line that does not exist exits
    2": verify's files are the evidence, and a missing one may be a deleted one."""
    path = _write(tmp_path)
    files = ["--sink", str(path), "--key-file", str(tmp_path / "audit.key"),
             "--checkpoints", str(tmp_path / "checkpoints.jsonl")]
    assert main(["audit", "verify", *files]) == EXIT_OK  # all there: every record vouched for
    capsys.readouterr()
    gone = str(tmp_path / "gone")
    for option, status, line in (
        ("--sink", EXIT_FINDINGS, f"govsearch: error: no audit log at {gone}\n"),
        ("--key-file", EXIT_FINDINGS, f"govsearch: error: cannot read audit key file {gone}: "),
        ("--checkpoints", EXIT_AUDIT_INCOMPLETE, ""),
    ):
        argv = [*files]
        argv[argv.index(option) + 1] = gone
        assert main(["audit", "verify", *argv]) == status, option
        captured = capsys.readouterr()
        assert captured.err.startswith(line) and len(captured.err.splitlines()) == (1 if line else 0)
    assert f"no checkpoints at {gone}" in captured.out


def test_cli_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path)
    key = ["--key-file", str(tmp_path / "audit.key")]
    assert main(["audit", "verify", "--sink", str(path), *key]) == 0
    out = capsys.readouterr().out
    assert "OK: 5 records" in out
    assert "writer test-writer: 5 records, seq 0..4, checkpoint at seq 4 (shutdown) ok" in out
    lines = _lines(path)
    del lines[3]
    path.write_text("".join(lines))
    assert main(["audit", "verify", "--sink", str(path), *key]) == EXIT_AUDIT_BROKEN
    out = capsys.readouterr().out
    assert "BROKEN at line 4 (request req-4" in out and "deleted" in out


def test_a_failing_sink_buffers_in_order_and_loses_nothing(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path)
    good = recorder.decisions.sink.path  # type: ignore[attr-defined]
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where a directory should be")
    recorder.decisions.sink.path = blocker / "decisions.jsonl"  # type: ignore[attr-defined]
    for n in range(3):
        recorder.failure(f"req-{n}", ErrorOut(code="x", message="y", status=503))
    assert recorder.decisions.buffered_total() == 3
    metrics = recorder.metrics.render().decode()
    assert 'govsearch_audit_sink_failures_total{sink="jsonl"} 3.0' in metrics
    assert "govsearch_audit_buffered_records 3.0" in metrics
    assert recorder.status().startswith("decisions sink")  # what /readyz reports
    assert recorder.find("req-1") is not None  # buffered records are still readable
    recorder.decisions.sink.path = good  # type: ignore[attr-defined]
    recorder.failure("req-3", ErrorOut(code="x", message="y", status=503))
    assert recorder.status() == "ok"
    report = verify_lines(JsonlSink(good).lines())
    assert report.ok and report.records == 4
    ids = [json.loads(x)["request_id"] for x in good.read_text().splitlines()]
    assert ids == ["req-0", "req-1", "req-2", "req-3"]


def test_a_full_queue_refuses_the_request_and_loses_nothing(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path, queue_size=2)
    good = recorder.decisions.sink.path  # type: ignore[attr-defined]
    recorder.decisions.sink.path = tmp_path  # type: ignore[attr-defined]  # a directory: fails
    for n in range(2):
        recorder.failure(f"req-{n}", ErrorOut(code="x", message="y", status=503))
    with pytest.raises(AuditBacklog):
        recorder.failure("req-2", ErrorOut(code="x", message="y", status=503))
    assert recorder.decisions.buffered_total() == 2  # nothing given up, nothing more taken
    refusals = 'govsearch_audit_backlog_refusals_total{log="decisions"} 1.0'
    assert refusals in recorder.metrics.render().decode()
    recorder.decisions.sink.path = good  # type: ignore[attr-defined]
    recorder.close()
    ids = [json.loads(x)["request_id"] for x in good.read_text().splitlines()]
    assert ids == ["req-0", "req-1"]
    assert verify_lines(JsonlSink(good).lines()).ok


def test_redact() -> None:
    assert redact("chocolat pour jean.dupont@example.fr au 06 12 34 56 78, 2 boites") == (
        "chocolat pour <email> au <phone>, # boites"
    )
