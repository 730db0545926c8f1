"""Drills of the background audit writer against real ``govsearch serve`` processes:

- the sink held (the test holds the decisions file's ``flock``, which every append takes):
  the tiny queue fills, the requests beyond it are refused 503 ``audit_backlog`` at once,
  the queued ones wait for their fsync and are served once the lock is let go, and the log
  holds exactly one record per served request, none for the refused ones;
- threads x requests at once on ``--workers 2``: one record per request, the chain verifies
  (``group`` and ``written``);
- SIGKILL in the middle of a load: ``audit verify`` says ok or unvouched tail (0 or 7),
  never broken, and every request answered 200 has its record in the file (group commit, and
  the ``written`` commit level: a killed process loses nothing the kernel already holds).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane.bootstrap import Ready
from control_plane.cli import main
from control_plane.cli_support import EXIT_AUDIT_INCOMPLETE
from tests.checkout import ROOT, checkout_env
from tests.drills.harness import GOVSEARCH, free_port
from tests.drills.results import record
from tests.e2e.conftest import ready, settings  # noqa: F401

pytestmark = pytest.mark.drill

INTENTS = ["cheap chocolate", "chocolate without peanuts", "oranges", "vegan chocolate"]


def serve_environment(tmp_path: Path, engine_url: str, **extra: str) -> dict[str, str]:
    """The environment of the drill's ``govsearch serve``: this checkout's code, no audit
    setting of the caller's, the drill's own audit log and key."""
    return checkout_env(
        {k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_AUDIT_")},
        GOVSEARCH_ENGINE_URL=engine_url,
        GOVSEARCH_ENGINE_TIMEOUT="30",
        GOVSEARCH_AUDIT_PATH=str(tmp_path / "audit" / "decisions.jsonl"),
        GOVSEARCH_AUDIT_KEY_FILE=str(tmp_path / "audit.key"),
        GOVSEARCH_AUDIT_CHECKPOINT_EVERY_RECORDS="5",
        **extra,
    )


def _serve(
    tmp_path: Path, engine_url: str, workers: int = 1, **extra: str
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = serve_environment(tmp_path, engine_url, **extra)
    log = tmp_path / "serve.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            [GOVSEARCH, "serve", "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port)],
            env=env, cwd=str(ROOT), stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} not ready within 90 s:\n{log.read_text()}"
        time.sleep(0.2)


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=60)


def _records(path: Path, *, killed: bool = False) -> list[dict[str, Any]]:
    """The file's records. ``killed``: the writer was SIGKILLed, which may leave its last line
    torn (a write cut short, docs/audit.md): that line, and only the last, is no record."""
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    if killed and lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            lines = lines[:-1]  # torn: its request was never answered (every answer follows a whole write)
    return [json.loads(line) for line in lines]


def _verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    sink = tmp_path / "audit" / "decisions.jsonl"
    code = main(["audit", "verify", "--sink", str(sink), "--key-file", str(tmp_path / "audit.key"), "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, report


def _search(client: httpx.Client, intent: str) -> tuple[int, str, str | None]:
    """(status, request id, error code)."""
    response = client.post("/v1/search", json={"intent": intent})
    body = response.json()
    if response.status_code == 200:
        return 200, body["request_id"], None
    return response.status_code, body["error"]["request_id"], body["error"]["code"]


def test_a_full_queue_refuses_with_503_and_loses_no_served_record(
    engine_url: str, ready: Ready,  # noqa: F811
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    queue, sent = 2, 8
    process, url = _serve(tmp_path, engine_url, GOVSEARCH_AUDIT_QUEUE_SIZE=str(queue))
    decisions = tmp_path / "audit" / "decisions.jsonl"
    decisions.parent.mkdir(parents=True, exist_ok=True)
    answers: list[tuple[int, str, str | None]] = []
    lock = threading.Lock()
    try:
        fd = os.open(decisions, os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.flock(fd, fcntl.LOCK_EX)  # the sink's append waits for this lock: the writer is stuck
        try:
            def one(n: int) -> None:
                with httpx.Client(base_url=url, timeout=120) as client:
                    answer = _search(client, INTENTS[n % len(INTENTS)])
                with lock:
                    answers.append(answer)

            threads = [threading.Thread(target=one, args=(n,)) for n in range(sent)]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 60
            while len(answers) < sent - queue:  # the refusals come back while the lock is held
                assert time.monotonic() < deadline, answers
                time.sleep(0.05)
            with lock:
                refused = list(answers)
            assert {(status, code) for status, _, code in refused} == {(503, "audit_backlog")}, refused
            assert not decisions.read_text()  # nothing written while the sink is held
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        for thread in threads:
            thread.join(timeout=60)
        assert len(answers) == sent
    finally:
        code = _stop(process)
    assert code in {0, -signal.SIGTERM}
    served = [rid for status, rid, _ in answers if status == 200]
    refused_ids = [rid for status, rid, _ in answers if status == 503]
    assert len(served) == queue and len(refused_ids) == sent - queue, answers
    ids = Counter(r["request_id"] for r in _records(decisions))
    assert ids == Counter(served)  # each served request once; no record for a refused one
    verified, report = _verify(tmp_path, capsys)
    assert verified == 0 and report["ok"] and report["complete"], report
    record("audit_writer_backlog", {"queue_size": queue, "sent": sent, "served": len(served),
                                    "refused_audit_backlog": len(refused_ids), "records": sum(ids.values()),
                                    "verify_exit": verified})


@pytest.mark.parametrize("commit", ["group", "written"])
def test_concurrent_requests_get_exactly_one_record_each(
    engine_url: str, ready: Ready,  # noqa: F811
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str,
) -> None:
    threads, per_thread = 6, 10
    process, url = _serve(tmp_path, engine_url, workers=2, GOVSEARCH_AUDIT_BATCH="4",
                          GOVSEARCH_AUDIT_COMMIT=commit)

    def load(thread: int) -> list[tuple[int, str, str | None]]:
        with httpx.Client(base_url=url, timeout=60) as client:
            return [_search(client, INTENTS[(thread + n) % len(INTENTS)]) for n in range(per_thread)]

    try:
        with ThreadPoolExecutor(threads) as pool:
            answers = [a for seen in pool.map(load, range(threads)) for a in seen]
    finally:
        code = _stop(process)
    assert code in {0, -signal.SIGTERM}
    assert {status for status, _, _ in answers} == {200}, answers
    ids = Counter(r["request_id"] for r in _records(tmp_path / "audit" / "decisions.jsonl"))
    assert ids == Counter(rid for _, rid, _ in answers) and len(ids) == threads * per_thread
    verified, report = _verify(tmp_path, capsys)
    assert verified == 0 and report["ok"] and report["complete"], report
    assert report["records"] == threads * per_thread
    for seen in report["writers"].values():  # the head checkpointed (at shutdown, unless just before)
        assert (seen["checkpoint_status"], seen["after_checkpoint"]) == ("ok", 0), seen
    name = "audit_writer_concurrent" if commit == "group" else f"audit_writer_concurrent_{commit}"
    record(name, {"commit": commit, "threads": threads, "per_thread": per_thread,
                  "writers": len(report["writers"]), "records": report["records"], "verify_exit": verified})


@pytest.mark.parametrize("commit", ["group", "written"])
def test_sigkill_mid_load_leaves_every_answered_request_recorded(
    engine_url: str, ready: Ready,  # noqa: F811
    tmp_path: Path, capsys: pytest.CaptureFixture[str], commit: str,
) -> None:
    """Both commit levels that wait promise this (``written``: the batch was written, in the
    kernel, when the request was answered; the sync after it may not have run)."""
    process, url = _serve(tmp_path, engine_url, GOVSEARCH_AUDIT_COMMIT=commit)
    answered: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def load(thread: int) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            n = thread
            while not stop.is_set():
                n += 1
                try:
                    status, rid, code = _search(client, INTENTS[n % len(INTENTS)])
                except (httpx.HTTPError, ValueError):  # the process is gone mid-answer
                    return
                if status == 200:
                    answered.append(rid)
                else:
                    failures.append(f"{status} {code}")

    workers = [threading.Thread(target=load, args=(t,), daemon=True) for t in range(4)]
    try:
        for worker in workers:
            worker.start()
        deadline = time.monotonic() + 120
        while len(answered) < 40:
            assert time.monotonic() < deadline and process.poll() is None, (len(answered), failures)
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)  # mid-load: requests in flight, a batch maybe half done
        process.wait(timeout=30)
    finally:
        stop.set()
        if process.poll() is None:
            process.kill()
        for worker in workers:
            worker.join(timeout=60)
    assert not failures, failures
    written = Counter(r["request_id"] for r in _records(tmp_path / "audit" / "decisions.jsonl", killed=True))
    missing = [rid for rid in answered if rid not in written]
    assert not missing, f"{len(missing)} request(s) answered 200 without a record: {missing[:5]}"
    assert max(written.values()) == 1  # nothing written twice
    verified, report = _verify(tmp_path, capsys)
    assert verified in {0, EXIT_AUDIT_INCOMPLETE}, report  # ok, or a tail after the last checkpoint
    assert report["broken"] is None, report
    name = "audit_writer_sigkill" if commit == "group" else f"audit_writer_sigkill_{commit}"
    record(name, {"commit": commit, "answered_200": len(answered), "records": sum(written.values()),
                  "in_flight_recorded_unanswered": sum(written.values()) - len(answered),
                  "verify_exit": verified})
