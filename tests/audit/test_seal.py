"""Keys, MACs, checkpoints and writer ids, without an engine: records are failures written
directly through recorders over files in ``tmp_path``."""

from __future__ import annotations

import json
import multiprocessing
import socket
import stat
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit.chain import Chain, Head
from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.keys import AuditKeyError, generate_key_file, load_key_ring, read_key_file
from control_plane.audit.record import ErrorOut
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.cli import main
from control_plane.cli_support import EXIT_AUDIT_BROKEN
from control_plane.config import AuditSettings, Settings
from tests.clocks import FIXED_CLOCK

ERROR = ErrorOut(code="engine_unavailable", message="down", status=503)


def _recorder(directory: Path, **options: Any) -> Recorder:
    return Recorder(
        JsonlSink(directory / "decisions.jsonl"),
        JsonlSink(directory / "events.jsonl"),
        checkpoints=FileCheckpoints(directory / "checkpoints.jsonl"),
        clock=FIXED_CLOCK,
        **options,
    )


def _checkpoints(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (directory / "checkpoints.jsonl").read_text().splitlines()]


# --- keys ------------------------------------------------------------------------------


def test_a_key_file_is_a_ring_whose_last_key_seals(tmp_path: Path) -> None:
    file = tmp_path / "audit.key"
    file.write_text("# rotated 2026-11\nold-1:" + "a" * 32 + "\n\nnew-2:" + "b" * 40 + "\n")
    ring = read_key_file(file)
    assert sorted(ring.keys) == ["new-2", "old-1"] and ring.signing == "new-2"
    inline = load_key_ring(str(file), "env-3:" + "c" * 32, generate=False)
    assert inline.signing == "env-3" and len(inline.keys) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no-separator", "KEY_ID:SECRET"),
        ("bad id!:" + "a" * 40, "KEY_ID:SECRET"),
        ("k:short", "shorter than 32"),
        ("# only a comment", "holds no key"),
    ],
)
def test_a_bad_key_file_is_refused_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    file = tmp_path / "audit.key"
    file.write_text(text + "\n")
    with pytest.raises(AuditKeyError, match=message):
        read_key_file(file)


def test_no_key_is_generated_once_0600_or_refused(tmp_path: Path) -> None:
    file = tmp_path / "keys" / "audit.key"
    with pytest.raises(AuditKeyError, match="no audit key"):
        load_key_ring(str(file), None, generate=False)
    assert not file.exists()
    first = load_key_ring(str(file), None, generate=True)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert generate_key_file(file).keys == first.keys  # a second writer reads the first one's key
    assert first.signing is not None and first.signing.startswith("local-")


def test_a_recorder_refuses_to_open_without_a_key(tmp_path: Path) -> None:
    audit = AuditSettings(path=str(tmp_path / "decisions.jsonl"), key_file=str(tmp_path / "none.key"),
                          generate_key=False)
    recorder = Recorder.from_settings(Settings(audit=audit), None, clock=FIXED_CLOCK)
    with pytest.raises(AuditKeyError):
        recorder.open()


def test_rotation_old_records_verify_with_the_ring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key_file = tmp_path / "audit.key"
    key_file.write_text("k1:" + "1" * 40 + "\n")
    old = _recorder(tmp_path, instance_id="w", keys=read_key_file(key_file))
    old.failure("req-0", ERROR)
    old.failure("req-1", ERROR)
    old.close()
    with key_file.open("a") as file:
        file.write("k2:" + "2" * 40 + "\n")  # rotate: append the new key, restart the writer
    new = _recorder(tmp_path, instance_id="w", keys=read_key_file(key_file))
    new.failure("req-2", ERROR)
    new.close()
    records = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert [(r["sequence"], r["key_id"]) for r in records] == [(0, "k1"), (1, "k1"), (2, "k2")]
    log = ["audit", "verify", "--sink", str(tmp_path / "decisions.jsonl")]
    assert main([*log, "--key-file", str(key_file)]) == 0
    only_new = tmp_path / "new.key"
    only_new.write_text("k2:" + "2" * 40 + "\n")
    assert main([*log, "--key-file", str(only_new)]) == EXIT_AUDIT_BROKEN
    assert "BROKEN at line 1 (request req-0, writer w): unknown_key" in capsys.readouterr().out


