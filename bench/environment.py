"""What a result was measured on: the machine, the engine, the code; and a local engine to
measure against when no URL is given (started on a free port, stopped afterwards)."""

from __future__ import annotations

import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from control_plane import local_engine
from control_plane.config import EngineSettings
from control_plane.engine import Engine, connect
from control_plane.times import system_clock

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / ".govsearch" / "bench-run"


def _first_line(path: str, key: str) -> str | None:
    try:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine() -> dict[str, Any]:
    mem_kb = _first_line("/proc/meminfo", "MemTotal")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "ram_gib": round(int(mem_kb.split()[0]) / 1024 / 1024, 1) if mem_kb else None,
        "cpu_model": _first_line("/proc/cpuinfo", "model name"),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "commit": commit or None,
    }


def engine_facts(engine: Engine) -> dict[str, Any]:
    info = engine.info()
    stats = engine.request("GET", "/_nodes/stats/jvm")
    heaps = [node["jvm"]["mem"]["heap_max_in_bytes"] for node in stats["nodes"].values()]
    jvm = engine.request("GET", "/_nodes/jvm")
    versions = sorted({node["jvm"]["version"] for node in jvm["nodes"].values()})
    return {
        "kind": engine.kind,
        "distribution": info["version"].get("distribution", "elasticsearch"),
        "version": info["version"]["number"],
        "lucene": info["version"].get("lucene_version"),
        "nodes": len(heaps),
        "heap_max_mib": [round(h / 1024 / 1024) for h in heaps],
        "jvm": versions,
    }


