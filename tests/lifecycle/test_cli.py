"""The lifecycle from the command line, on the real engine: `govsearch keys`, `policy test`,
`lint`, `apply`, `approve`, `promote`, `diff`, `disable`, `history`, `export`, `rollback`
and `suggest`, with the same refusals as the API."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control_plane.api import create_app
from control_plane.bootstrap import Ready, profile_of
from control_plane.cli import main
from control_plane.cli_support import EXIT_FINDINGS, EXIT_REFUSED, EXIT_USAGE
from control_plane.config import Settings, load_settings
from control_plane.loader import load_policy_set
from control_plane.service import SearchService
from tests.clocks import FIXED_CLOCK

ROOT = Path(__file__).resolve().parents[2]
CREAMERS = """id: coffee-creamers
title: '"creamer" means coffee creamers'
owner: merch-team-grocery
priority: 60
trigger:
  phrase: [creamer, creamers]
rules:
  - category: {values: [Coffee creamers]}
"""
CREAMER_TEST = """- name: creamer shows coffee creamers only
  intent: creamer
  expect:
    applied: [coffee-creamers]
    results: {min_hits: 3, every: {category: {eq: %s}}}
"""


@pytest.fixture()
def cli_env(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, ready: Ready, index_prefix: str, tmp_path: Path
) -> Settings:
    monkeypatch.setenv("GOVSEARCH_ENGINE_URL", settings.engine.url)
    monkeypatch.setenv("GOVSEARCH_POLICIES_INDEX_PREFIX", index_prefix)
    monkeypatch.setenv("GOVSEARCH_KEYS_INDEX", f"{index_prefix}-keys")
    monkeypatch.setenv("GOVSEARCH_AUDIT_PATH", str(tmp_path / "audit" / "decisions.jsonl"))
    monkeypatch.delenv("GOVSEARCH_API_KEY", raising=False)
    monkeypatch.chdir(ROOT)
    return load_settings(environ={
        "GOVSEARCH_ENGINE_URL": settings.engine.url,
        "GOVSEARCH_POLICIES_INDEX_PREFIX": index_prefix,
        "GOVSEARCH_KEYS_INDEX": f"{index_prefix}-keys",
        "GOVSEARCH_AUDIT_PATH": str(tmp_path / "audit" / "decisions.jsonl"),
    })


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def key_for(capsys: pytest.CaptureFixture[str], principal: str, *roles: str) -> str:
    code, out, err = run(capsys, "keys", "create", "--principal", principal,
                         *[arg for role in roles for arg in ("--role", role)])
    assert code == 0, err
    assert "shown once" in err
    return out.strip()


def authored_directory(tmp_path: Path, category: str) -> Path:
    directory = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", directory)
    (directory / "grocery").mkdir()
    (directory / "grocery" / "creamers.yaml").write_text(CREAMERS)
    (directory / "grocery" / "tests").mkdir()
    (directory / "grocery" / "tests" / "creamers.yaml").write_text(CREAMER_TEST % category)
    return directory


def test_the_lifecycle_from_the_command_line(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "policy", "publish", "policies", "--env", "live")[0] == 0
    original = load_policy_set(ROOT / "policies").version
    alice = key_for(capsys, "alice", "author", "approver")
    bob = key_for(capsys, "bob", "approver")

    # policy test: a failing expectation exits 1 and says which case and why
    directory = authored_directory(tmp_path, "Teas")
    code, out, _ = run(capsys, "policy", "test", str(directory))
    assert code == 1
    assert "creamer shows coffee creamers only" in out and "FAIL" in out.upper()
    code, out, _ = run(capsys, "policy", "test", str(directory), "--json")
    report = json.loads(out)
    assert code == 1 and report["passed"] is False and report["failed"] == 1
    (directory / "grocery" / "tests" / "creamers.yaml").write_text(CREAMER_TEST % '"Coffee creamers"')
    code, out, _ = run(capsys, "policy", "test", str(directory))
    assert code == 0, out
    # --now: the instant for cases that pin none (the demo suite pins what a window moves)
    code, out, _ = run(capsys, "policy", "test", str(directory), "--now", "2026-12-10T12:00:00Z", "--json")
    assert code == 0 and json.loads(out)["now"] == "2026-12-10T12:00:00Z", out
    code, _, err = run(capsys, "policy", "test", str(directory), "--now", "soon")
    assert code == EXIT_USAGE and "not an ISO 8601 time: 'soon'" in err

    # policy lint: clean directory exits 0
    code, out, _ = run(capsys, "policy", "lint", str(directory))
    assert code == 0, out

    # apply to staging (author), promote refused until tested and approved by someone else
    code, _, err = run(capsys, "policy", "apply", str(directory), "--api-key", alice, "--json")
    assert code == 0, err
    staged = load_policy_set(directory).version
    code, _, err = run(capsys, "policy", "promote", "--api-key", bob)
    assert code == EXIT_REFUSED and "refused (untested_version)" in err
    code, _, err = run(capsys, "policy", "test", "--version", "staging", "--api-key", alice)
    assert code == 0, err
    code, _, err = run(capsys, "policy", "approve", "--api-key", alice)
    assert code == EXIT_REFUSED and "refused (self_approval)" in err
    code, _, err = run(capsys, "policy", "approve", "--api-key", "gsk_nope")
    assert code == EXIT_REFUSED and "not valid" in err
    code, _, err = run(capsys, "policy", "approve")
    assert code == EXIT_REFUSED and "needs an API key" in err
    assert run(capsys, "policy", "approve", "--api-key", bob, "--comment", "ok")[0] == 0

    # diff: the new policy changes "creamer" and nothing else in the query file
    queries = tmp_path / "queries.txt"
    queries.write_text("# regression intents\ncreamer\noranges\ncheap chocolate\n")
    code, out, _ = run(capsys, "policy", "diff", "--from", "live", "--to", "staging",
                       "--queries", str(queries), "--json")
    diff = json.loads(out)
    assert code == 0
    assert [change["intent"] for change in diff["changed"]] == ["creamer"]
    assert diff["changed"][0]["policies"]["added"] == ["coffee-creamers"]
    code, out, _ = run(capsys, "policy", "diff", "--from", "live", "--to", str(directory),
                       "--queries", str(queries))
    assert code == 0 and "creamer" in out

    code, out, err = run(capsys, "policy", "promote", "--api-key", bob, "--reason", "creamers")
    assert code == 0, err
    assert "live" in out and staged in out

    # the kill switch, the history, export and rollback
    code, _, err = run(capsys, "policy", "disable", "coffee-creamers", "--reason", "complaints",
                       "--api-key", bob)
    assert code == 0, err
    code, out, _ = run(capsys, "policy", "history", "--policy", "coffee-creamers", "--json")
    events = json.loads(out)["events"]
    assert [e["action"] for e in events][:2] == ["disable", "promote"]
    assert events[0]["reason"] == "complaints" and events[0]["actor"] == "bob"
    code, out, _ = run(capsys, "policy", "history", "--refusals")
    assert "REFUSED self_approval" in out and "REFUSED untested_version" in out

    exported = tmp_path / "exported"
    code, out, err = run(capsys, "policy", "export", "--env", "live", str(exported))
    assert code == 0, err
    live = json.loads(run(capsys, "policy", "status", "live", "--json")[1])
    assert load_policy_set(exported).version == live["version"]
    assert (exported / "grocery" / "creamers.yaml").is_file()  # the layout it was applied with
    assert not load_policy_set(exported).policy("coffee-creamers").enabled
    assert run(capsys, "policy", "export", "--env", "live", str(exported))[0] == EXIT_USAGE  # not empty

    code, _, err = run(capsys, "policy", "rollback", "--to", original, "--api-key", bob)
    assert code == 0, err
    assert json.loads(run(capsys, "policy", "status", "live", "--json")[1])["version"] == original


def test_lint_reports_findings_with_locations_and_exits_1_on_errors(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", directory)
    (directory / "broken.yaml").write_text(
        "id: broken\ntitle: t\nowner: o\ntrigger: {phrase: [creamer]}\nrules:\n"
        "  - filter: {field: labels, values: [kosher]}\n  - exclude: {field: labels, values: [kosher]}\n"
    )
    code, out, _ = run(capsys, "policy", "lint", str(directory))
    assert code == 1
    assert "broken.yaml:1: error: contradictory_filters" in out
    code, out, _ = run(capsys, "policy", "lint", str(directory), "--json")
    findings = json.loads(out)["findings"]
    assert {"code": "untested_policy", "policy_id": "broken"}.items() <= next(
        f for f in findings if f["code"] == "untested_policy"
    ).items()


def test_keys_list_and_revoke(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    key = key_for(capsys, "erin", "auditor")
    code, out, _ = run(capsys, "keys", "list", "--json")
    entries = json.loads(out)
    assert code == 0 and [e["principal"] for e in entries] == ["erin"]
    assert "sha256" not in entries[0] and key not in out
    assert run(capsys, "keys", "create", "--principal", "x", "--role", "owner")[0] == EXIT_USAGE
    assert run(capsys, "keys", "revoke", entries[0]["key_id"])[0] == 0
    assert run(capsys, "keys", "revoke", "000000000000")[0] == EXIT_FINDINGS  # no such key


def test_suggest_drafts_into_staging_from_the_decision_log(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "policy", "publish", "policies", "--env", "live")[0] == 0
    alice = key_for(capsys, "alice", "author")
    service = SearchService(cli_env, _engine(cli_env), profile_of(cli_env))
    client = TestClient(create_app(service, clock=FIXED_CLOCK))
    for _ in range(2):
        assert client.post("/v1/search", json={"intent": "chocolate zzyzx"}).status_code == 200
    client.close()
    service.close()

    code, out, err = run(capsys, "policy", "suggest", "--dry-run")
    assert code == 0 and "origin: rules" in out and "chocolate zzyzx" in out
    assert run(capsys, "policy", "status", "staging")[0] == EXIT_REFUSED  # dry run: nothing staged
    code, out, err = run(capsys, "policy", "suggest", "--api-key", alice)
    assert code == 0, err
    staging = json.loads(run(capsys, "policy", "status", "staging", "--json")[1])
    assert staging["authors"] == ["alice"]
    env = load_settings()
    from control_plane.lifecycle.workflow import Workflow

    workflow = Workflow(env, _engine(env), profile_of(env), clock=FIXED_CLOCK)
    suggested = [p for p in workflow.environment("staging").policy_set.policies if p.origin == "rules"]
    assert suggested and suggested[0].trigger.values == ("chocolate zzyzx",)
    # a suggestion is a draft like any other: not live until tested, approved and promoted
    assert all(p.origin != "rules" for p in workflow.environment("live").policy_set.policies)


def _engine(settings: Settings):  # type: ignore[no-untyped-def]
    from control_plane.engine import connect

    return connect(settings.engine)
