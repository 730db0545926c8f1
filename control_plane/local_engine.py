"""Manage the embedded OpenSearch node of ``local_engine/`` (start, status, stop).

The node runs in the background as a plain ``java`` process; its pid, port and log path
are kept in ``DATA_DIR/engine.json`` so ``stop`` stops exactly the process ``start`` made.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAIN_CLASS = "dev.govsearch.engine.LocalNode"
PROJECT_DIR = Path(
    os.environ.get(
        "GOVSEARCH_LOCAL_ENGINE_DIR", Path(__file__).resolve().parent.parent / "local_engine"
    )
)


#: nodes started by this process, kept so the Popen object lives as long as the node
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


class LocalEngineError(Exception):
    """A one-line, user-facing reason why the local engine could not be managed."""


@dataclass(frozen=True)
class NodeState:
    pid: int
    port: int
    url: str
    log: str


def _state_file(data_dir: Path) -> Path:
    return data_dir / "engine.json"


def read_state(data_dir: Path) -> NodeState | None:
    try:
        return NodeState(**json.loads(_state_file(data_dir).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def probe(url: str, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """The cluster health if something answers at ``url``, else None."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/_cluster/health", timeout=timeout_s) as r:
            health: dict[str, Any] = json.loads(r.read())
            return health
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def build_classpath(project_dir: Path = PROJECT_DIR) -> str:
    """Build the launcher with Maven when its classpath is missing or stale."""
    classes = project_dir / "target" / "classes"
    classpath_file = project_dir / "target" / "classpath.txt"
    sources = [project_dir / "pom.xml", *project_dir.glob("src/main/java/**/*.java")]
    stale = not classpath_file.exists() or any(
        s.stat().st_mtime > classpath_file.stat().st_mtime for s in sources
    )
    if stale:
        if shutil.which("mvn") is None:
            raise LocalEngineError(
                "Maven (mvn) is not installed: it is needed once to fetch the OpenSearch jars"
                " (Debian: apt-get install maven)"
            )
        done = subprocess.run(
            ["mvn", "-B", "-q", "package", "-DskipTests"],
            cwd=project_dir,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0 or not classpath_file.exists():
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            raise LocalEngineError("building local_engine with Maven failed: " + " | ".join(tail))
    return f"{classes}{os.pathsep}{classpath_file.read_text().strip()}"


def start(
    port: int = 9200,
    data_dir: Path = Path(".govsearch/engine"),
    heap: str = "512m",
    timeout_s: float = 180.0,
) -> NodeState:
    """Start the node in the background and wait until the cluster is healthy."""
    data_dir = data_dir.resolve()
    url = f"http://127.0.0.1:{port}"
    state = read_state(data_dir)
    if state and _alive(state.pid) and probe(state.url):
        return state
    if shutil.which("java") is None:
        raise LocalEngineError(
            "Java is not installed: the local engine needs Java 17 (apt-get install openjdk-17-jre-headless)"
        )
    if _port_taken(port):
        raise LocalEngineError(
            f"port {port} is already in use on 127.0.0.1: stop what holds it or pass --port"
        )
    classpath = build_classpath()
    (data_dir / "logs").mkdir(parents=True, exist_ok=True)
    log = data_dir / "logs" / "node.out"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [
                "java",
                f"-Xms{heap}",
                f"-Xmx{heap}",
                "-XX:+UseSerialGC",
                "-cp",
                classpath,
                MAIN_CLASS,
                str(data_dir),
                str(port),
                str(port + 100),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _STARTED[process.pid] = process
    state = NodeState(pid=process.pid, port=port, url=url, log=str(log))
    _state_file(data_dir).write_text(json.dumps(state.__dict__))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _STARTED.pop(process.pid, None)
            _state_file(data_dir).unlink(missing_ok=True)
            raise LocalEngineError(
                f"the local engine exited with code {process.returncode}; see {log}"
            )
        health = probe(url, timeout_s=1.0)
        if health and health.get("status") in ("green", "yellow"):
            return state
        time.sleep(0.5)
    stop(data_dir)
    raise LocalEngineError(
        f"the local engine did not become healthy within {timeout_s:g}s; see {log}"
    )


def stop(data_dir: Path = Path(".govsearch/engine"), timeout_s: float = 30.0) -> NodeState | None:
    """Stop the process that ``start`` recorded; None when none was running."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        return None
    if _alive(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(state.pid) and time.monotonic() < deadline:
            _reap(state.pid)
            time.sleep(0.2)
        if _alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
    _reap(state.pid)
    _state_file(data_dir).unlink(missing_ok=True)
    return state


def _reap(pid: int) -> None:
    process = _STARTED.get(pid)
    if process is not None:
        if process.poll() is not None:
            del _STARTED[pid]
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
