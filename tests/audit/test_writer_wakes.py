"""The writer's wake-ups (ADR 0039): a batch wakes each event loop once, however many of its
requests await there, and before the writer sleeps (with no checkpoint to time its sleep
out) or writes a checkpoint; a queued record wakes the writer alone, not the requests
waiting for their own batch. The writer is held by a real ``flock`` on the log file, or by a
checkpoint store that blocks, never by a mock."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from control_plane.audit.record import ErrorOut
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from control_plane.audit.writer import ChainedLog
from tests.audit.conftest import jsonl_recorder
from tests.audit.test_writer import held

ERROR = ErrorOut(code="engine_unavailable", message="down", status=503)
PATIENCE_S = 10.0
"""how long a test waits for the writer to reach a state before it fails (never a speed bound)"""


class CountingLoop(asyncio.SelectorEventLoop):
    """An event loop that counts the callbacks other threads hand it (the writer's wakes)."""

    def __init__(self) -> None:
        super().__init__()
        self.from_other_threads = 0
        self._owner = threading.get_ident()

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> Any:
        if threading.get_ident() != self._owner:
            self.from_other_threads += 1
        return super().call_soon_threadsafe(callback, *args, context=context)


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, "the writer never got there"
        await asyncio.sleep(0.005)


def _wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, "never got there"
        time.sleep(0.005)


def test_a_batch_wakes_its_loop_once(tmp_path: Path) -> None:
    """One record is being written (the file's lock held: the writer waits in the sink) while
    eight more queue up on the loop; they are then written as one batch, and the loop is woken
    once for the first batch and once for the eight (before: once per record, nine times).
    No checkpoints: the writer's idle wait has no timeout, so the last batch's requests are
    answered only if their wake is sent before the writer sleeps (found in review: with
    checkpoints the wait timed out after 5 s and hid a missing wake)."""
    recorder = jsonl_recorder(tmp_path, batch=64, checkpoints=None)
    log: ChainedLog = recorder.decisions
    path = tmp_path / "decisions.jsonl"
    loop = CountingLoop()

    async def scenario() -> list[dict[str, Any] | None]:
        with held(path):
            first = asyncio.ensure_future(log.append_async({"kind": "failure", "request_id": "req-0"}))
            await _until(log._io.locked)  # the writer took [req-0] and waits for the lock
            rest = [asyncio.ensure_future(log.append_async({"kind": "failure", "request_id": f"req-{n}"}))
                    for n in range(1, 9)]
            await _until(lambda: log.buffered_total() == 9)
            assert loop.from_other_threads == 0  # nobody answered yet: nothing is in the file
        return list(await asyncio.wait_for(asyncio.gather(first, *rest), PATIENCE_S))

    try:
        sealed = loop.run_until_complete(scenario())
    finally:
        loop.close()
    recorder.close()
    assert [record["sequence"] for record in sealed if record is not None] == list(range(9))
    assert loop.from_other_threads == 2  # one wake per batch: [req-0], then [req-1 .. req-8]
    lines = path.read_text().splitlines()
    assert [json.loads(line)["request_id"] for line in lines] == [f"req-{n}" for n in range(9)]
    assert verify_lines(JsonlSink(path).lines()).ok


def test_a_queued_record_wakes_the_writer_not_the_waiting_requests(tmp_path: Path) -> None:
    """A request waiting for its batch (``append``, on the thread pool) is woken when the writer
    tried a batch, not each time another request queues a record (before: every record woke
    every waiting request, which went back to sleep). The waiter counts its wake-ups until
    the writer answered the first batch: one, that answer (before: three)."""
    recorder = jsonl_recorder(tmp_path)
    log: ChainedLog = recorder.decisions
    path = tmp_path / "decisions.jsonl"
    wakes: list[int] = []
    """the records still buffered at each of the waiter's wake-ups"""

    def waiting_request() -> None:
        deadline = time.monotonic() + PATIENCE_S
        with log._state:
            while time.monotonic() < deadline:
                if log._state.wait(timeout=PATIENCE_S):
                    wakes.append(log.buffered_total())
                    if wakes[-1] < 3:  # [req-0] answered: what the waiter waited for
                        return

    with held(path):
        log.append_nowait({"kind": "failure", "request_id": "req-0"})
        _wait_until(log._io.locked)  # the writer waits for the file's lock with [req-0]
        waiter = threading.Thread(target=waiting_request)
        waiter.start()
        _wait_until(lambda: len(log._state._waiters) == 1)  # type: ignore[attr-defined]
        log.append_nowait({"kind": "failure", "request_id": "req-1"})
        log.append_nowait({"kind": "failure", "request_id": "req-2"})
        assert log.buffered_total() == 3
    waiter.join()  # the lock let go: [req-0] is written and answered, which wakes the waiter
    assert len(wakes) == 1 and wakes[0] < 3  # once, by the answer; the queued records did not wake it
    recorder.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["request_id"] for line in lines] == ["req-0", "req-1", "req-2"]
    assert verify_lines(JsonlSink(path).lines()).ok


class BlockingCheckpoints:
    """A checkpoint store whose writes wait until the test lets them go."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.written: list[dict[str, Any]] = []

    def write(self, checkpoint: dict[str, Any]) -> None:
        self.entered.set()
        assert self.release.wait(PATIENCE_S), "the test never let the checkpoint go"
        self.written.append(checkpoint)

    def scan(self) -> Any:
        return iter(self.written)

    def describe(self) -> str:
        return "blocking test checkpoints"

    def exists(self) -> bool:
        return bool(self.written)


def test_a_request_is_answered_before_its_batch_checkpoint_is_written(tmp_path: Path) -> None:
    """A checkpoint falls due with every record: the request on the loop is answered while the
    checkpoint's write is still held (ADR 0034, 0039: no request waits for a checkpoint; found
    in review: nothing checked the wake sent before it)."""
    store = BlockingCheckpoints()
    recorder = jsonl_recorder(tmp_path, checkpoints=store, checkpoint_every_records=1)
    log: ChainedLog = recorder.decisions
    loop = asyncio.new_event_loop()

    async def scenario() -> dict[str, Any] | None:
        answer = await asyncio.wait_for(log.append_async({"kind": "failure", "request_id": "req-0"}),
                                        PATIENCE_S)
        assert store.entered.is_set() or not store.written  # the checkpoint not written yet
        assert not store.written
        return answer

    try:
        sealed = loop.run_until_complete(scenario())
    finally:
        store.release.set()
        loop.close()
    recorder.close()
    assert sealed is not None and sealed["sequence"] == 0
    assert store.written  # then the checkpoint was written
