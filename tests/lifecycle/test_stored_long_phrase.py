"""A live set stored before ``phrase_too_long`` came in, holding one over-long phrase, is
rebuilt as it is: the kill switch disables another of its policies (it was refused, 422
``invalid_policy``, when every rebuild ran the check), a draft checks only the policy it
writes, and lint of such a staged version flags the phrase and leaves it out of its
analyses between policies (they look up every run of a text's words: cubic)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from control_plane import loader
from control_plane.bootstrap import publish_policies
from control_plane.lifecycle import lint_pairs
from tests.lifecycle.conftest import Lifecycle

ROOT = Path(__file__).resolve().parents[2]


def test_the_kill_switch_works_on_a_live_set_stored_before_phrase_too_long(
    lifecycle: Lifecycle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock
) -> None:
    directory = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", directory)
    long_phrase = " ".join(["clearance"] * 60)  # 599 characters: stored before the check existed
    policy = (directory / "pricing" / "old-long.yaml")
    policy.write_text(
        "id: old-long\ntitle: an old policy\nowner: merch-team-fresh\npriority: 10\n"
        f"trigger:\n  phrase: ['{long_phrase}']\nrules:\n  - category: {{values: [Oranges]}}\n"
        "explain: stored long ago.\n"
    )
    with monkeypatch.context() as patched:  # as the loader was before today
        patched.setattr(loader, "too_long_to_match", lambda text: None)
        publish_policies(lifecycle.engine, lifecycle.settings, directory, "live", clock=clock)
    wf, bob = lifecycle.workflow, lifecycle.principals["bob"]
    assert wf.environment("live").policy_set.policy("old-long")
    wf.disable(bob, "cheap", "price war")  # the emergency switch, on an unrelated policy
    assert not wf.environment("live").policy_set.policy("cheap").enabled


def test_a_draft_on_such_a_set_checks_only_the_policy_it_writes(
    lifecycle: Lifecycle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock
) -> None:
    from control_plane.errors import PolicyLoadError

    directory = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", directory)
    long_phrase = " ".join(["clearance"] * 60)
    (directory / "pricing" / "old-long.yaml").write_text(
        "id: old-long\ntitle: an old policy\nowner: merch-team-fresh\npriority: 10\n"
        f"trigger:\n  phrase: ['{long_phrase}']\nrules:\n  - category: {{values: [Oranges]}}\n"
    )
    with monkeypatch.context() as patched:
        patched.setattr(loader, "too_long_to_match", lambda text: None)
        publish_policies(lifecycle.engine, lifecycle.settings, directory, "live", clock=clock)
    wf, dan = lifecycle.workflow, lifecycle.principals["dan"]
    old = wf.environment("live").policy_set.policy("old-long")
    other = {
        "id": "new-short", "title": "t", "owner": "o", "priority": 5,
        "trigger": {"phrase": ["creamer"]}, "rules": [{"category": {"values": ["Coffee creamers"]}}],
    }
    wf.put_policy(dan, other, "a new policy beside the old one")  # the stored one is not re-checked
    with pytest.raises(PolicyLoadError) as refused:  # writing the old one again checks it
        wf.put_policy(dan, old.model_dump(mode="json") | {"priority": 11}, "touch the old one")
    assert [(e.file, e.code) for e in refused.value.errors] == [("policy:old-long", "phrase_too_long")]


def test_lint_of_a_staged_version_stored_before_phrase_too_long_skips_the_phrase(
    lifecycle: Lifecycle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock
) -> None:
    directory = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", directory)
    long_phrase = " ".join(["clearance"] * 1500)  # 14,999 characters, 1,500 words
    (directory / "pricing" / "old-long.yaml").write_text(
        "id: old-long\ntitle: an old policy\nowner: merch-team-fresh\npriority: 10\n"
        f"trigger:\n  phrase: ['{long_phrase}', 'clearance sale']\n"
        "rules:\n  - category: {values: [Oranges]}\n"
    )
    with monkeypatch.context() as patched:  # as the loader was before the check
        patched.setattr(loader, "too_long_to_match", lambda text: None)
        publish_policies(lifecycle.engine, lifecycle.settings, directory, "staging", clock=clock)
    looked_up: list[int] = []  # the word count of every text whose runs lint looks up
    every_run = lint_pairs._runs

    def runs(words: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        looked_up.append(len(words))
        if len(words) > 3:  # no demo text (a cue and its capture at most) is longer
            raise AssertionError(f"lint looked up the runs of a {len(words):,}-word text")
        return every_run(words)

    monkeypatch.setattr(lint_pairs, "_runs", runs)
    findings = lifecycle.workflow.lint("staging")
    assert looked_up
    flagged = [f for f in findings if f.policy_id == "old-long"]
    assert [f.severity for f in flagged if f.code == "unreachable_trigger"] == ["warning"]
    assert not any(f.severity == "error" for f in flagged)  # a warning: the version stays promotable
    message = next(f.message for f in flagged if f.code == "unreachable_trigger")
    assert "14,999 characters once normalised" in message and "never fires" not in message
