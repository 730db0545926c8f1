"""Review: docs/policies.md says of phrase_too_long "Sets already stored are read as they
are", but the kill switch rebuilds the live set through ``build_policy_set`` (the loader's
cross-checks, now including phrase_too_long): a live set stored before the check, holding
one over-long phrase in any policy, can no longer have *another* policy disabled."""

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
