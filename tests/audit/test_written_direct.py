"""``audit.commit: written`` on a JSONL file, a request on the event loop writing its own
record (ADR 0050), attacked: the loop never waits for a lock (another process's ``flock``,
the writer's own), a write that fails goes to the queue and is held there in order, a
checkpoint never names a record whose sync has not returned, a failed sync is reported and
nothing is written twice, and records written at once from the loop and from threads
make one chain with every record in it once."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from control_plane.audit.checkpoints import FileCheckpoints
from control_plane.audit.metrics import Metrics
from control_plane.audit.sinks import JsonlSink, SinkError
from control_plane.audit.verify import verify_lines
from control_plane.audit.writer import ChainedLog, Checkpointing
from tests.audit.test_commit_levels import HeldSyncSink
from tests.audit.test_writer import held

SETTLE_S = 0.5
"""how long a test gives a record that must NOT be answered yet to be answered anyway"""


class Appends:
    """Which thread appended each batch of lines to a JSONL sink (a mixin)."""

    appended_by: list[tuple[str, int]]

    def append_lines(self, lines: list[bytes], *, wait: bool = True) -> None:
        super().append_lines(lines, wait=wait)  # type: ignore[misc]
        self.appended_by.append((threading.current_thread().name, len(lines)))


class WatchedSink(Appends, HeldSyncSink):
    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.appended_by = []


class FailingAppendSink(Appends, JsonlSink):
    """Appends fail (a full disk: nothing written) while ``full``."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.appended_by = []
        self.full = False

    def _open_and_append(self, lines: list[bytes], *, wait: bool) -> tuple[int, int]:
        if self.full:
            raise SinkError(f"cannot append to {self.path}: {os.strerror(errno.ENOSPC)}")
        return super()._open_and_append(lines, wait=wait)


def _log(
    sink: JsonlSink, *, checkpoints: Path | None = None, commit: str = "written", every: int = 1
) -> ChainedLog:
    checkpointing = Checkpointing(FileCheckpoints(checkpoints), every_records=every) if checkpoints else None
    return ChainedLog(sink, "test-writer", Metrics(), 1000, commit=commit,  # type: ignore[arg-type]
                      checkpointing=checkpointing, fresh=True)


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["request_id"] for line in path.read_text().splitlines() if line.strip()]


def _record(number: int) -> dict[str, Any]:
    return {"kind": "decision", "request_id": f"req-{number}"}


def _loop_thread() -> str:
    return threading.current_thread().name


def test_a_request_on_the_loop_writes_its_own_record_and_the_writer_only_syncs(tmp_path: Path) -> None:
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    log = _log(sink)

    async def requests() -> list[dict[str, Any] | None]:
        first = await log.append_async(_record(0))  # the chain is read by the writer first
        log.quiesce()
        return [first] + [await log.append_async(_record(n)) for n in range(1, 4)]

    loop_thread = _loop_thread()
    sealed = asyncio.run(requests())
    log.quiesce()
    assert [record["sequence"] for record in sealed if record] == [0, 1, 2, 3]
    writers = [name for name, _ in sink.appended_by]
    assert writers[0] == "govsearch-audit-decisions"  # the first record: no chain yet, the writer's
    assert writers[1:] == [loop_thread] * 3, sink.appended_by  # then each request its own line
    assert sink.syncs >= 1  # and the writer synced them
    log.close()
    assert _ids(sink.path) == [f"req-{n}" for n in range(4)]
    assert verify_lines(sink.lines()).ok


def test_group_never_writes_from_the_loop(tmp_path: Path) -> None:
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    log = _log(sink, commit="group")

    async def requests() -> None:
        for number in range(3):
            await log.append_async(_record(number))

    asyncio.run(requests())
    log.close()
    assert sink.appended_by == []  # group: the writer's write_many, write and sync in one
    assert _ids(sink.path) == ["req-0", "req-1", "req-2"]


def test_the_loop_never_waits_for_a_lock_another_process_holds(tmp_path: Path) -> None:
    """Another process appending (its ``flock`` held): the request's record goes to the queue
    and the loop serves on; once the lock is free the record is written, once."""
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    log = _log(sink)

    async def scenario() -> tuple[int, bool, dict[str, Any] | None]:
        await log.append_async(_record(0))
        log.quiesce()
        ticks = 0
        with held(sink.path):
            task = asyncio.ensure_future(log.append_async(_record(1)))
            for _ in range(int(SETTLE_S / 0.01)):
                await asyncio.sleep(0.01)  # the loop is free: it ticks
                ticks += 1
            answered_while_held = task.done()
        return ticks, answered_while_held, await asyncio.wait_for(task, 30)

    ticks, answered_while_held, sealed = asyncio.run(scenario())
    assert ticks == int(SETTLE_S / 0.01)
    assert not answered_while_held  # not answered before its record is written
    assert sealed is not None and sealed["sequence"] == 1
    log.close()
    assert _ids(sink.path) == ["req-0", "req-1"]
    assert verify_lines(sink.lines()).ok


def test_a_direct_write_that_fails_is_held_in_order_and_written_once(tmp_path: Path) -> None:
    sink = FailingAppendSink(tmp_path / "decisions.jsonl")
    log = _log(sink)

    async def scenario() -> None:
        await log.append_async(_record(0))
        log.quiesce()
        sink.full = True
        assert await log.append_async(_record(1)) is None  # held: answered as before, not written
        assert await log.append_async(_record(2)) is None  # behind it, never around it
        assert log.buffered_total() == 2 and "No space left" in str(log.last_error)
        sink.full = False
        await asyncio.to_thread(log.retry)
        sealed = await log.append_async(_record(3))
        assert sealed is not None and sealed["sequence"] == 3

    asyncio.run(scenario())
    log.close()
    assert _ids(sink.path) == ["req-0", "req-1", "req-2", "req-3"]
    report = verify_lines(sink.lines())
    assert report.ok and report.records == 4, report


