"""`govsearch policy publish` shows progress bars (reading, then writing) on a terminal and
nothing of them elsewhere: the command itself on a pseudo-terminal and on a pipe, and the bar redrawn once
per bulk batch (batches made small), on the real engine."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane import policy_store
from control_plane.cli import main
from tests.checkout import ROOT, checkout_env

GOVSEARCH = Path(sys.executable).parent / "govsearch"


def environment(engine_url: str, prefix: str, tmp_path: Path) -> dict[str, str]:
    """This checkout's code, none of the caller's govsearch settings, the test's own."""
    return checkout_env(
        {k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_")},
        GOVSEARCH_ENGINE_URL=engine_url,
        GOVSEARCH_POLICIES_INDEX_PREFIX=prefix,
        GOVSEARCH_KEYS_INDEX=f"{prefix}-keys",
        GOVSEARCH_AUDIT_PATH=str(tmp_path / "decisions.jsonl"),
    )


def publish_on_a_terminal(env: dict[str, str]) -> tuple[int, str, str]:
    """Run the command with its standard error on a pseudo-terminal: (code, out, err)."""
    leader, follower = pty.openpty()
    with subprocess.Popen(
        [str(GOVSEARCH), "policy", "publish", "policies", "--env", "live"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=follower,
    ) as process:
        os.close(follower)
        drawn = b""
        while True:
            ready, _, _ = select.select([leader], [], [], 120)
            if not ready:
                process.kill()
                raise AssertionError("no output from the command for 120 s")
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            drawn += chunk
        os.close(leader)
        out = process.stdout.read().decode() if process.stdout else ""
        code = process.wait(timeout=60)
    return code, out, drawn.decode()


def test_publish_draws_a_bar_on_a_terminal_and_none_on_a_pipe(
    engine_url: str, index_prefix: str, tmp_path: Path
) -> None:
    env = environment(engine_url, index_prefix, tmp_path)
    code, out, err = publish_on_a_terminal(env)
    assert code == 0, err
    assert "is live" in out and "\r" not in out, "the result goes to standard output, plain"
    reading, _, publishing = err.partition("\rpublishing policies [")
    assert reading.startswith("\rreading policies [") and reading.rstrip("\r\n").endswith("100%")
    assert reading.endswith("\n"), "the files read, its line ended, then"
    assert publishing and "100%" in publishing, "the index written"
    assert err.rstrip("\r\n").endswith("100%") and err.endswith("\n"), "the bar's line is ended"
    piped = subprocess.run(
        [str(GOVSEARCH), "policy", "publish", "policies", "--env", "staging"],
        cwd=ROOT, env=environment(engine_url, index_prefix, tmp_path), capture_output=True, text=True,
        check=False, timeout=300,
    )
    assert piped.returncode == 0, piped.stderr
    assert "\r" not in piped.stderr and "policies [" not in piped.stderr
    assert "is staging" in piped.stdout


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_bar_is_redrawn_once_per_bulk_batch(
    engine_url: str, index_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in environment(engine_url, index_prefix, tmp_path).items():
        if name.startswith("GOVSEARCH_"):
            monkeypatch.setenv(name, value)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(policy_store, "BATCH_DOCUMENTS", 5)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["policy", "publish", "policies", "--env", "live"]) == 0
    read, _, drawn = terminal.getvalue().partition("\rpublishing policies [")
    assert read.startswith("\rreading policies [") and read.endswith("100%\n")  # the bar before
    drawn = "\rpublishing policies [" + drawn
    lines = drawn.split("\r")[1:]
    assert len(lines) >= 3, drawn
    counts = [int(line.split("] ")[1].split("/")[0].replace(",", "")) for line in lines]
    total = int(lines[-1].split("/")[1].split()[0].replace(",", ""))
    assert counts == sorted(counts) and counts[-1] == total
    assert all(0 < b - a <= 5 for a, b in zip([0, *counts], counts, strict=False))
    assert drawn.endswith("100%\n") and drawn.count("\n") == 1
    assert "is live" in capsys.readouterr().out


def test_check_draws_the_reading_bar_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["policy", "check", "policies"]) == 0
    drawn = terminal.getvalue()
    assert drawn.startswith("\rreading policies [") and drawn.endswith("100%\n") and drawn.count("\n") == 1
    assert "policies," in capsys.readouterr().out
