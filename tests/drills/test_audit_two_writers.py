"""Drill: two real ``govsearch serve`` processes on one host share one audit log path and one
key, serve searches concurrently (checkpointing every few records), and are shut down with
SIGTERM. Each process is a writer of its own (default writer id: host, pid, random), each
checkpoints on shutdown, and ``govsearch audit verify`` says OK with two writers, each
matching its checkpoint."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from control_plane.bootstrap import Ready
from control_plane.cli import main
from tests.checkout import ROOT, checkout_env
from tests.drills.harness import free_port
from tests.drills.results import record
from tests.e2e.conftest import ready, settings  # noqa: F401

pytestmark = pytest.mark.drill

GOVSEARCH = Path(sys.executable).parent / "govsearch"
INTENTS = ["cheap chocolate", "chocolate without peanuts", "oranges", "vegan chocolate", ""]
THREADS, PER_THREAD = 4, 12


def serve_environment(tmp_path: Path, engine_url: str) -> dict[str, str]:
    """The environment of the drill's ``govsearch serve`` processes: this checkout's code,
    no audit setting of the caller's, one audit log and one key for both."""
    return checkout_env(
        {k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_AUDIT_")},
        GOVSEARCH_ENGINE_URL=engine_url,
        GOVSEARCH_ENGINE_TIMEOUT="30",
        GOVSEARCH_AUDIT_PATH=str(tmp_path / "audit" / "decisions.jsonl"),
        GOVSEARCH_AUDIT_KEY_FILE=str(tmp_path / "keys" / "audit.key"),
        GOVSEARCH_AUDIT_GENERATE_KEY="false",
        GOVSEARCH_AUDIT_CHECKPOINT_EVERY_RECORDS="7",
    )


def _serve(
    tmp_path: Path, engine_url: str, n: int, workers: int = 1
) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    log = tmp_path / f"serve-{n}.log"
    env = serve_environment(tmp_path, engine_url)
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(GOVSEARCH), "serve", "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port)],
            env=env, cwd=str(ROOT), stdout=output, stderr=subprocess.STDOUT,
        )
    return process, f"http://127.0.0.1:{port}", log


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, log.read_text()
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"{url} not ready within 90 s:\n{log.read_text()}"
        time.sleep(0.2)


def _load(url: str, thread: int) -> list[int]:
    statuses = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for n in range(PER_THREAD):
            intent = INTENTS[(thread + n) % len(INTENTS)]
            statuses.append(client.post("/v1/search", json={"intent": intent}).status_code)
    return statuses


def test_two_serve_processes_share_one_log(
    engine_url: str, ready: Ready,  # noqa: F811
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keys").mkdir()
    key_file = tmp_path / "keys" / "audit.key"
    key_file.write_text("drill-shared:" + "x" * 48 + "\n")
    key_file.chmod(0o600)
    servers = [_serve(tmp_path, engine_url, n) for n in range(2)]
    statuses: dict[str, list[int]] = {}
    try:
        for process, url, log in servers:
            _wait_ready(process, url, log)
        with ThreadPoolExecutor(2 * THREADS) as pool:  # both processes at once
            futures = {(url, t): pool.submit(_load, url, t) for _, url, _ in servers for t in range(THREADS)}
            for (url, _), future in futures.items():
                statuses.setdefault(url, []).extend(future.result())
    finally:
        for process, _, _ in servers:
            process.send_signal(signal.SIGTERM)  # uvicorn's graceful shutdown: the lifespan ends
        codes = [process.wait(timeout=60) for process, _, _ in servers]
    logs = [log.read_text() for _, _, log in servers]
    # uvicorn shuts down gracefully, then re-raises the signal it caught: -SIGTERM is a clean end
    assert set(codes) <= {0, -signal.SIGTERM}, logs
    assert all("Application shutdown complete." in text for text in logs), logs
    for url, seen in statuses.items():
        assert sorted(set(seen)) == [200, 422], (url, seen)  # the empty intent is refused, and recorded

    audit = tmp_path / "audit"
    code = main(["audit", "verify", "--sink", str(audit / "decisions.jsonl"), "--key-file", str(key_file),
                 "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] and report["complete"], report
    writers = report["writers"]
    assert len(writers) == 2, writers
    per_process = THREADS * PER_THREAD
    for writer, seen in writers.items():
        host, pid, _ = writer.split(":")
        assert host == socket.gethostname() and int(pid) in {p.pid for p, _, _ in servers}
        assert (seen["records"], seen["first"], seen["last"]) == (per_process, 0, per_process - 1)
        anchor = (seen["checkpoint_status"], seen["checkpoint"], seen["after_checkpoint"])
        assert anchor == ("ok", per_process - 1, 0)
        assert seen["checkpoint_reason"] == "shutdown"
    checkpoints = [json.loads(x) for x in (audit / "checkpoints.jsonl").read_text().splitlines()]
    assert {c["reason"] for c in checkpoints} == {"interval", "shutdown"}  # every 7 records, and at exit
    assert all(c["key_id"] == "drill-shared" for c in checkpoints)

    code = main(["audit", "verify", "--sink", str(audit / "decisions.jsonl"), "--key-file", str(key_file)])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith(f"OK: {2 * per_process} records")
    order = [json.loads(x)["writer"] for x in (audit / "decisions.jsonl").read_text().splitlines()]
    record("audit_two_writers", {
        "writer_switches_in_file": sum(a != b for a, b in itertools.pairwise(order)),
        "processes": 2,
        "requests_per_process": per_process,
        "statuses": {str(s): sum(v.count(s) for v in statuses.values()) for s in (200, 422)},
        "records_per_writer": sorted(seen["records"] for seen in writers.values()),
        "checkpoints": len(checkpoints),
        "verify_exit": code,
        "verify": out.splitlines()[0].split(" in ")[0],
    })


def _workers(pid: int) -> set[int]:
    """The processes ``pid`` spawned as workers (multiprocessing's spawn), not its helpers
    (the resource tracker)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.add(int(child))
    return found


def test_one_serve_with_two_workers_keeps_a_chain_per_worker(
    engine_url: str, ready: Ready,  # noqa: F811
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``govsearch serve --workers 2``: two worker processes share the port; every answer is
    served, and each worker that wrote is a writer of its own with its shutdown checkpoint."""
    (tmp_path / "keys").mkdir()
    key_file = tmp_path / "keys" / "audit.key"
    key_file.write_text("drill-workers:" + "y" * 48 + "\n")
    key_file.chmod(0o600)
    process, url, log = _serve(tmp_path, engine_url, 0, workers=2)
    try:
        _wait_ready(process, url, log)
        workers = _workers(process.pid)
        with ThreadPoolExecutor(THREADS) as pool:
            statuses = [s for seen in pool.map(lambda t: _load(url, t), range(THREADS)) for s in seen]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    text = log.read_text()
    assert code in {0, -signal.SIGTERM}, text
    assert len(workers) == 2, (workers, text)  # uvicorn's supervisor and its two workers
    assert text.count("Application shutdown complete.") == 2, text
    assert sorted(set(statuses)) == [200, 422] and len(statuses) == THREADS * PER_THREAD

    audit = tmp_path / "audit"
    code = main(["audit", "verify", "--sink", str(audit / "decisions.jsonl"), "--key-file", str(key_file),
                 "--json"])
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] and report["complete"], report
    assert report["records"] == THREADS * PER_THREAD  # one record per request, whichever worker
    for writer, seen in report["writers"].items():
        assert int(writer.split(":")[1]) in workers, writer
        assert (seen["checkpoint_status"], seen["checkpoint_reason"]) == ("ok", "shutdown")
