"""The audit writer at its edges: a failed sync and the checkpoints after it, a record that
comes in as the writer stops, an unlock or a cut-back that fails.

Each test drives the interleaving with Events (no sleep stands for a synchronisation) and
checks what docs/audit.md promises: a checkpoint names only records whose sync returned, and
no later sync vouches for the lines of one that failed; shutdown drains the queue; no record
is in the file twice.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from control_plane.audit import sinks
from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.metrics import Metrics
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.audit.writer import ChainedLog, Checkpointing
from tests.audit.test_commit_levels import HeldSyncSink


def _record(number: int) -> dict[str, Any]:
    return {"kind": "decision", "request_id": f"req-{number}"}


def _ids(path: Path) -> list[str]:
    if not path.is_file():
        return []
    return [json.loads(line)["request_id"] for line in path.read_text().splitlines() if line.strip()]


def _named(checkpoints: Path) -> list[int]:
    """The sequences the checkpoints name, in order."""
    store = FileCheckpoints(checkpoints)
    return [checkpoint["sequence"] for checkpoint in store.scan()] if store.exists() else []


def _log(sink: JsonlSink, commit: str, checkpoints: Path | None = None) -> ChainedLog:
    checkpointing = Checkpointing(FileCheckpoints(checkpoints), every_records=1) if checkpoints else None
    return ChainedLog(sink, "test-writer", Metrics(), 1000, commit=commit,  # type: ignore[arg-type]
                      checkpointing=checkpointing, fresh=True)


def _eio() -> OSError:
    return OSError(errno.EIO, "Input/output error")


def test_group_no_checkpoint_names_a_batch_whose_sync_failed(tmp_path: Path) -> None:
    """At ``group``, a batch whose ``fdatasync`` failed is in the file and answered, and no
    checkpoint names it, nor any batch after it whose sync returned (the pages of the failed
    one may be gone, and a head counts every record before it)."""
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = _log(sink, "group", checkpoints)
    log.append(_record(0))
    log.quiesce()
    assert _named(checkpoints) == [0]  # synced: vouched for
    sink.fail = _eio()
    log.append(_record(1))  # written, its sync fails
    log.quiesce()
    assert log.sync_error is not None
    assert _named(checkpoints) == [0]
    log.append(_record(2))  # its own sync returns: it still does not vouch for seq 1
    log.quiesce()
    assert _named(checkpoints) == [0]
    assert log._idle_wait() is None  # nothing to checkpoint: the writer does not wake for it
    log.close()
    assert _named(checkpoints)[-1] == 0  # the shutdown checkpoint names what was vouched for
    assert _ids(sink.path) == ["req-0", "req-1", "req-2"]  # each once, none written again
    report = verify_lines(sink.lines(), checkpoints=FileCheckpoints(checkpoints).scan())
    assert report.ok and report.records == 3, report
    writer = report.writers["test-writer"]
    assert (writer.checkpoint, writer.after_checkpoint) == (0, 2), report  # unvouched, not broken


def test_written_a_later_sync_does_not_vouch_for_records_whose_sync_failed(tmp_path: Path) -> None:
    """At ``written`` (the request's own write, ADR 0050), the sync after a failed one returns;
    the head it covers counts the failed sync's lines, so no checkpoint names it."""
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = _log(sink, "written", checkpoints)

    async def scenario() -> None:
        sink.fail = _eio()
        await log.append_async(_record(0))  # through the writer (no chain yet); its sync fails
        log.quiesce()
        assert log.sync_error is not None and _named(checkpoints) == []
        await log.append_async(_record(1))  # the loop's own write; this sync returns
        log.quiesce()

    asyncio.run(scenario())
    assert sink.syncs >= 2
    assert _named(checkpoints) == []
    log.close()
    assert _named(checkpoints) == []
    assert _ids(sink.path) == ["req-0", "req-1"]


def test_close_drains_a_record_queued_as_the_writer_stops(tmp_path: Path) -> None:
    """The writer's loop has returned (stopping, nothing queued) but its thread has not ended
    yet when a cancelled request's record is queued (``append_nowait``): no writer was started
    for it (the thread was alive). ``close`` still writes it before it returns."""
    sink = JsonlSink(tmp_path / "decisions.jsonl")
    log = _log(sink, "group")
    served, queued = threading.Event(), threading.Event()

    def serve_then_linger() -> None:
        ChainedLog._serve(log)  # the real loop: returns once stopping and drained
        served.set()
        assert queued.wait(timeout=30)  # the thread is alive until the record is queued

    log._serve = serve_then_linger  # type: ignore[method-assign]  (looked up by _run)
    log.append(_record(0))
    closer = threading.Thread(target=log.close)
    closer.start()
    assert served.wait(timeout=30)
    log.append_nowait(_record(1))  # e.g. Recorder.search_cached's CancelledError branch
    queued.set()
    closer.join(timeout=30)
    assert not closer.is_alive()
    assert log.buffered_total() == 0
    assert _ids(sink.path) == ["req-0", "req-1"]
    assert not log._running()


@pytest.mark.parametrize("commit", ["written", "group"])
def test_an_append_whose_unlock_fails_is_in_the_file_once_and_not_vouched_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: str
) -> None:
    """The lines went in, then ``flock(LOCK_UN)`` failed: they are in the file (never written
    again), the failure is reported (``sync_error``: ``/readyz`` fails), and since they were
    never synced no checkpoint names them."""
    real_flock = sinks.fcntl.flock
    failed: list[int] = []

    def flock(fd: int, operation: int) -> None:
        real_flock(fd, operation)
        if operation == sinks.fcntl.LOCK_UN and not failed:
            failed.append(fd)
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(sinks.fcntl, "flock", flock)
    sink = JsonlSink(tmp_path / "decisions.jsonl")
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = _log(sink, commit, checkpoints)
    log.append(_record(0))  # creates the file; the unlock after the write fails
    log.append(_record(1))
    log.quiesce()
    log.close()
    assert failed and log.sync_error is not None and "unlock" in log.sync_error
    assert _named(checkpoints) == []
    assert _ids(sink.path) == ["req-0", "req-1"]
    assert verify_lines(sink.lines()).ok


