"""Every command that loads a policy directory reports bad files the same way: one
``file:line:column: code: message`` line per problem on stderr, exit status 3
(:data:`EXIT_INVALID_INPUT`), never a traceback; on the real engine. And every exit status
of the table in docs/cli.md is reached by the command that documents it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane.cli_support import (
    EXIT_CODES,
    EXIT_ENGINE_UNAVAILABLE,
    EXIT_INVALID_INPUT,
    EXIT_OK,
    EXIT_USAGE,
)
from control_plane.config import Settings
from tests.lifecycle.test_cli import cli_env, key_for, run  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
LOCATED = re.compile(r"[\w./-]+:\d+:\d+: [a-z_]+: \S.*")
#: (what is broken, file, bytes appended, the error line it gives)
BROKEN = {
    "policy_nul": ("food/oranges.yaml", b"# a NUL: \x00\n", "food/oranges.yaml:{n}:10: bad_character: "),
    "policy_latin1": ("food/oranges.yaml", "# caf\xe9\n".encode("latin-1"),
                      "food/oranges.yaml:{n}:6: bad_encoding: "),
    "vocabulary_bel": ("vocabularies/allergens.yaml", b"# \x07\n",
                       "vocabularies/allergens.yaml:{n}:3: bad_character: "),
    "governance_syntax": ("governance.yaml", b"max_pins: [3\n", "governance.yaml:{m}:1: yaml_syntax: "),
    "tests_bel": ("food/tests/oranges.yaml", b"# \x07\n", "food/tests/oranges.yaml:{n}:3: bad_character: "),
}


def broken_directory(tmp_path: Path, what: str) -> tuple[Path, str]:
    directory = tmp_path / what
    shutil.copytree(ROOT / "policies", directory)
    file, appended, expected = BROKEN[what]
    path = directory / file
    path.write_bytes(path.read_bytes() + appended)
    lines = path.read_bytes().count(b"\n")
    return directory, expected.format(n=lines, m=lines + 1)


def commands(directory: Path, key: str) -> dict[str, list[str]]:
    folder = str(directory)
    return {
        "check": ["policy", "check", folder],
        "lint": ["policy", "lint", folder],
        "test": ["policy", "test", folder],
        "apply": ["policy", "apply", folder, "--api-key", key],
        "publish": ["policy", "publish", folder, "--env", "staging"],
        "search": ["search", "chocolate", "--policies", folder],
        "compile": ["compile", "chocolate", "--policies", folder],
        "diff": ["policy", "diff", "--from", "live", "--to", folder,
                 "--queries", str(ROOT / "policies" / "regression" / "queries.txt")],
    }


#: the commands that read a directory's tests as well as its policies
READ_TESTS = {"check", "lint", "test", "apply", "publish"}


def test_every_directory_command_reports_bad_files_located_with_exit_3(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    assert run(capsys, "policy", "publish", "policies", "--env", "live")[0] == EXIT_OK
    key = key_for(capsys, "alice", "author")
    for what in BROKEN:
        directory, expected = broken_directory(tmp_path, what)
        for name, argv in commands(directory, key).items():
            code, out, err = run(capsys, *argv)
            if what == "tests_bel" and name not in READ_TESTS:
                assert code == EXIT_OK, (name, err)  # the tests are not theirs to read
                continue
            assert code == EXIT_INVALID_INPUT, (what, name, out, err)
            lines = err.splitlines()
            assert lines and all(LOCATED.fullmatch(line) for line in lines), (what, name, err)
            assert any(line.startswith(expected) for line in lines), (what, name, err)


def test_check_fails_a_directory_whose_tests_are_broken(tmp_path: Path) -> None:
    """In a fresh process: no engine needed, and what a shell sees (no traceback)."""
    directory, expected = broken_directory(tmp_path, "tests_bel")
    done = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", "policy", "check", str(directory)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    assert done.returncode == EXIT_INVALID_INPUT, done.stderr
    assert done.stderr.startswith(expected) and "Traceback" not in done.stderr
    assert done.stdout == ""
    clean = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", "policy", "check", str(ROOT / "policies")],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )
    assert clean.returncode == EXIT_OK and "test cases" in clean.stdout, clean.stderr


def test_check_lists_policy_and_test_problems_in_one_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory, policy_error = broken_directory(tmp_path, "policy_nul")
    tests = directory / "food" / "tests" / "oranges.yaml"
    tests.write_text(tests.read_text() + "- name: x\n  intent: y\n  expect: {applid: [z]}\n")
    code, _, err = run(capsys, "policy", "check", str(directory))
    assert code == EXIT_INVALID_INPUT
    assert err.startswith(policy_error)
    assert "food/tests/oranges.yaml:" in err and ": unknown_field: " in err


def test_a_broken_configuration_file_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "govsearch.yaml"
    config.write_bytes(b"engine: {url: \x00}\n")
    code, _, err = run(capsys, "--config", str(config), "policy", "check", str(ROOT / "policies"))
    assert code == EXIT_INVALID_INPUT and err.startswith("govsearch: error: ") and len(err.splitlines()) == 1
    code, _, err = run(capsys, "--config", str(tmp_path / "none.yaml"), "policy", "check")
    assert code == EXIT_USAGE and "configuration file not found" in err


def test_an_unreadable_configuration_file_is_a_usage_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``--config`` that is there and cannot be read (no permission: the tests run as root,
    so the read is refused in process) exits 2 with one line, as a missing one does."""
    config = tmp_path / "govsearch.yaml"
    config.write_text("engine: {url: 'http://127.0.0.1:1'}\n", encoding="utf-8")
    read_text = Path.read_text

    def refused(path: Path, *args: object, **kwargs: object) -> str:
        if path == config:
            raise PermissionError(13, "Permission denied", str(path))
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", refused)
    code, _, err = run(capsys, "--config", str(config), "policy", "check", str(ROOT / "policies"))
    assert code == EXIT_USAGE and len(err.splitlines()) == 1
    assert err.startswith("govsearch: error: cannot read the configuration file")
    assert "Permission denied" in err


