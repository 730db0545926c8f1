"""Drill: an operator with write access to the log (not to the key) rewrites it, every way the
issue lists. ``govsearch audit verify`` with the key must find each at the right record or
checkpoint; without the key (``--no-key``) the test pins down what is still found.

The log: two writers (two recorders, default writer ids: one per process) interleaved in one
file, sealed with one key, each checkpointed on close::

    line  1 A0   2 B0   3 A1   4 A2   5 B1   6 A3   7 B2   8 A4   9 A5  10 B3
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit.chain import GENESIS, record_hash
from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.keys import read_key_file
from control_plane.audit.record import ErrorOut
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.cli import main
from control_plane.cli_support import EXIT_AUDIT_BROKEN, EXIT_AUDIT_INCOMPLETE
from tests.clocks import FIXED_CLOCK
from tests.drills.results import record

pytestmark = pytest.mark.drill

KEY = "drill-1:" + "k" * 48
ORDER = "ABAABABAAB"


def _log(directory: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Write the log above; the records in file order and the writer ids ({"A": ..., "B": ...})."""
    (directory / "audit.key").write_text(KEY + "\n")
    keys = read_key_file(directory / "audit.key")
    recorders = {
        name: Recorder(
            JsonlSink(directory / "decisions.jsonl"),
            JsonlSink(directory / "events.jsonl"),
            keys=keys,
            checkpoints=FileCheckpoints(directory / "checkpoints.jsonl"),
            clock=FIXED_CLOCK,
        )
        for name in "AB"
    }
    for n, name in enumerate(ORDER):
        recorders[name].failure(f"req-{n}", ErrorOut(code="engine_unavailable", message="down", status=503))
    for recorder in recorders.values():
        recorder.close()
    records = [json.loads(line) for line in (directory / "decisions.jsonl").read_text().splitlines()]
    return records, {name: r.writer for name, r in recorders.items()}


def _rehash(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "hash": record_hash(record)}


def _dump(records: list[Any]) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def edit(records: list[Any], _: Path) -> list[Any]:
    records[3] = {**records[3], "error": {**records[3]["error"], "code": "ok"}}
    return records


def delete(records: list[Any], _: Path) -> list[Any]:
    del records[3]
    return records


def swap(records: list[Any], _: Path) -> list[Any]:
    records[2], records[3] = records[3], records[2]
    return records


def torn(records: list[Any], _: Path) -> list[Any]:
    records[8] = json.dumps(records[8])[:100]  # A5, A's last record, cut as by a crash mid-write
    return records


def torn_in_the_middle(records: list[Any], _: Path) -> list[Any]:
    records[3] = json.dumps(records[3])[:100]  # A2: a record cut short cannot hide from its chain
    return records


def truncate_tail(records: list[Any], _: Path) -> list[Any]:
    return records[:7]


def append_forged(records: list[Any], _: Path) -> list[Any]:
    last = records[8]  # A5; the attacker keeps its MAC: they cannot compute one
    forged = {**last, "request_id": "req-forged", "sequence": 6, "prev_hash": last["hash"]}
    return [*records, _rehash(forged)]


def rechain(records: list[Any], _: Path) -> list[Any]:
    """Edit A2, then recompute A2's hash and relink every later A record."""
    writer = records[3]["writer"]
    records[3] = _rehash({**records[3], "error": {**records[3]["error"], "code": "ok"}})
    prev = records[3]["hash"]
    for n in range(4, len(records)):
        if records[n]["writer"] == writer:
            records[n] = _rehash({**records[n], "prev_hash": prev})
            prev = records[n]["hash"]
    return records


def new_writer(records: list[Any], _: Path) -> list[Any]:
    prev = GENESIS
    for sequence in range(3):
        forged = _rehash({**records[1], "writer": "forged:1:cafe", "request_id": f"forged-{sequence}",
                          "sequence": sequence, "prev_hash": prev, "mac": "0" * 64})
        records.append(forged)
        prev = forged["hash"]
    return records


def forge_checkpoints(records: list[Any], directory: Path) -> list[Any]:
    """Cut the tail and replace the checkpoints with ones at the new ends (MACs made up)."""
    cut = records[:7]
    checkpoints = [json.loads(line) for line in (directory / "checkpoints.jsonl").read_text().splitlines()]
    ends = {r["writer"]: r for r in cut}
    forged = [
        {**cp, "sequence": ends[cp["writer"]]["sequence"], "hash": ends[cp["writer"]]["hash"]}
        for cp in checkpoints
    ]
    (directory / "checkpoints.jsonl").write_text(_dump(forged))
    return cut


def drop_checkpoints(records: list[Any], directory: Path) -> list[Any]:
    (directory / "checkpoints.jsonl").unlink()
    return records


Variant = Callable[[list[Any], Path], list[Any]]

BROKEN, UNVOUCHED = EXIT_AUDIT_BROKEN, EXIT_AUDIT_INCOMPLETE

