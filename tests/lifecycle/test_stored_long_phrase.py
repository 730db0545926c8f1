"""A live set stored before ``phrase_too_long`` came in, holding one over-long phrase, is
rebuilt as it is: the kill switch disables another of its policies (it was refused, 422
``invalid_policy``, when every rebuild ran the check), and a draft checks only the policy
it writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from control_plane import loader
from control_plane.bootstrap import publish_policies
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
        patched.setattr(loader, "_too_long", lambda text: None)
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
        patched.setattr(loader, "_too_long", lambda text: None)
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
