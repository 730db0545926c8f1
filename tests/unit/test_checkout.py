"""Children that tests start run the checkout under test (:mod:`tests.checkout`).

The virtual environment's editable install points at one checkout, and its finder comes
after ``sys.path``: a child that does not find this checkout on its path (a ``govsearch``
console script, ``python -c`` from another directory) imported that one's code. In a git
worktree the drills of the audit writer served the main checkout's code, and passed or
failed on it. Here a child is run as those are (``python -c`` from a directory with no
package, which is where a console script's path starts) with no ``PYTHONPATH`` of the
caller's, and must import this checkout's ``control_plane``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.checkout import ROOT, checkout_env
from tests.cli.test_publish_progress import environment as publish_environment
from tests.drills.test_audit_two_writers import serve_environment as two_writers_environment
from tests.drills.test_audit_writer import serve_environment as writer_environment

WHERE = "import sys, control_plane; print(control_plane.__file__); print(*sys.path, sep='\\n')"


def imported(env: dict[str, str], cwd: Path) -> tuple[Path, list[str]]:
    """The checkout whose ``control_plane`` a child in ``env`` imports, and its path."""
    done = subprocess.run(
        [sys.executable, "-c", WHERE], cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
        check=True,
    )
    module, *path = done.stdout.splitlines()
    return Path(module).resolve().parents[1], path


@pytest.fixture()
def bare(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``PYTHONPATH`` of the caller's (as ``make drills`` runs in a worktree); the
    directory children start in."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    return tmp_path


ENVIRONMENTS: dict[str, Callable[[Path], dict[str, str]]] = {
    "checkout_env": lambda tmp: checkout_env(),
    "audit_writer drill": lambda tmp: writer_environment(tmp, "http://127.0.0.1:9"),
    "audit_two_writers drill": lambda tmp: two_writers_environment(tmp, "http://127.0.0.1:9"),
    "publish progress": lambda tmp: publish_environment("http://127.0.0.1:9", "p", tmp),
}


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
def test_a_child_started_in_the_environment_runs_this_checkout(name: str, bare: Path) -> None:
    env = ENVIRONMENTS[name](bare)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    checkout, _ = imported(env, bare)
    assert checkout == ROOT


def test_a_pythonpath_the_caller_had_is_kept_after_the_checkout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    (other / "control_plane").mkdir(parents=True)
    (other / "control_plane" / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(other))
    env = checkout_env(GOVSEARCH_ENGINE_URL="http://127.0.0.1:9")
    assert env["PYTHONPATH"] == os.pathsep.join([str(ROOT), str(other)])
    assert env["GOVSEARCH_ENGINE_URL"] == "http://127.0.0.1:9"
    checkout, path = imported(env, tmp_path)
    assert checkout == ROOT and path.index(str(ROOT)) < path.index(str(other))
    base = {"HOME": "/nowhere"}  # a given base, not this process's environment
    assert checkout_env(base) == {"HOME": "/nowhere", "PYTHONPATH": str(ROOT)}