def engine_memory(engine: Engine) -> dict[str, Any]:
    """The engine's resident memory (``VmRSS`` of its process, when it runs on this machine)
    and JVM heap in use, in MiB, summed over its nodes."""
    stats = engine.request("GET", "/_nodes/stats/jvm")
    heap = sum(node["jvm"]["mem"]["heap_used_in_bytes"] for node in stats["nodes"].values())
    processes = engine.request("GET", "/_nodes/process")
    rss_kb = 0
    for node in processes["nodes"].values():
        pid = node.get("process", {}).get("id")
        found = _first_line(f"/proc/{pid}/status", "VmRSS") if pid else None
        if found is None:
            return {"rss_mib": None, "heap_used_mib": round(heap / 2**20)}
        rss_kb += int(found.split()[0])
    return {"rss_mib": round(rss_kb / 1024), "heap_used_mib": round(heap / 2**20)}


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` and its live descendants
    (a ``govsearch serve`` supervisor and its workers), from ``/proc``."""
    tick = os.sysconf("SC_CLK_TCK")
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    return total


def engine_cpu_s(engine: Engine) -> float:
    """CPU seconds the engine has used: from ``/proc`` when its process runs on this machine
    (to the clock tick), else from ``_nodes/stats/process`` (refreshed about once a second)."""
    nodes = engine.request("GET", "/_nodes/process")["nodes"].values()
    pids = [node.get("process", {}).get("id") for node in nodes]
    if pids and all(pid and Path(f"/proc/{pid}").exists() for pid in pids):
        return sum(tree_cpu_s(int(pid)) for pid in pids)
    stats = engine.request("GET", "/_nodes/stats/process")
    return float(sum(node["process"]["cpu"]["total_in_millis"] for node in stats["nodes"].values())) / 1000


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A free HTTP port whose transport port (``port + 100``) is free too."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port + 100 < 65536 and _free(port + 100):
            return port
    raise RuntimeError("no free pair of ports (port, port + 100) found")


@contextmanager
def engine_url(url: str | None, heap: str) -> Iterator[str]:
    """``url`` as given; else a local engine of our own, stopped when the block ends."""
    if url:
        yield url
        return
    port = free_port()
    print(f"starting a local engine on port {port} (heap {heap}, data {DATA_DIR})", file=sys.stderr)
    state = local_engine.start(port=port, data_dir=DATA_DIR, heap=heap)
    try:
        yield state.url
    finally:
        local_engine.stop(DATA_DIR)


def recorded(command: str, out: Path, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Measure without an engine of the bench's own (in process, or against one ``measure``
    reaches itself) and write one JSON result to ``out``: the command, the machine, the load
    average around the run, its duration, and what ``measure()`` returns."""
    started = time.perf_counter()
    result = _head(command)
    result.update(measure())
    return _written(result, started, out)


def recorded_run(
    command: str,
    engine_url_arg: str | None,
    heap: str,
    out: Path,
    measure: Callable[[Engine, str], dict[str, Any]],
) -> dict[str, Any]:
    """Measure against an engine (``engine_url_arg``, else a local one of our own) and write
    one JSON result to ``out``: the command, the machine, the engine, the load average
    around the run, its duration, and what ``measure(engine, url)`` returns."""
    started = time.perf_counter()
    with engine_url(engine_url_arg, heap) as url:
        engine = connect(EngineSettings(url=url, timeout_s=60))
        try:
            result = _head(command)
            result["engine"] = engine_facts(engine) | {"started_by_bench": not engine_url_arg}
            result.update(measure(engine, url))
        finally:
            engine.close()
    return _written(result, started, out)


def _head(command: str) -> dict[str, Any]:
    """A result's first fields: the command, when it started, the machine, the load average."""
    return {
        "command": command,
        "started_at": system_clock().isoformat(timespec="seconds"),
        "machine": machine(),
        "load_average_at_start": list(os.getloadavg()),
    }


def _written(result: dict[str, Any], started: float, out: Path) -> dict[str, Any]:
    """``result`` with its duration since ``started`` and the load average at its end,
    written to ``out`` as JSON."""
    result["duration_s"] = round(time.perf_counter() - started, 1)
    result["load_average_at_end"] = list(os.getloadavg())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


#: the ``govsearch`` command of this interpreter's environment
GOVSEARCH = Path(sys.executable).parent / "govsearch"


def serve(
    url: str, workers: int, directory: Path, extra: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """``govsearch serve`` on a free port against ``url``, its audit log and key in
    ``directory``, with ``extra`` environment (no other ``GOVSEARCH_*`` variable of ours
    leaks in); returns once ``/readyz`` answers 200 (or ends the bench after 120 s)."""
    port = free_port()
    env = server_env(url, directory, extra)
    log = (directory / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(GOVSEARCH), "serve", "--workers", str(workers), "--host", "127.0.0.1", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    served = f"http://127.0.0.1:{port}"
    await_ready(process, lambda: httpx.get(served + "/readyz", timeout=5).status_code == 200,
                "govsearch serve", directory / "serve.log", 120)
    return process, served


def server_env(url: str, directory: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server of the bench (``directory`` created): this process's,
    without any ``GOVSEARCH_*`` variable, the engine ``url``, an audit log and key in
    ``directory``, then ``extra``."""
    directory.mkdir(parents=True, exist_ok=True)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_")},
        "GOVSEARCH_ENGINE_URL": url,
        "GOVSEARCH_AUDIT_PATH": str(directory / "decisions.jsonl"),
        "GOVSEARCH_AUDIT_KEY_FILE": str(directory / "audit.key"),
        **(extra or {}),
    }


def await_ready(
    process: subprocess.Popen[bytes], ready: Callable[[], bool], name: str, log: Path, seconds: float
) -> None:
    """Return once ``ready()`` is true (an HTTP error counts as not yet); end the bench when
    ``process`` ended first (with its log) or after ``seconds`` (its process group killed)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{name} ended: {log.read_text()}")
        try:
            if ready():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    if _leads_group(process):  # a server that forks its workers into its own group
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process.kill()
    raise SystemExit(f"{name} was not ready within {seconds:g} s")


def _leads_group(process: subprocess.Popen[bytes]) -> bool:
    try:
        return os.getpgid(process.pid) == process.pid
    except ProcessLookupError:
        return False
