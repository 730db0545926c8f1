"""The background writer, without an engine: concurrent appends, group commit, ``queued``
commit, shutdown draining. The sink is slowed by a real ``flock`` held on the log file (every
append takes it), never by a mock."""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from control_plane.audit.record import ErrorOut
from control_plane.audit.sinks import JsonlSink
from control_plane.audit.verify import verify_lines
from tests.audit.conftest import jsonl_recorder

ERROR = ErrorOut(code="engine_unavailable", message="down", status=503)


@contextmanager
def held(path: Path) -> Iterator[None]:
    """Hold the exclusive lock the JSONL sink takes for each append."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["request_id"] for line in path.read_text().splitlines()]


def test_concurrent_appends_get_one_record_each_in_one_chain(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path, batch=8)
    threads, each = 8, 25

    def write(thread: int) -> None:
        for n in range(each):
            recorder.failure(f"req-{thread}-{n}", ERROR)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    recorder.close()
    path = tmp_path / "decisions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["sequence"] for r in records] == list(range(threads * each))  # sealed in file order
    assert Counter(_ids(path)) == Counter(f"req-{t}-{n}" for t in range(threads) for n in range(each))
    for thread in range(threads):  # each thread's records in the order it wrote them
        mine = [i for i in _ids(path) if i.startswith(f"req-{thread}-")]
        assert mine == [f"req-{thread}-{n}" for n in range(each)]
    report = verify_lines(JsonlSink(path).lines())
    assert report.ok and report.records == threads * each


def test_group_commit_answers_only_once_the_record_is_written(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path)
    path = tmp_path / "decisions.jsonl"
    answered = threading.Event()

    def request() -> None:
        recorder.failure("req-0", ERROR)
        answered.set()

    with held(path):
        worker = threading.Thread(target=request)
        worker.start()
        assert not answered.wait(timeout=0.5)  # its record cannot be written: no answer yet
        assert path.read_text() == ""
        assert recorder.decisions.buffered_total() == 1
    worker.join()
    assert answered.is_set() and _ids(path) == ["req-0"]  # answered with its record on disk
    recorder.close()


def test_queued_commit_answers_at_once_and_shutdown_drains(tmp_path: Path) -> None:
    recorder = jsonl_recorder(tmp_path, commit="queued")
    path = tmp_path / "decisions.jsonl"
    with held(path):
        for n in range(5):  # would wait for the lock with group commit
            recorder.failure(f"req-{n}", ERROR)
        assert recorder.decisions.buffered_total() >= 1
        assert path.read_text() == ""
        closing = threading.Thread(target=recorder.close)
        closing.start()
    closing.join()
    assert _ids(path) == [f"req-{n}" for n in range(5)]
    checkpoints = [json.loads(x) for x in (tmp_path / "checkpoints.jsonl").read_text().splitlines()]
    assert checkpoints[-1]["sequence"] == 4 and checkpoints[-1]["reason"] == "shutdown"
    assert verify_lines(JsonlSink(path).lines()).ok


def test_shutdown_is_checkpointed_even_when_an_interval_checkpoint_holds_the_head(tmp_path: Path) -> None:
    """The last records fill an interval checkpoint exactly: shutdown still writes its own
    (the clean stop is what it vouches for), at the same head, once however often closed."""
    recorder = jsonl_recorder(tmp_path, checkpoint_every_records=3)
    for n in range(6):
        recorder.failure(f"req-{n}", ERROR)  # group commit: one batch each, interval at 2 and 5
        recorder.decisions.quiesce()  # answered before the writer checkpoints: wait for it
    checkpoints_path = tmp_path / "checkpoints.jsonl"

    def checkpoints() -> list[tuple[int, str]]:
        lines = checkpoints_path.read_text().splitlines()
        return [(c["sequence"], c["reason"]) for c in map(json.loads, lines)]

    assert checkpoints() == [(2, "interval"), (5, "interval")]
    recorder.close()
    recorder.close()
    assert checkpoints() == [(2, "interval"), (5, "interval"), (5, "shutdown")]
    report = verify_lines(
        JsonlSink(tmp_path / "decisions.jsonl").lines(),
        checkpoints=[json.loads(line) for line in checkpoints_path.read_text().splitlines()],
    )
    assert report.ok and report.writers["test-writer"].checkpoint_reason == "shutdown", report


def _sample(metrics: str, name: str) -> float:
    (line,) = [line for line in metrics.splitlines() if line.startswith(name + " ")]
    return float(line.split()[-1])


def test_a_batch_is_measured_once_its_size_and_its_write(tmp_path: Path) -> None:
    """Twenty requests queue while the file is locked: one batch is blocked in its write, the
    rest wait behind it and go in batches of at most ``audit.batch`` (8): 3 or 4 batches, 20
    records, each batch's write and sync timed once (``govsearch_audit_batch_*``)."""
    recorder = jsonl_recorder(tmp_path, batch=8)
    path = tmp_path / "decisions.jsonl"
    count = 20
    with held(path):
        requests = [threading.Thread(target=recorder.failure, args=(f"req-{n}", ERROR)) for n in range(count)]
        for request in requests:
            request.start()
        while recorder.decisions.buffered_total() < count:  # every record queued behind the lock
            threading.Event().wait(0.01)
    for request in requests:
        request.join()
    recorder.decisions.quiesce()
    metrics = recorder.metrics.render().decode()
    batches = _sample(metrics, 'govsearch_audit_batch_records_count{log="decisions"}')
    assert _sample(metrics, 'govsearch_audit_batch_records_sum{log="decisions"}') == count
    assert 3 <= batches <= 4, metrics
    assert _sample(metrics, 'govsearch_audit_batch_records_bucket{le="8.0",log="decisions"}') == batches
    assert _sample(metrics, 'govsearch_audit_batch_seconds_count{log="decisions"}') == batches
    assert _sample(metrics, 'govsearch_audit_batch_seconds_sum{log="decisions"}') > 0
    assert _sample(metrics, 'govsearch_audit_batch_records_count{log="events"}') == 0  # nothing there yet
    recorder.close()
    assert len(_ids(path)) == count
