"""`govsearch engine start|status|stop`, for real, including the error cases."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from control_plane.cli_support import EXIT_ENGINE_UNAVAILABLE
from tests.checkout import checkout_env


def govsearch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *args],
        capture_output=True,
        text=True,
        env=checkout_env(**(env or {})),
        timeout=240,
        check=False,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_start_status_stop(tmp_path: Path, starts_local_engine: None) -> None:
    port = free_port()
    started = govsearch("engine", "start", "--port", str(port), "--data-dir", str(tmp_path))
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"http://127.0.0.1:{port}"
        status = govsearch("engine", "status", "--json", "--data-dir", str(tmp_path))
        assert status.returncode == 0
        report = json.loads(status.stdout)
        assert report["up"] is True and report["status"] in ("green", "yellow") and report["pid"] > 0
        again = govsearch("engine", "start", "--port", str(port), "--data-dir", str(tmp_path))
        assert again.returncode == 0  # already running: same node, not a second one
    finally:
        stopped = govsearch("engine", "stop", "--data-dir", str(tmp_path))
    assert stopped.returncode == 0 and "stopped pid" in stopped.stdout
    down = govsearch("engine", "status", "--url", f"http://127.0.0.1:{port}", "--data-dir", str(tmp_path))
    assert down.returncode == EXIT_ENGINE_UNAVAILABLE and "not answering" in down.stdout
    assert "no local engine" in govsearch("engine", "stop", "--data-dir", str(tmp_path)).stdout


def test_port_taken_is_a_one_line_error(tmp_path: Path, starts_local_engine: None) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = govsearch("engine", "start", "--port", str(port), "--data-dir", str(tmp_path))
    assert result.returncode == EXIT_ENGINE_UNAVAILABLE
    assert result.stderr.strip() == (
        f"govsearch: error: port {port} is already in use on 127.0.0.1: stop what holds it or pass --port"
    )


def test_java_missing(tmp_path: Path) -> None:
    result = govsearch(
        "engine",
        "start",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path),
        env={"PATH": str(tmp_path)},
    )
    assert result.returncode == EXIT_ENGINE_UNAVAILABLE
    assert "Java is not installed" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_maven_missing_when_the_launcher_needs_building(tmp_path: Path) -> None:
    project = tmp_path / "local_engine"
    shutil.copytree(
        Path(__file__).resolve().parents[2] / "local_engine", project, ignore=shutil.ignore_patterns("target")
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = shutil.which("java")
    assert java is not None
    (bin_dir / "java").symlink_to(java)
    result = govsearch(
        "engine",
        "start",
        "--port",
        str(free_port()),
        "--data-dir",
        str(tmp_path / "data"),
        env={"PATH": str(bin_dir), "GOVSEARCH_LOCAL_ENGINE_DIR": str(project)},
    )
    assert result.returncode == EXIT_ENGINE_UNAVAILABLE
    assert "Maven (mvn) is not installed" in result.stderr


def test_node_not_up_in_time_names_its_log(tmp_path: Path, starts_local_engine: None) -> None:
    result = govsearch(
        "engine", "start", "--port", str(free_port()), "--data-dir", str(tmp_path), "--timeout", "0.5"
    )
    assert result.returncode == EXIT_ENGINE_UNAVAILABLE
    log = tmp_path.resolve() / "logs" / "node.out"
    assert f"did not become healthy within 0.5s; see {log}" in result.stderr
    assert not (tmp_path / "engine.json").exists()  # the half-started node was stopped
