"""Drill: a bulk batch refused in the middle of a publish. ``govsearch policy publish``
(:func:`control_plane.bootstrap.publish_policies`, the workflow's ``bootstrap``) writes the
version's percolator index in bounded bulk batches; the engine refuses one of them after
earlier ones were written. This attacks the promise of ``docs/lifecycle.md`` (Environments
and versions): a failed batch deletes the half-written index and no alias moves. The
publish must fail with the engine's error; the version's index must be gone and the version
unregistered; live and staging must point where they did; no history event may be
appended; and publishing the same version again with the real engine must write it whole
(every document) and serve it with the guard policies.

The engine is real; only a wrapper around it refuses the Nth ``_bulk`` request, in the two
shapes the engine uses: the whole request answered 429 ``rejected_execution`` (on every
retry the store makes), and a request accepted with one of its documents refused
(``errors: true``, that item 429) while the others are written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.bootstrap import Ready, profile_of, publish_policies
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError
from control_plane.lifecycle.workflow import Workflow, read_directory
from control_plane.matcher import index_documents
from control_plane.service import SearchRequest
from tests.agent.test_agent_endpoint import filter_names
from tests.clocks import FIXED_CLOCK, FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.engines import DelegatingEngine
from tests.lifecycle.conftest import isolated_settings

pytestmark = pytest.mark.drill

ROOT = Path(__file__).resolve().parents[2]
BATCH = 5
"""documents per bulk request in this drill (the real bound, 2,000, would need thousands of
policies for several batches): the store's own module setting, lowered"""
FAIL_AT = 3
"""the bulk request the engine refuses: two batches are written before it"""
GUARDS = {"guard:in-stock-only", "guard:visible-only", "guard:market"}
REJECTED = {
    "type": "rejected_execution_exception",
    "reason": "rejected execution of coordinating operation [shard_detail=[govsearch][0]]",
}


class RefusingBulk(DelegatingEngine):
    """The real engine, except that its ``fail_at``-th ``_bulk`` request (and, for
    ``whole``, every retry of it) is refused the way the engine refuses under load."""

    def __init__(self, real: Engine, shape: str, fail_at: int = FAIL_AT) -> None:
        super().__init__(real)
        self.shape = shape
        self.fail_at = fail_at
        self.bulks = 0
        self.refused = 0

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        if path == "/_bulk":
            self.bulks += 1
            if self.bulks >= self.fail_at and (self.shape == "whole" or self.bulks == self.fail_at):
                return self._refuse(method, path, body, params, timeout_s)
        return super().request(method, path, body, params, timeout_s)

    def _refuse(
        self, method: str, path: str, body: str, params: Mapping[str, Any] | None, timeout_s: float | None
    ) -> Any:
        self.refused += 1
        if self.shape == "whole":
            raise EngineError(
                f"OpenSearch {method} {path} failed (429): {REJECTED['type']}: {REJECTED['reason']}",
                status=429,
                info={"error": REJECTED, "status": 429},
            )
        # the batch but its last document reaches the engine; that one is refused
        lines = body.splitlines(keepends=True)
        result = self.real.request(method, path, "".join(lines[:-2]), params, timeout_s)
        target = json.loads(lines[-2])["index"]
        result["errors"] = True
        result["items"].append({"index": {**target, "status": 429, "error": REJECTED}})
        return result


def with_extra_policy(tmp_path: Path, name: str, phrase: str) -> Path:
    """A copy of the demo policy directory with one more boost policy (another version)."""
    directory = tmp_path / name
    shutil.copytree(ROOT / "policies", directory)
    (directory / "food" / f"{name}.yaml").write_text(
        f"id: {name}\ntitle: {phrase}\nowner: merch-team-food\npriority: 20\n"
        f"trigger:\n  phrase: [{phrase}]\nrules:\n  - category: {{values: [Chocolates]}}\n",
        encoding="utf-8",
    )
    return directory