def test_a_checkpoint_never_names_a_record_whose_sync_has_not_returned(tmp_path: Path) -> None:
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = _log(sink, checkpoints=checkpoints)

    def named() -> list[int]:
        store = FileCheckpoints(checkpoints)
        return [checkpoint["sequence"] for checkpoint in store.scan()] if store.exists() else []

    async def scenario() -> None:
        await log.append_async(_record(0))  # written by the writer, which then syncs: held
        assert sink.syncing.wait(timeout=30)
        for number in range(1, 5):  # answered with the sync held, each written by the loop
            sealed = await log.append_async(_record(number))
            assert sealed is not None and sealed["sequence"] == number
        assert named() == []  # every record is in the file, none known to be on disk

    asyncio.run(scenario())
    assert _ids(sink.path) == [f"req-{n}" for n in range(5)]
    sink.release.set()
    log.quiesce()
    assert named() and max(named()) == 4  # synced: the checkpoint catches up with the head
    log.close()
    assert verify_lines(sink.lines()).ok


def test_a_failed_sync_after_direct_writes_is_reported_and_nothing_is_written_twice(tmp_path: Path) -> None:
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    log = _log(sink)

    async def scenario() -> None:
        await log.append_async(_record(0))
        log.quiesce()
        sink.fail = OSError(errno.EIO, "Input/output error")
        await log.append_async(_record(1))  # the loop's write; the writer's sync fails
        log.quiesce()
        assert log.sync_error is not None and "Input/output error" in log.sync_error
        assert log.buffered_total() == 0  # in the file: not held, not to be written again
        await log.append_async(_record(2))
        log.quiesce()
        assert log.sync_error is not None  # reported until the process restarts

    asyncio.run(scenario())
    log.close()
    assert _ids(sink.path) == ["req-0", "req-1", "req-2"]
    report = verify_lines(sink.lines())
    assert report.ok and report.records == 3, report


def test_the_loop_and_threads_writing_at_once_make_one_chain(tmp_path: Path) -> None:
    """Coroutines on a loop (direct writes, or the queue when the writer holds the file) and
    threads (``append``: always the queue) at once: every record once, one unbroken chain,
    and the loop wrote some of them itself."""
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    checkpoints = tmp_path / "checkpoints.jsonl"
    log = _log(sink, checkpoints=checkpoints, every=20)
    per_client, clients, threads = 60, 8, 3

    def thread_client(number: int) -> None:
        for index in range(per_client):
            log.append({"kind": "decision", "request_id": f"t{number}-{index}"})
            time.sleep(0.001)  # requests served in threads arrive now and then, as they do

    async def loop_client(number: int) -> None:
        for index in range(per_client):
            await log.append_async({"kind": "decision", "request_id": f"l{number}-{index}"})
            await asyncio.sleep(0)

    async def scenario() -> None:
        workers = [asyncio.to_thread(thread_client, number) for number in range(threads)]
        await asyncio.gather(*workers, *(loop_client(number) for number in range(clients)))

    loop_thread = _loop_thread()
    asyncio.run(scenario())
    log.close()
    ids = _ids(sink.path)
    assert len(ids) == len(set(ids)) == per_client * (clients + threads)
    report = verify_lines(sink.lines())
    assert report.ok and report.records == len(ids), report
    direct = sum(count for name, count in sink.appended_by if name == loop_thread)
    assert direct, "the loop wrote none itself"
    last = [json.loads(line) for line in checkpoints.read_text().splitlines()][-1]
    assert last["sequence"] == len(ids) - 1 and last["reason"] == "shutdown"


def test_a_restart_whose_first_write_is_held_still_checkpoints_the_head_it_read(tmp_path: Path) -> None:
    """A process takes over a writer's file (the chain read from it) and its first write is
    held (a full disk) until it stops: its shutdown checkpoint names the head the file held,
    at ``written`` as at ``group``."""
    for commit in ("group", "written"):
        directory = tmp_path / commit
        earlier = ChainedLog(JsonlSink(directory / "decisions.jsonl"), "test-writer", Metrics(), 100,
                             commit=commit)  # type: ignore[arg-type]
        earlier.append(_record(0))
        earlier.close()
        sink = FailingAppendSink(directory / "decisions.jsonl")
        sink.full = True
        checkpoints = directory / "checkpoints.jsonl"
        later = ChainedLog(sink, "test-writer", Metrics(), 100, commit=commit,  # type: ignore[arg-type]
                           checkpointing=Checkpointing(FileCheckpoints(checkpoints)))
        later.append(_record(1))  # held
        later.close()
        named = [(c["sequence"], c["reason"]) for c in FileCheckpoints(checkpoints).scan()]
        assert named == [(0, "shutdown")], (commit, named)


def test_a_record_the_loop_cannot_seal_is_held_by_the_writer_not_raised_to_the_request(
    tmp_path: Path,
) -> None:
    """A record that cannot be serialised (a bug upstream) fails where it always did: in the
    writer, held and reported (``/readyz``), not as an exception in the request."""
    sink = WatchedSink(tmp_path / "decisions.jsonl")
    sink.release.set()
    log = _log(sink)

    async def scenario() -> dict[str, Any] | None:
        await log.append_async(_record(0))
        log.quiesce()
        return await log.append_async({"kind": "decision", "request_id": "req-1", "value": object()})

    assert asyncio.run(scenario()) is None  # held
    assert log.buffered_total() == 1 and "not JSON serializable" in str(log.last_error)
    log.close()
    assert _ids(sink.path) == ["req-0"]
