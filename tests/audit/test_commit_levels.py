"""The commit levels side by side (ADR 0034): when a request is answered, against a real JSONL
file whose write is held (the ``flock`` every append takes, held by the test) or whose sync is
held (the sink's own sync, let through by the test): ``group`` waits for the sync, ``written``
for the write only, ``queued`` for neither. Also: a batch whose sync fails is reported and
never written twice; the event-loop wait (``append_async``) keeps the same levels."""

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
from control_plane.audit.record import ErrorOut
from control_plane.audit.recorder import Recorder
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.config import Settings
from tests.audit.conftest import jsonl_recorder, write_keys
from tests.audit.test_writer import held
from tests.clocks import FIXED_CLOCK

ERROR = ErrorOut(code="engine_unavailable", message="down", status=503)
SETTLE_S = 0.5
"""how long a test gives a request that must NOT be answered yet to be answered anyway"""


class HeldSyncSink(JsonlSink):
    """A JSONL sink whose sync to disk waits until the test lets it through (``release``); the
    write before it is the sink's own. ``fail`` makes the next sync raise as a failing disk would."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.syncing = threading.Event()
        self.release = threading.Event()
        self.fail: OSError | None = None
        self.syncs = 0

    def _sync(self, fd: int) -> None:
        self.syncing.set()
        assert self.release.wait(timeout=30), "the test never let the sync through"
        self.syncs += 1
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        super()._sync(fd)


def _recorder(tmp_path: Path, commit: str, sink: JsonlSink | None = None) -> Recorder:
    _, keys = write_keys(tmp_path)
    return Recorder(
        sink or JsonlSink(tmp_path / "decisions.jsonl"), JsonlSink(tmp_path / "events.jsonl"),
        instance_id="test-writer", keys=keys, checkpoints=FileCheckpoints(tmp_path / "checkpoints.jsonl"),
        commit=commit, clock=FIXED_CLOCK,  # type: ignore[arg-type]
    )


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["request_id"] for line in path.read_text().splitlines() if line.strip()]


def _answer_in_thread(recorder: Recorder, request_id: str) -> tuple[threading.Thread, threading.Event]:
    answered = threading.Event()

    def request() -> None:
        recorder.failure(request_id, ERROR)
        answered.set()

    thread = threading.Thread(target=request)
    thread.start()
    return thread, answered


def test_the_levels_are_configuration() -> None:
    assert Settings().audit.commit == "group"  # the default: a 200 means on disk
    for level in ("group", "written", "queued"):
        assert Settings.model_validate({"audit": {"commit": level}}).audit.commit == level
    with pytest.raises(ValueError):
        Settings.model_validate({"audit": {"commit": "fsynced-later"}})


@pytest.mark.parametrize("commit", ["group", "written"])
def test_group_and_written_wait_for_the_write(tmp_path: Path, commit: str) -> None:
    recorder = _recorder(tmp_path, commit)
    path = tmp_path / "decisions.jsonl"
    with held(path):  # the append cannot take the file's lock: nothing can be written
        thread, answered = _answer_in_thread(recorder, "req-0")
        assert not answered.wait(timeout=SETTLE_S)  # not answered while its record is not written
        assert path.read_text() == ""
    thread.join(timeout=30)
    assert answered.is_set() and _ids(path) == ["req-0"]
    recorder.close()


def test_written_answers_before_the_sync_and_group_only_after(tmp_path: Path) -> None:
    for commit in ("written", "group"):
        directory = tmp_path / commit
        directory.mkdir()
        sink = HeldSyncSink(directory / "decisions.jsonl")
        recorder = _recorder(directory, commit, sink)
        thread, answered = _answer_in_thread(recorder, "req-0")
        assert sink.syncing.wait(timeout=30)  # written to the file, the sync held
        assert _ids(sink.path) == ["req-0"]
        if commit == "written":
            assert answered.wait(timeout=30)  # answered with the sync still held
            assert sink.syncs == 0
        else:
            assert not answered.wait(timeout=SETTLE_S)  # group: not before the sync returned
        sink.release.set()
        thread.join(timeout=30)
        recorder.decisions.quiesce()  # written: the sync follows the answer
        assert answered.is_set() and sink.syncs == 1
        recorder.close()
        assert verify_lines(sink.lines()).ok


def test_the_event_loop_wait_keeps_the_levels(tmp_path: Path) -> None:
    """``append_async`` (the cached searches on the loop): ``written`` resolves with the sync
    held, ``group`` only once it returned; the sealed record comes back either way."""

    async def wait_for(recorder: Recorder, sink: HeldSyncSink) -> tuple[bool, dict[str, Any] | None]:
        data = recorder._failure_data("req-loop", ERROR)
        task = asyncio.ensure_future(recorder.decisions.append_async(data))
        while not sink.syncing.is_set():  # the loop stays free meanwhile
            await asyncio.sleep(0.01)
        done_before_sync = False
        try:
            await asyncio.wait_for(asyncio.shield(task), SETTLE_S)
            done_before_sync = True
        except TimeoutError:
            pass
        sink.release.set()
        return done_before_sync, await task

    for commit, answered_before_sync in (("written", True), ("group", False)):
        directory = tmp_path / commit
        directory.mkdir()
        sink = HeldSyncSink(directory / "decisions.jsonl")
        recorder = _recorder(directory, commit, sink)
        before, sealed = asyncio.run(wait_for(recorder, sink))
        assert before is answered_before_sync, commit
        assert sealed is not None and sealed["request_id"] == "req-loop" and sealed["sequence"] == 0
        recorder.close()


@pytest.mark.parametrize("commit", ["group", "written"])
def test_a_failed_sync_is_reported_and_the_batch_never_written_twice(tmp_path: Path, commit: str) -> None:
    """The batch is in the file when its sync fails (an I/O error): writing it again would
    repeat its sequences (``verify``: broken). Its request is answered (``group``: as a held
    record's would be; ``written``: it already was), the failure counted and reported by
    ``/readyz`` until the process restarts."""
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    recorder = _recorder(tmp_path, commit, sink)
    sink.fail = OSError(5, "Input/output error")
    recorder.failure("req-0", ERROR)
    recorder.decisions.quiesce()
    status = recorder.status()
    assert "failed to sync" in status and "Input/output error" in status, status
    assert recorder.decisions.buffered_total() == 0  # in the file: not held, not to be written again
    metrics = recorder.metrics.render().decode()
    assert 'govsearch_audit_sink_failures_total{sink="jsonl"} 1.0' in metrics
    recorder.failure("req-1", ERROR)  # the next batch syncs: the failure stays reported, as
    recorder.decisions.quiesce()  # the pages of the failed sync may be gone (fsync reports once)
    assert "failed to sync" in recorder.status()
    recorder.close()
    assert _ids(sink.path) == ["req-0", "req-1"]
    report = verify_lines(sink.lines())
    assert report.ok and report.records == 2, report


def test_held_records_drain_on_after_a_batch_whose_sync_failed(tmp_path: Path) -> None:
    """Records held by a failing sink, more than one batch of them; the sink comes back, and
    the first batch's sync fails: that batch is in the file, so what is held behind it is
    written on at once, and the request that queued last is answered (it waited for a kick
    that was never coming while the old failure was still the writer's last word)."""
    _, keys = write_keys(tmp_path)
    sink = HeldSyncSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    recorder = Recorder(
        sink, JsonlSink(tmp_path / "events.jsonl"), instance_id="test-writer", keys=keys,
        checkpoints=FileCheckpoints(tmp_path / "checkpoints.jsonl"), batch=2, clock=FIXED_CLOCK,
    )
    good = sink.path
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where a directory should be")
    sink.path = blocker / "decisions.jsonl"
    for number in range(3):
        recorder.failure(f"req-{number}", ERROR)  # held: the file cannot be opened
    assert recorder.decisions.buffered_total() == 3
    sink.path = good
    sink.fail = OSError(errno.EIO, "Input/output error")
    thread, answered = _answer_in_thread(recorder, "req-3")
    assert answered.wait(timeout=10), "the last request was left waiting"
    thread.join(timeout=30)
    recorder.decisions.quiesce()
    assert recorder.decisions.buffered_total() == 0
    assert "failed to sync" in recorder.status()
    recorder.close()
    assert _ids(good) == ["req-0", "req-1", "req-2", "req-3"]
    assert verify_lines(JsonlSink(good).lines()).ok


def test_a_record_queued_while_the_writer_stops_keeps_one_writer(tmp_path: Path) -> None:
    """A record queued between the writer's stop and ``close`` taking the lock again (a
    cancelled request's record, say) starts a writer of its own; ``close`` must not forget
    that one (the next record would start a second, and two writers take the same batch):
    it stops it in turn, once it has written the record."""
    recorder = _recorder(tmp_path, "group")
    log = recorder.decisions
    recorder.failure("req-0", ERROR)
    stopped = log._thread
    assert stopped is not None
    join = stopped.join

    def join_then_queue(timeout: float | None = None) -> None:
        join(timeout)
        recorder.failure("req-1", ERROR)  # the stopped writer is gone: this starts another

    stopped.join = join_then_queue  # type: ignore[method-assign]
    log.close()
    path = tmp_path / "decisions.jsonl"
    assert _ids(path) == ["req-0", "req-1"] and not log._running(), "the writer started meanwhile drained"
    recorder.failure("req-2", ERROR)
    recorder.close()
    assert _ids(path) == ["req-0", "req-1", "req-2"]
    assert verify_lines(JsonlSink(path).lines()).ok


def test_a_failed_write_still_holds_the_batch_and_retries_it(tmp_path: Path) -> None:
    """Nothing written (the file cannot be opened): the batch is held in memory and retried,
    as before the commit levels; once the sink is back it is written once."""
    recorder = _recorder(tmp_path, "group")
    good = recorder.decisions.sink.path  # type: ignore[attr-defined]
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where a directory should be")
    recorder.decisions.sink.path = blocker / "decisions.jsonl"  # type: ignore[attr-defined]
    recorder.failure("req-0", ERROR)
    assert recorder.decisions.buffered_total() == 1 and recorder.decisions.last_error is not None
    recorder.decisions.sink.path = good  # type: ignore[attr-defined]
    assert recorder.status() == "ok"  # /readyz retries the held batch
    recorder.close()
    assert _ids(good) == ["req-0"]
    assert verify_lines(JsonlSink(good).lines()).ok


class FullDiskSink(JsonlSink):
    """A JSONL sink on a disk that fills up: while ``full``, a write stores the first half of
    what it is given and then fails (ENOSPC), as a real write cut short does."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.full = False

    def _open_and_append(self, lines: list[bytes], *, wait: bool) -> tuple[int, int]:
        """Where every append goes (a batch's ``write_many``, ``written``'s own append)."""
        if not self.full:
            return super()._open_and_append(lines, wait=wait)
        real = os.write

        def half_then_full(fd: int, data: bytes) -> int:
            os.write = refuse  # type: ignore[assignment]
            return real(fd, bytes(data)[: max(1, len(data) // 2)])

        def refuse(fd: int, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        os.write = half_then_full  # type: ignore[assignment]
        try:
            return super()._open_and_append(lines, wait=wait)
        finally:
            os.write = real


@pytest.mark.parametrize("commit", ["group", "written"])
def test_a_write_cut_short_leaves_no_part_of_its_batch(tmp_path: Path, commit: str) -> None:
    """A full disk stops a batch's write halfway: the part written is cut off again (under the
    lock), so the held batch's retry is the only copy of it (without the cut, the retry
    follows a torn line or records the file already has: ``verify`` says broken)."""
    sink = FullDiskSink(tmp_path / "decisions.jsonl")
    recorder = _recorder(tmp_path, commit, sink)
    recorder.failure("req-0", ERROR)
    before = sink.path.read_bytes()
    sink.full = True
    recorder.failure("req-1", ERROR)
    assert recorder.decisions.buffered_total() == 1 and "No space left" in str(recorder.decisions.last_error)
    assert sink.path.read_bytes() == before, "the part written was cut off"
    sink.full = False
    recorder.failure("req-2", ERROR)  # the held batch first, then this one
    recorder.close()
    assert _ids(sink.path) == ["req-0", "req-1", "req-2"]
    report = verify_lines(sink.lines())
    assert report.ok and report.records == 3, report


def test_a_close_that_fails_after_the_write_never_writes_the_batch_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close`` can report an error of a write it flushed (network file systems): the lines
    are in the file by then, so the batch counts as written, not held for a retry."""
    recorder = _recorder(tmp_path, "group")
    path = tmp_path / "decisions.jsonl"
    real = os.close
    failing: set[int] = set()
    original_append = sinks._append

    def append(fd: int, line: bytes, size: int) -> None:
        original_append(fd, line, size)
        if line.rstrip().endswith(b"}") and b'"req-0"' in line:
            failing.add(fd)

    def close(fd: int) -> None:
        real(fd)
        if fd in failing:
            failing.discard(fd)
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(sinks, "_append", append)
    monkeypatch.setattr(os, "close", close)
    recorder.failure("req-0", ERROR)
    recorder.decisions.quiesce()
    monkeypatch.undo()
    assert recorder.decisions.buffered_total() == 0 and "cannot close" in recorder.status()
    recorder.failure("req-1", ERROR)
    recorder.close()
    assert _ids(path) == ["req-0", "req-1"]
    assert verify_lines(JsonlSink(path).lines()).ok


def test_queued_answers_with_the_write_held(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path, commit="queued")
    path = tmp_path / "decisions.jsonl"
    with held(path):
        thread, answered = _answer_in_thread(recorder, "req-0")
        assert answered.wait(timeout=30)
        assert path.read_text() == ""
    thread.join(timeout=30)
    recorder.close()
    assert _ids(path) == ["req-0"]