def named_missing(missing: str) -> dict[str, list[str]]:
    """Every command that takes a path, naming ``missing`` where the path goes."""
    return {
        "load-catalog --profile": ["load-catalog", "--profile", missing],
        "load-catalog --file": ["load-catalog", "--file", missing],
        "policy check": ["policy", "check", missing],
        "policy test": ["policy", "test", missing],
        "policy lint": ["policy", "lint", missing],
        "policy apply": ["policy", "apply", missing],  # no key given: the path comes first
        "policy publish": ["policy", "publish", missing, "--env", "staging"],
        "search --policies": ["search", "chocolate", "--policies", missing],
        "compile --policies": ["compile", "chocolate", "--policies", missing],
        "policy diff --to": ["policy", "diff", "--to", missing],
        "policy diff --from": ["policy", "diff", "--from", missing],
        "policy diff --queries": ["policy", "diff", "--queries", missing],
        "--config": ["--config", missing, "policy", "check"],
    }


def test_a_path_named_on_the_command_line_that_is_not_there_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line naming it, before the engine is reached (nothing answers at the discard port:
    a command that connected first would exit 6) or a key is asked for (apply would exit 4)."""
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("GOVSEARCH_API_KEY", raising=False)
    missing = str(tmp_path / "missing")
    for name, argv in named_missing(missing).items():
        code, out, err = run(capsys, *argv)
        assert code == EXIT_USAGE, (name, code, err)
        assert err.startswith("govsearch: error: ") and len(err.splitlines()) == 1, (name, err)
        assert f"not found: {missing}" in err and out == "", (name, err)


def test_a_missing_profile_named_on_the_command_line_is_one_line_in_a_shell(tmp_path: Path) -> None:
    """What a shell sees: status 2, one line, no traceback (docs/cli.md's exit-2 row)."""
    done = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", "load-catalog", "--profile", str(tmp_path / "p.yaml")],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "GOVSEARCH_ENGINE_URL": "http://127.0.0.1:9"},
    )
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr == f"govsearch: error: catalog profile not found: {tmp_path / 'p.yaml'}\n"
    assert done.stdout == ""


def test_a_path_the_configuration_names_that_is_not_there_is_invalid_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same missing paths from the configuration file are its problem: exit 3, one line;
    also before the engine is reached."""
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", "http://127.0.0.1:9")
    gone = tmp_path / "gone"
    cases = {  # setting, command, what the line says
        "catalog: {profile: %s/profile.yaml}": (["load-catalog"], "invalid catalog profile "),
        "catalog: {file: %s/products.ndjson}": (["load-catalog"], "error: catalog file not found: "),
        "policies: {dir: %s/policies}": (["policy", "check"], f"{gone}/policies:0:0: io_error: "),
    }
    for setting, (argv, expected) in cases.items():
        config = tmp_path / "govsearch.yaml"
        config.write_text(setting % gone + "\n", encoding="utf-8")
        code, out, err = run(capsys, "--config", str(config), *argv)
        assert code == EXIT_INVALID_INPUT, (setting, code, err)
        assert len(err.splitlines()) == 1 and expected in err and str(gone) in err, (setting, err)
        assert out == "", setting


def test_a_catalog_file_that_cannot_be_read_is_invalid_input_not_a_traceback(
    engine_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """There but not readable as a file (a directory): exit 3, said on stderr, before any index
    is created (the file is read first)."""
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", engine_url)
    code, out, err = run(capsys, "load-catalog", "--file", str(tmp_path))
    assert code == EXIT_INVALID_INPUT, err
    assert err.startswith("govsearch: error: ") and f"{tmp_path}: cannot read the catalog file: " in err
    assert out == ""


def test_demo_with_a_configured_catalog_file_that_is_not_there_is_invalid_input(
    engine_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``demo`` reads the configured catalog before it serves anything: exit 3, not a
    traceback (the engine answers, so demo starts none)."""
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", engine_url)
    config = tmp_path / "govsearch.yaml"
    config.write_text(f"catalog: {{file: {tmp_path}/gone.ndjson}}\n", encoding="utf-8")
    code, out, err = run(capsys, "--config", str(config), "demo", "--port", "9")
    assert code == EXIT_INVALID_INPUT, err
    assert err.startswith("govsearch: error: ")
    assert f"{tmp_path}/gone.ndjson: cannot read the catalog file" in err
    assert "Traceback" not in err and "API on" not in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        run(capsys, "policy", "no-such-action")
    assert raised.value.code == EXIT_USAGE
    code, _, err = run(capsys, "policy", "lint", str(ROOT / "policies"), "--now", "soon")
    assert code == EXIT_USAGE and "not an ISO 8601 time" in err


def test_no_engine_exits_6(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", "http://127.0.0.1:9")  # discard port: nothing answers
    code, _, err = run(capsys, "search", "chocolate")
    assert code == EXIT_ENGINE_UNAVAILABLE and err.startswith("govsearch: error: ")
    assert len(err.splitlines()) == 1


def test_the_cli_docs_list_every_exit_status() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\d)` \| `(EXIT_\w+)` \|", text, flags=re.MULTILINE))
    import control_plane.cli_support as support

    assert {int(code) for code in rows} == set(EXIT_CODES)
    assert all(getattr(support, name) == int(code) for code, name in rows.items())