def aliases(engine: Engine, prefix: str) -> dict[str, list[str]]:
    return {env: engine.alias_targets(policy_store.alias_name(prefix, env)) for env in ("live", "staging")}


@pytest.mark.parametrize("shape", ["whole", "one-item"])
def test_a_refused_batch_leaves_no_index_no_alias_move_and_no_event(
    engine: Engine,
    settings: Settings,  # noqa: F811
    ready: Ready,  # noqa: F811
    index_prefix: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    shape: str,
) -> None:
    local = isolated_settings(settings, index_prefix, tmp_path)
    profile = profile_of(local)
    _, live = publish_policies(engine, local, "policies", "live", clock=FIXED_CLOCK)
    staged = with_extra_policy(tmp_path, "staged-truffles", "truffles")
    _, staging = publish_policies(engine, local, staged, "staging", clock=FIXED_CLOCK)
    directory = with_extra_policy(tmp_path, "next-pralines", "pralines")
    policy_set, _ = read_directory(directory, profile)
    version = policy_set.version
    name = policy_store.index_name(index_prefix, version)
    # what a complete index of this version holds: its trigger documents and the set's own
    expected = len(list(index_documents(policy_set.policies, lambda _phrase: 1))) + 1
    assert expected > FAIL_AT * BATCH, "the set must need batches after the refused one"

    workflow = Workflow(local, engine, profile, clock=FIXED_CLOCK)
    before_aliases = aliases(engine, index_prefix)
    before_events = [e.as_json() for e in workflow.history(outcome=None)]
    assert before_aliases == {
        "live": [workflow.index_of(live)], "staging": [workflow.index_of(staging)]
    }

    monkeypatch.setattr(policy_store, "BATCH_DOCUMENTS", BATCH)
    monkeypatch.setattr(policy_store, "BATCH_ATTEMPTS", 2)  # one retry: a short backoff
    refusing = RefusingBulk(engine, shape)
    written: list[int] = []
    progress = policy_store.reporting(lambda done, _total: written.append(done))
    with progress, pytest.raises(EngineError) as failed:
        publish_policies(refusing, local, directory, "live", clock=FIXED_CLOCK)

    # the engine's refusal, said plainly, after two batches were written
    assert written == [BATCH, 2 * BATCH]
    assert refusing.bulks == FAIL_AT + (1 if shape == "whole" else 0) and refusing.refused >= 1
    message = str(failed.value)
    assert "rejected_execution" in message, message
    if shape == "whole":
        assert failed.value.status == 429
    else:
        assert "1 policy documents were refused by the engine" in message, message
    # nothing half-written is left, nothing points to it, nothing was recorded
    assert not engine.index_exists(name)
    assert workflow.store.version(version) is None
    assert aliases(engine, index_prefix) == before_aliases
    assert [e.as_json() for e in workflow.history(outcome=None)] == before_events
    assert workflow.environment("live").version == live
    assert workflow.environment("staging").version == staging

    # the same version again, with the engine answering: written whole, served governed
    monkeypatch.undo()
    index, again = publish_policies(engine, local, directory, "live", clock=FIXED_CLOCK)
    assert (index, again) == (name, version)
    engine.refresh(index)
    assert engine.request("GET", f"/{index}/_count")["count"] == expected
    assert policy_store.read_index(engine, index).policy_set == policy_set
    assert aliases(engine, index_prefix) == {"live": [index], "staging": before_aliases["staging"]}
    events = workflow.history(outcome=None)
    assert len(events) == len(before_events) + 1
    assert (events[0].action, events[0].env, events[0].version) == ("bootstrap", "live", version)
    with workflow.pinned_service(version) as service:
        outcome = service.search(SearchRequest(intent="pralines", market="fr"), FIXED_NOW)
    assert outcome.compiled.policy_set_version == version
    assert filter_names(outcome.execution.dsl) >= GUARDS
    assert "next-pralines" in outcome.compiled.composition.plan.applied