def _cut_short_once(monkeypatch: pytest.MonkeyPatch, marker: bytes) -> None:
    """The write holding ``marker`` stores its first line and ten bytes more, then the disk
    is full; the first ``ftruncate`` after it fails too."""
    real_write, real_ftruncate = os.write, os.ftruncate
    armed = {"write": True, "truncate": True}

    def write(fd: int, data: bytes) -> int:
        if armed["write"] and marker in bytes(data):
            armed["write"] = False
            first = bytes(data).index(b"\n") + 1
            done = real_write(fd, bytes(data)[: first + 10])  # a whole line, then a torn one
            monkeypatch.setattr(os, "write", refuse)
            return done
        return real_write(fd, data)

    def refuse(fd: int, data: bytes) -> int:
        monkeypatch.setattr(os, "write", real_write)
        raise OSError(errno.ENOSPC, "No space left on device")

    def ftruncate(fd: int, length: int) -> None:
        if armed["truncate"]:
            armed["truncate"] = False
            monkeypatch.setattr(os, "ftruncate", real_ftruncate)
            raise _eio()
        real_ftruncate(fd, length)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "ftruncate", ftruncate)


def _two_held(log: ChainedLog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two records queued as one batch, whose write is cut short and not undone: held."""
    with log._state:  # both queued before the writer looks: one batch
        log.append_nowait(_record(0))
        log.append_nowait(_record(1))
        _cut_short_once(monkeypatch, b'"req-1"')
    with log._state:  # the writer tried the batch
        while log._attempts == 0:
            log._state.wait(timeout=1)
    assert log.buffered_total() == 2 and log.last_error is not None


def test_a_write_cut_short_whose_cut_back_fails_is_cut_before_its_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk stops a batch part-way and the cut back to the file's size fails too: the
    batch is held, and its retry first cuts off the part that went in, so each record is in
    the file once and no torn line is left."""
    sink = JsonlSink(tmp_path / "decisions.jsonl")
    log = _log(sink, "group")
    _two_held(log, monkeypatch)
    log.retry()
    log.close()
    assert _ids(sink.path) == ["req-0", "req-1"]
    report = verify_lines(sink.lines())
    assert report.ok and report.records == 2, report


def test_a_part_another_process_appended_after_is_never_followed_by_its_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, but another process appends to the file before the retry: the part cannot be
    cut off any more, so this process appends nothing more (its records stay held) rather
    than write its records a second time."""
    sink = JsonlSink(tmp_path / "decisions.jsonl")
    log = _log(sink, "group")
    _two_held(log, monkeypatch)
    other = JsonlSink(sink.path)  # another worker's sink on the same file
    other.write({"kind": "decision", "request_id": "other-0", "writer": "other"})
    log.retry()
    assert log.buffered_total() == 2 and log.last_error is not None
    assert "not appended to again" in log.last_error
    log.close()
    ours = []
    for line in sink.path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # the torn line the failed write left, closed by the other's append
            continue
        if record.get("writer") != "other":
            ours.append(record["request_id"])
    assert ours == ["req-0"]  # the one whole line the failed write left, and nothing more


def _earlier(directory: Path) -> None:
    """An earlier process of writer ``test-writer`` left one record in the file."""
    earlier = ChainedLog(JsonlSink(directory / "decisions.jsonl"), "test-writer", Metrics(), 100)
    earlier.append(_record(0))
    earlier.close()


def test_a_writer_taking_a_file_over_syncs_it_before_vouching_for_what_it_read(tmp_path: Path) -> None:
    """A configured writer id resumes its chain from the file; the lines it read may be in the
    page cache only (the process before it killed before its sync): they are synced before any
    checkpoint names them."""
    _earlier(tmp_path)
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    checkpoints = tmp_path / "checkpoints.jsonl"
    later = ChainedLog(sink, "test-writer", Metrics(), 100,
                       checkpointing=Checkpointing(FileCheckpoints(checkpoints), every_records=1))
    later.append(_record(1))
    later.close()
    assert sink.syncs == 2  # the file taken over, then the record's batch
    assert _named(checkpoints)[-1] == 1


def test_a_writer_whose_takeover_sync_fails_vouches_for_nothing(tmp_path: Path) -> None:
    _earlier(tmp_path)
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    sink.fail = _eio()  # the takeover's sync
    checkpoints = tmp_path / "checkpoints.jsonl"
    later = ChainedLog(sink, "test-writer", Metrics(), 100,
                       checkpointing=Checkpointing(FileCheckpoints(checkpoints), every_records=1))
    later.append(_record(1))  # written and synced, after a chain not known to be on disk
    later.close()
    assert later.sync_error is not None
    assert _named(checkpoints) == []
    assert _ids(sink.path) == ["req-0", "req-1"]


class NoThreads:
    """``threading.Thread.start`` refused for the audit writer's threads (the process at its
    thread limit: ``RuntimeError: can't start new thread``), every other thread as usual."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.refused = 0
        start = threading.Thread.start

        def refusing(thread: threading.Thread) -> None:
            if thread.name.startswith("govsearch-audit-"):
                self.refused += 1
                raise RuntimeError("can't start new thread")
            start(thread)

        monkeypatch.setattr(threading.Thread, "start", refusing)


@pytest.mark.parametrize("commit", ["group", "written"])
def test_a_writer_that_cannot_start_refuses_the_record_and_queues_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, commit: str
) -> None:
    """No writer thread to be had: the record is refused (``AuditUnavailable``, a 503 in the
    one error shape, as a full queue's) before it is queued, so a request answered with an
    error leaves no record saying it was served, and nothing waits on a writer that is not
    there. Once threads can be had again, the next record is written, alone."""
    from control_plane.audit.writer import AuditUnavailable

    path = tmp_path / "decisions.jsonl"
    log = _log(JsonlSink(path), commit)
    with monkeypatch.context() as patched:
        no_threads = NoThreads(patched)
        with pytest.raises(AuditUnavailable):
            log.append(_record(1))
        with pytest.raises(AuditUnavailable):
            asyncio.run(log.append_async(_record(2)))
        assert no_threads.refused >= 2
        assert log.buffered_total() == 0
    assert log.append(_record(3)) is not None
    log.close()
    assert _ids(path) == ["req-3"]
    assert verify_lines(JsonlSink(path).lines()).ok