def test_a_record_without_a_mac_does_not_pass_with_the_key(tmp_path: Path) -> None:
    """Stripping the MACs and rehashing gives an unkeyed chain: refused under a key ring."""
    unkeyed = _recorder(tmp_path, instance_id="w")
    unkeyed.failure("req-0", ERROR)
    keys = load_key_ring(None, "k:" + "k" * 32, generate=False)
    report = verify_lines(JsonlSink(tmp_path / "decisions.jsonl").lines(), keys=keys)
    assert report.broken is not None and (report.broken.problem, report.broken.line) == ("unsealed", 1)
    assert verify_lines(JsonlSink(tmp_path / "decisions.jsonl").lines()).ok  # without the key: a chain


# --- checkpoints -----------------------------------------------------------------------


def test_checkpoints_every_n_records_and_on_close(tmp_path: Path) -> None:
    keys = load_key_ring(None, "k:" + "k" * 32, generate=False)
    recorder = _recorder(tmp_path, instance_id="w", keys=keys, checkpoint_every_records=3)
    for n in range(7):
        recorder.failure(f"req-{n}", ERROR)
    heads = [(c["sequence"], c["reason"]) for c in _checkpoints(tmp_path)]
    assert heads == [(2, "interval"), (5, "interval")]
    recorder.close()
    recorder.close()  # nothing new: no second checkpoint of the same head
    checkpoints = _checkpoints(tmp_path)
    heads = [(c["sequence"], c["reason"]) for c in checkpoints]
    assert heads == [(2, "interval"), (5, "interval"), (6, "shutdown")]
    records = [json.loads(x) for x in (tmp_path / "decisions.jsonl").read_text().splitlines()]
    assert checkpoints[-1]["hash"] == records[6]["hash"]
    assert all(c["log"] == "decisions" and c["writer"] == "w" and c["key_id"] == "k" for c in checkpoints)


def test_checkpoints_every_t_seconds_on_the_monotonic_clock(tmp_path: Path) -> None:
    now = [100.0]
    recorder = _recorder(tmp_path, instance_id="w", checkpoint_every_records=1000, checkpoint_every_s=10,
                         monotonic=lambda: now[0])
    log = recorder.decisions  # a request is answered before its writer checkpoints: quiesce() waits
    recorder.failure("req-0", ERROR)
    log.quiesce()
    assert not (tmp_path / "checkpoints.jsonl").exists()
    now[0] += 10
    assert recorder.status() == "ok"  # /readyz asks: the head is checkpointed without a new record
    assert [c["sequence"] for c in _checkpoints(tmp_path)] == [0]
    recorder.failure("req-1", ERROR)
    now[0] += 9
    recorder.failure("req-2", ERROR)
    log.quiesce()
    assert [c["sequence"] for c in _checkpoints(tmp_path)] == [0]
    now[0] += 1
    recorder.failure("req-3", ERROR)
    log.quiesce()
    assert [c["sequence"] for c in _checkpoints(tmp_path)] == [0, 3]


class _FlakyCheckpoints(FileCheckpoints):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.failing, self.tries = True, 0

    def write(self, checkpoint: dict[str, Any]) -> None:
        self.tries += 1
        if self.failing:
            raise OSError("checkpoint volume gone")
        super().write(checkpoint)


def test_a_failing_checkpoint_store_is_reported_retried_later_and_loses_no_record(tmp_path: Path) -> None:
    now = [0.0]
    store = _FlakyCheckpoints(tmp_path / "checkpoints.jsonl")
    recorder = Recorder(
        JsonlSink(tmp_path / "decisions.jsonl"), JsonlSink(tmp_path / "events.jsonl"),
        checkpoints=store, checkpoint_every_records=1, monotonic=lambda: now[0], clock=FIXED_CLOCK,
    )
    recorder.failure("req-0", ERROR)
    recorder.failure("req-1", ERROR)  # not retried on every record
    assert recorder.find("req-1") is not None and store.tries == 1
    assert "decisions: checkpoints to" in recorder.status() and "volume gone" in recorder.status()
    store.failing = False
    now[0] += 5
    recorder.failure("req-2", ERROR)
    recorder.decisions.quiesce()  # answered before the writer checkpoints: wait for its checkpoint
    assert store.tries == 2 and recorder.status() == "ok"
    assert [c["sequence"] for c in _checkpoints(tmp_path)] == [2]


# --- writers ---------------------------------------------------------------------------


class _NoHead(JsonlSink):
    def head(self, writer: str) -> Any:
        raise AssertionError("a fresh writer has nothing to resume")


