"""Manage the embedded OpenSearch nodes of ``local_engine/`` (start, status, stop).

Each node runs in the background as a plain ``java`` process; their pids, ports and log
paths are kept in ``DATA_DIR/engine.json`` so ``stop`` stops exactly the processes ``start``
made. One node (the default) runs single-node discovery; ``nodes=3`` starts three nodes on
loopback that form one cluster (node ``i``, from 1, on HTTP port ``port + i - 1`` and transport
port ``port + 100 + i - 1``, data under ``DATA_DIR/node-<i>``), see ``docs/adr/0010-local-cluster.md``.
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
    """A started node; for a cluster, the first node, with every node in ``members``."""

    pid: int
    port: int
    url: str
    log: str
    cluster: str = "govsearch-local"
    members: tuple[NodeState, ...] = ()
    """every node of a cluster started with ``nodes > 1`` (this one first); () for one node"""

    @property
    def nodes(self) -> tuple[NodeState, ...]:
        return self.members or (self,)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"pid": self.pid, "port": self.port, "url": self.url, "log": self.log}
        data["cluster"] = self.cluster
        if self.members:
            data["members"] = [member.to_json() for member in self.members]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NodeState:
        members = tuple(cls.from_json(member) for member in data.pop("members", ()))
        return cls(**data, members=members)


def _state_file(data_dir: Path) -> Path:
    return data_dir / "engine.json"


def read_state(data_dir: Path) -> NodeState | None:
    try:
        return NodeState.from_json(json.loads(_state_file(data_dir).read_text()))
    except (OSError, ValueError, TypeError, AttributeError):
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
        classpath_file.touch()  # Maven leaves an unchanged classpath file untouched
    return f"{classes}{os.pathsep}{classpath_file.read_text().strip()}"


def start(
    port: int = 9200,
    data_dir: Path = Path(".govsearch/engine"),
    heap: str = "512m",
    timeout_s: float = 180.0,
    *,
    nodes: int = 1,
    cluster_name: str | None = None,
) -> NodeState:
    """Start ``nodes`` nodes in the background and wait until they form one healthy cluster
    (yellow or green, every node joined). ``cluster_name`` defaults to ``govsearch-local``
    for one node and ``govsearch-local-<port>`` for several, so two clusters on one host
    never join each other."""
    if nodes < 1:
        raise LocalEngineError(f"--nodes must be at least 1, not {nodes}")
    data_dir = data_dir.resolve()
    url = f"http://127.0.0.1:{port}"
    state = read_state(data_dir)
    if state and all(_alive(node.pid) for node in state.nodes) and probe(state.url):
        return state
    if state:  # a node of an earlier start died: stop what is left, start afresh
        stop(data_dir)
    if shutil.which("java") is None:
        raise LocalEngineError(
            "Java is not installed: the local engine needs Java 17 (apt-get install openjdk-17-jre-headless)"
        )
    ports = [(port + i, port + 100 + i) for i in range(nodes)]
    for http, transport in ports:
        for taken in (http, transport):
            if _port_taken(taken):
                raise LocalEngineError(
                    f"port {taken} is already in use on 127.0.0.1: stop what holds it or pass --port"
                )
    cluster = cluster_name or ("govsearch-local" if nodes == 1 else f"govsearch-local-{port}")
    names = ["govsearch-local-1"] if nodes == 1 else [f"{cluster}-{i + 1}" for i in range(nodes)]
    classpath = build_classpath()
    started: list[tuple[subprocess.Popen[bytes], NodeState]] = []
    for i, (http, transport) in enumerate(ports):
        home = data_dir if nodes == 1 else data_dir / f"node-{i + 1}"
        options = ["--cluster-name", cluster, "--node-name", names[i]]
        if nodes > 1:
            seeds = ",".join(f"127.0.0.1:{t}" for _, t in ports)
            options += ["--seed-hosts", seeds, "--initial-cluster-manager-nodes", ",".join(names)]
        started.append(_launch(classpath, home, http, transport, heap, cluster, options))
    first = started[0][1]
    members = tuple(node for _, node in started) if nodes > 1 else ()
    state = NodeState(first.pid, first.port, first.url, first.log, cluster, members)
    _state_file(data_dir).write_text(json.dumps(state.to_json()))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for process, node in started:
            if process.poll() is not None:
                stop(data_dir)
                raise LocalEngineError(
                    f"the local engine exited with code {process.returncode}; see {node.log}"
                )
        health = probe(url, timeout_s=1.0)
        if (
            health
            and health.get("status") in ("green", "yellow")
            and health.get("number_of_nodes", 1) >= nodes
        ):
            return state
        time.sleep(0.5)
    stop(data_dir)
    raise LocalEngineError(
        f"the local engine did not become healthy within {timeout_s:g}s; see {first.log}"
    )


def _launch(
    classpath: str, home: Path, http: int, transport: int, heap: str, cluster: str, options: list[str]
) -> tuple[subprocess.Popen[bytes], NodeState]:
    (home / "logs").mkdir(parents=True, exist_ok=True)
    log = home / "logs" / "node.out"
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
                str(home),
                str(http),
                str(transport),
                *options,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    _STARTED[process.pid] = process
    return process, NodeState(
        pid=process.pid, port=http, url=f"http://127.0.0.1:{http}", log=str(log), cluster=cluster
    )


def stop(data_dir: Path = Path(".govsearch/engine"), timeout_s: float = 30.0) -> NodeState | None:
    """Stop the processes that ``start`` recorded (every node of a cluster); None when none
    was running."""
    data_dir = data_dir.resolve()
    state = read_state(data_dir)
    if state is None:
        return None
    alive = [node.pid for node in state.nodes if _alive(node.pid)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a paused node cannot handle SIGTERM
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(_alive(pid) for pid in alive) and time.monotonic() < deadline:
        for pid in alive:
            _reap(pid)
        time.sleep(0.2)
    for pid in alive:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for node in state.nodes:
        _reap(node.pid)
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