#: variant -> with the key: (exit code, first problem, its line, writer "A"/"B"/None);
#: without the key: (exit code, first problem or None)
EXPECTED: dict[str, tuple[Variant, tuple[int, str, int | None, str | None], tuple[int, str | None]]] = {
    "edit_a_field": (edit, (BROKEN, "edited", 4, "A"), (BROKEN, "edited")),
    "delete_a_record": (delete, (BROKEN, "deleted", 5, "A"), (BROKEN, "deleted")),
    "swap_two_records": (swap, (BROKEN, "reordered", 3, "A"), (BROKEN, "reordered")),
    "torn_line": (torn, (BROKEN, "truncated", None, "A"), (BROKEN, "truncated")),
    "torn_line_in_the_middle": (torn_in_the_middle, (BROKEN, "deleted", 6, "A"), (BROKEN, "deleted")),
    "truncate_the_tail": (truncate_tail, (BROKEN, "truncated", None, "A"), (BROKEN, "truncated")),
    "append_forged_record": (append_forged, (BROKEN, "forged", 11, "A"), (UNVOUCHED, None)),
    "rechain_after_edit": (rechain, (BROKEN, "forged", 4, "A"), (BROKEN, "rewritten")),
    "new_forged_writer": (new_writer, (BROKEN, "forged", 11, None), (UNVOUCHED, None)),
    "forge_checkpoints_and_cut": (
        forge_checkpoints, (BROKEN, "forged_checkpoint", None, "A"), (UNVOUCHED, None)
    ),
    "delete_checkpoints": (drop_checkpoints, (UNVOUCHED, "", None, None), (UNVOUCHED, None)),
}


def _verify(directory: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, dict[str, Any]]:
    code = main([
        "audit", "verify", "--sink", str(directory / "decisions.jsonl"),
        "--checkpoints", str(directory / "checkpoints.jsonl"), "--json", *options,
    ])
    return code, json.loads(capsys.readouterr().out)


def test_every_tampering_variant_is_found_with_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figures: dict[str, Any] = {}
    key = ("--key-file", str(tmp_path / "untouched" / "audit.key"))
    for name, (tamper, with_key, without_key) in EXPECTED.items():
        directory = tmp_path / name
        directory.mkdir()
        records, writers = _log(directory)
        if name == "edit_a_field":  # the untampered log first: complete
            (tmp_path / "untouched").mkdir()
            (tmp_path / "untouched" / "audit.key").write_text(KEY + "\n")
            code, report = _verify(directory, capsys, *key)
            assert (code, report["complete"]) == (0, True)
            assert sorted(report["writers"]) == sorted(writers.values())
            assert [report["writers"][writers[w]]["checkpoint_status"] for w in "AB"] == ["ok", "ok"]
            per_writer = [report["writers"][writers[w]]["records"] for w in "AB"]
            figures["untouched"] = {"exit": code, "records": report["records"], "per_writer": per_writer}
        (directory / "decisions.jsonl").write_text(_dump(tamper(records, directory)))

        code, report = _verify(directory, capsys, *key)
        want_code, want_problem, want_line, want_writer = with_key
        broken = report["broken"]
        assert code == want_code, (name, report)
        if want_problem:
            assert (broken["problem"], broken["line"]) == (want_problem, want_line), (name, broken)
            if want_writer is not None:  # checkpoint problems come by writer id: look among them all
                found = {p["writer"] for p in report["problems"] if p["problem"] == want_problem}
                assert writers[want_writer] in found, (name, report["problems"])
        else:
            assert broken is None and not report["checkpointed"], (name, report)
        code_nokey, report_nokey = _verify(directory, capsys, "--no-key")
        found_nokey = (report_nokey["broken"] or {}).get("problem")
        assert (code_nokey, found_nokey) == without_key, (name, report_nokey)
        figures[name] = {
            "with_key": {
                "exit": code,
                "problem": broken and broken["problem"],
                "line": broken and broken["line"],
                "detail": broken and broken["detail"],
            },
            "without_key": {"exit": code_nokey,
                            "problem": report_nokey["broken"] and report_nokey["broken"]["problem"]},
        }
    record("audit_tampering", figures)


def test_what_a_cut_tail_looks_like(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records, writers = _log(tmp_path)
    (tmp_path / "decisions.jsonl").write_text(_dump(records[:7]))
    code = main(["audit", "verify", "--sink", str(tmp_path / "decisions.jsonl"),
                 "--key-file", str(tmp_path / "audit.key")])
    out = capsys.readouterr().out
    assert code == BROKEN
    assert f"BROKEN: truncated: writer {writers['A']}: checkpoint at seq 5 but the log ends at seq 3" in out
    assert f"BROKEN: truncated: writer {writers['B']}: checkpoint at seq 3 but the log ends at seq 2" in out
    assert f"writer {writers['A']}: 4 records, seq 0..3, checkpoint at seq 5: TRUNCATED" in out


def test_without_the_key_a_new_writer_is_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a reader without the key still learns of a forged writer: it has no checkpoint."""
    records, _ = _log(tmp_path)
    (tmp_path / "decisions.jsonl").write_text(_dump(new_writer(records, tmp_path)))
    code = main(["audit", "verify", "--sink", str(tmp_path / "decisions.jsonl"), "--no-key"])
    out = capsys.readouterr().out
    assert code == UNVOUCHED and out.startswith("OK: 13 records")
    assert "writer forged:1:cafe: 3 records, seq 0..2, NO CHECKPOINT" in out
    assert "MACs NOT checked" in out and "INCOMPLETE" in out


def test_a_write_cut_short_by_a_kill_is_torn_not_broken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer killed in the middle of a write it never returned from leaves the start of a
    record: no record is missing from any chain, so verify finds no break; it lists the line
    and says not everything is vouched for (exit 7), as after any kill."""
    records, _ = _log(tmp_path)
    cut = json.dumps({**records[9], "sequence": 4, "request_id": "req-never-answered"})[:150]
    (tmp_path / "decisions.jsonl").write_text(_dump([*records, cut]))
    code = main(["audit", "verify", "--sink", str(tmp_path / "decisions.jsonl"),
                 "--key-file", str(tmp_path / "audit.key")])
    out = capsys.readouterr().out
    assert code == UNVOUCHED and out.startswith("OK: 10 records"), out
    assert "TORN: line(s) 11: a record cut short" in out and "INCOMPLETE" in out
    assert "BROKEN" not in out
