"""Drill: the MCP server never opens an unauthenticated door the HTTP API keeps shut.

The ``search_products`` tool takes no API key, so with ``auth.search_requires_key`` on,
``python -m agent_gateway.mcp_server --http`` must refuse to start (docs/agent_gateway.md,
"MCP server"): it exits non-zero with the documented message on stderr, before anything
binds the port, whether the setting comes from the environment or the configuration file.
What this attacks is a server that serves streamable HTTP anyway (the check skipped,
moved after ``run``, or reading the wrong setting): then the port answers and the test fails.

Controls, so the refusal is not just a server that never starts: with the setting off,
``--http`` listens on the port (and is terminated cleanly); with it on, stdio mode starts
and exits cleanly when its stdin closes, without the refusal.

No engine is needed: the engine is first contacted when the tool is called, so every
server here is pointed at a port where nothing listens."""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.agent.conftest import ROOT

REFUSAL = (
    "auth.search_requires_key is on, but the MCP tool takes no API key:"
    " serve it over stdio (the agent host's process boundary is its access control)"
)
NO_ENGINE = "http://127.0.0.1:1"
"""nothing listens there: starting the server must not need the engine"""
SETTLE_S = 60
"""the bound on a subprocess's start or exit (a hang fails the test, it never paces it)"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return False
    return True


def _environment(tmp_path: Path, requires_key: bool, via: str) -> dict[str, str]:
    env = {
        key: value for key, value in os.environ.items()
        if key not in ("GOVSEARCH_SEARCH_REQUIRES_KEY", "GOVSEARCH_CONFIG")
    }
    env.update({"GOVSEARCH_ENGINE_URL": NO_ENGINE, "GOVSEARCH_AUDIT_PATH": str(tmp_path / "decisions.jsonl")})
    flag = "true" if requires_key else "false"
    if via == "env":
        env["GOVSEARCH_SEARCH_REQUIRES_KEY"] = flag
    else:  # the configuration file: the same setting, read by load_settings
        config = tmp_path / "govsearch.yaml"
        config.write_text(f"auth:\n  search_requires_key: {flag}\n", encoding="utf-8")
        env["GOVSEARCH_CONFIG"] = str(config)
    return env


def _server(*args: str) -> list[str]:
    return [sys.executable, "-m", "agent_gateway.mcp_server", *args]


class Running:
    """A server subprocess whose stderr is read line by line (uvicorn announces the bound
    socket there), until a given line or the process's exit, whichever comes first."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            args, env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._pump, daemon=True)
        self.reader.start()

    def _pump(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, text: str) -> bool:
        """True once a stderr line holds ``text``; False when stderr ends (the process exited)."""
        while True:
            line = self.lines.get(timeout=SETTLE_S)
            if line is None:
                return False
            self.seen.append(line)
            if text in line:
                return True

    @property
    def stderr(self) -> str:
        return " ".join("".join(self.seen).split())

    def stop(self) -> int:
        """SIGTERM, then the exit code (killed if it does not exit within the bound)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            return self.process.wait(timeout=SETTLE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.reader.join(timeout=SETTLE_S)  # the pipe's end: the server has exited
            while not self.lines.empty():  # what it wrote after the last line read
                line = self.lines.get_nowait()
                if line is not None:
                    self.seen.append(line)
            assert self.process.stderr is not None
            self.process.stderr.close()


def _announced(port: int) -> str:
    return f"Uvicorn running on http://127.0.0.1:{port}"


@pytest.mark.parametrize("via", ["env", "config"])
def test_http_refuses_to_start_when_search_requires_a_key(tmp_path: Path, via: str) -> None:
    port = _free_port()
    server = Running(_server("--http", "--port", str(port)), _environment(tmp_path, True, via))
    try:
        listening = server.until(_announced(port))
        if listening:  # the broken guarantee: prove the door is open before stopping it
            assert not _listens(port), f"the MCP server listens on {port}:\n{server.stderr}"
    finally:
        code = server.stop()
    assert not listening, server.stderr
    assert code > 0, (code, server.stderr)  # it exited by itself, with an error (argparse: 2)
    assert REFUSAL in server.stderr, server.stderr
    assert "Started server process" not in server.stderr
    assert not _listens(port), f"something listens on {port} after the refusal"


def test_http_listens_when_search_needs_no_key(tmp_path: Path) -> None:
    """The control: the same command with the setting off serves streamable HTTP on the port."""
    port = _free_port()
    server = Running(_server("--http", "--port", str(port)), _environment(tmp_path, False, "env"))
    try:
        assert server.until(_announced(port)), "the server exited before listening:\n" + server.stderr
        assert _listens(port)
    finally:
        code = server.stop()
    assert REFUSAL not in server.stderr
    assert code in (0, -15), server.stderr  # a clean shutdown on SIGTERM
    assert not _listens(port)


def test_stdio_starts_when_search_requires_a_key(tmp_path: Path) -> None:
    """The control: stdio is the allowed transport with the setting on; it serves until
    its stdin closes (here at once) and exits cleanly, without the refusal."""
    done = subprocess.run(
        _server(), env=_environment(tmp_path, True, "env"), cwd=str(ROOT),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SETTLE_S,
    )
    assert done.returncode == 0, done.stderr
    assert REFUSAL not in " ".join(done.stderr.split()), done.stderr
    assert "usage:" not in done.stderr