def test_a_direct_write_whose_syncing_writer_cannot_start_is_served_and_synced_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At ``written``, a request that wrote its own line (ADR 0050) is answered: its record is
    in the file, which is what ``written`` promises. The writer that syncs it cannot start now;
    the next record starts one, and shutdown syncs both."""
    path = tmp_path / "decisions.jsonl"
    log = _log(JsonlSink(path), "written")
    assert asyncio.run(log.append_async(_record(1))) is not None  # the chain read, the writer up
    log.close()  # the writer stopped: the next direct write must start one
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = ChainedLog(JsonlSink(path), "test-writer", Metrics(), 1000, commit="written",
                     checkpointing=Checkpointing(FileCheckpoints(checkpoints), every_records=1))
    assert log.append(_record(2)) is not None  # the chain read from the file, the writer stopped
    log.close()
    with monkeypatch.context() as patched:
        no_threads = NoThreads(patched)
        assert asyncio.run(log.append_async(_record(3))) is not None  # its own line, no writer
        assert no_threads.refused == 1
    assert _ids(path) == ["req-1", "req-2", "req-3"]
    assert _named(checkpoints)[-1] == 1  # req-3's sync is still to come: not vouched for
    assert log.append(_record(4)) is not None
    log.close()
    assert _ids(path) == ["req-1", "req-2", "req-3", "req-4"]
    assert _named(checkpoints)[-1] == 3  # synced, req-3 with req-4: a checkpoint names them
    assert verify_lines(JsonlSink(path).lines(), checkpoints=FileCheckpoints(checkpoints).scan()).ok