def test_the_default_writer_id_is_unique_per_process_and_starts_fresh(tmp_path: Path) -> None:
    first = Recorder(_NoHead(tmp_path / "d.jsonl"), JsonlSink(tmp_path / "e.jsonl"), clock=FIXED_CLOCK)
    second = Recorder(_NoHead(tmp_path / "d.jsonl"), JsonlSink(tmp_path / "e.jsonl"), clock=FIXED_CLOCK)
    assert first.writer != second.writer
    host, pid, _ = first.writer.split(":")
    assert host == socket.gethostname() and pid == str(multiprocessing.current_process().pid)
    first.failure("req-0", ERROR)
    second.failure("req-1", ERROR)
    first.failure("req-2", ERROR)
    report = verify_lines(JsonlSink(tmp_path / "d.jsonl").lines())
    assert report.ok
    assert {w: r.records for w, r in report.writers.items()} == {first.writer: 2, second.writer: 1}


def test_a_torn_line_stays_alone_and_the_next_record_parses(tmp_path: Path) -> None:
    recorder = _recorder(tmp_path, instance_id="w")
    recorder.failure("req-0", ERROR)
    path = tmp_path / "decisions.jsonl"
    with path.open("a") as file:
        file.write('{"writer": "crashed", "sequ')  # a writer killed mid-write
    other = _recorder(tmp_path, instance_id="v")
    other.failure("req-1", ERROR)
    report = verify_lines(JsonlSink(path).lines())
    assert report.ok and report.torn == (2,) and not report.complete  # no record: not a break
    assert report.writers["v"].records == 1 and report.records == 2
    assert json.loads(path.read_text().splitlines()[2])["request_id"] == "req-1"


#: what a decision record may hold: nulls, booleans, floats, escapes, non-ASCII, a negative
#: number, nested objects and lists (review: a cut inside any of them was a break)
CUT_RECORD = {
    "kind": "decision", "request_id": "req-0", "answer": None, "cached": False, "abstained": True,
    "took_ms": 12.5, "latency_ms": {"engine": 3.25e-05}, "intent": 'red "nike" shoes\\ \u00e9\u2028',
    "offset": -1, "tiers": [{"tier": "strict", "total": 0}], "matched": [],
}


def test_a_record_cut_at_any_byte_is_torn_never_a_break() -> None:
    """A kill may stop a write at any page boundary, so at any byte of a line: every cut of a
    sealed record's line is torn, none is a break."""
    _, line = Chain(Head("w")).seal_line(CUT_RECORD)
    breaks = []
    for cut in range(1, len(line)):
        text = line[:cut].decode("utf-8", errors="replace") + "\n"  # as JsonlSink.lines reads it
        report = verify_lines([(1, text)])
        if not report.ok or report.torn != (1,):
            breaks.append(f"{line[max(0, cut - 12):cut]!r}: {report.broken and report.broken.detail}")
    assert not breaks, f"{len(breaks)} of {len(line) - 1} cuts are a break: " + "; ".join(breaks[:8])


def test_a_line_that_does_not_start_as_a_record_is_unparseable() -> None:
    report = verify_lines([(1, "garbage\n")])
    assert report.broken is not None and report.broken.problem == "unparseable" and report.torn == ()


def test_a_line_cut_inside_a_character_is_torn_and_the_lines_after_it_are_read(tmp_path: Path) -> None:
    """A kill can cut a write inside a UTF-8 character (the raw intent, a brand): the file
    still reads, the writer that takes it over finds its head, and ``verify`` finds the cut
    line torn, the records around it intact."""
    recorder = _recorder(tmp_path, instance_id="w")
    recorder.failure("req-0", ERROR)
    path = tmp_path / "decisions.jsonl"
    with path.open("ab") as file:
        file.write('{"writer": "w", "intent": "cacahuètes"'.encode()[:-5])  # cut inside the è
    recorder.close()
    again = _recorder(tmp_path, instance_id="w")  # the restarted process takes the file over
    again.failure("req-1", ERROR)
    again.close()
    report = verify_lines(JsonlSink(path).lines())
    assert report.ok and report.torn == (2,), report
    assert report.writers["w"].records == 2 and report.writers["w"].last == 1


def _append_many(path: str, writer: str, count: int) -> None:
    recorder = Recorder(JsonlSink(path), JsonlSink(path + ".events"), instance_id=writer, clock=FIXED_CLOCK)
    big = "x" * 100_000  # far more than a pipe buffer or a stdio buffer: one record, one write
    for n in range(count):
        recorder.failure(f"{writer}-{n}", ErrorOut(code="engine_unavailable", message=big, status=503))


def test_processes_appending_to_one_file_keep_their_chains(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_many, args=(str(path), f"p{n}", 25)) for n in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0, 0, 0, 0]
    report = verify_lines(JsonlSink(path).lines())
    assert report.ok and report.records == 100, report.broken
    assert {w: r.records for w, r in report.writers.items()} == {f"p{n}": 25 for n in range(4)}
