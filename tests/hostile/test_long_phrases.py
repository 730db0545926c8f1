"""A trigger phrase longer than any intent can be is refused where it is written.

No bound held a trigger phrase (nor a pattern cue, an ``unless`` phrase or a vocabulary
word), yet none longer than an intent (512 characters once normalised) can ever match one.
Lint looks up every contiguous run of words of each text a trigger names
(``lint_pairs.TriggerIndex``): cubic in the phrase's word count. One phrase of 800
one-letter words took lint 0.7 s, 1,600 words 6 s, 3,200 words 52 s; a draft of 8,000
words fits the API's 16 KiB body, and every ``GET .../lint``, console review page, approval
and promotion of that version would then hold a worker's CPU for a quarter of an hour.

Now the loader's cross-checks (files, console drafts, ``PUT /v1/policies/staging/...``,
suggestions) refuse such a text with ``phrase_too_long`` at its place; stored sets are read
as before, and lint flags such a text of a stored set (``unreachable_trigger``) and leaves
it out of its analyses between policies.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from control_plane.errors import PolicyLoadError
from control_plane.intent_text import MAX_INTENT
from control_plane.lifecycle import lint_pairs
from control_plane.lifecycle.lint import lint
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import Policy
from tests.hostile.bounded import bounded
from tests.lifecycle.conftest import Lifecycle, lifecycle  # noqa: F401

POLICIES = Path(__file__).resolve().parents[2] / "policies"
TOO_LONG = "x" * (MAX_INTENT + 1)


def policy(trigger: str, extra: str = "") -> str:
    return (
        f"id: long\ntitle: t\nowner: o\npriority: 10\ntrigger:\n{trigger}"
        f"rules:\n  - economics: {{margin_weight: 1.0}}\n{extra}"
    )


def demo_with(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "policies"
    shutil.copytree(POLICIES, root)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def load_errors(root: Path) -> list[tuple[str, int, int, str]]:
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(root)
    return [(e.file, e.line, e.column, e.code) for e in raised.value.errors]


@pytest.mark.parametrize(
    ("trigger", "place"),
    [
        (f"  phrase: [chocolate, {TOO_LONG}]\n", (6, 23)),
        (f"  exact: ['{TOO_LONG}']\n", (6, 11)),
        (f"  pattern: ['(without|{TOO_LONG}) {{item}}']\n", (6, 13)),
        (f"  phrase: [chocolate]\n  unless: [{TOO_LONG}]\n", (7, 12)),
    ],
    ids=["phrase", "exact", "cue", "unless"],
)
def test_a_text_longer_than_an_intent_is_refused_at_its_place(
    tmp_path: Path, trigger: str, place: tuple[int, int]
) -> None:
    root = demo_with(tmp_path, {"food/long.yaml": policy(trigger)})
    assert load_errors(root) == [("food/long.yaml", *place, "phrase_too_long")]


def test_a_vocabulary_word_longer_than_an_intent_is_refused(tmp_path: Path) -> None:
    words = (POLICIES / "vocabularies" / "allergens.yaml").read_text(encoding="utf-8")
    text = words.replace("peanuts: [peanut,", f"peanuts: [{TOO_LONG}, peanut,")
    root = demo_with(tmp_path, {"vocabularies/allergens.yaml": text})
    assert load_errors(root) == [("vocabularies/allergens.yaml", 6, 13, "phrase_too_long")]


def test_a_phrase_of_512_characters_once_normalised_still_loads(tmp_path: Path) -> None:
    within = "\ufb01" * (MAX_INTENT // 2)  # 256 characters written, 512 once normalised
    root = demo_with(tmp_path, {"food/long.yaml": policy(f"  phrase: ['{within}']\n")})
    assert "long" in {p.id for p in load_policy_set(root).policies}


def test_lint_of_a_draft_of_thousands_of_words_ends_at_once(tmp_path: Path) -> None:
    """4,000 one-letter words (8 KB): before, lint would run for minutes (cubic; 3,200 words
    took 52 s), so the child is given 60 s and a limited address space."""
    words = " ".join(["a"] * 4000)
    root = demo_with(tmp_path, {"food/long.yaml": policy(f"  phrase: ['{words}']\n")})
    try:
        done = bounded(
            [sys.executable, "-m", "control_plane.cli", "policy", "lint", str(root), "--no-tests"],
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("policy lint ran past 60 s on one long phrase")
    assert done.returncode == 3, done.stderr[-2000:]
    assert "food/long.yaml:6:12: phrase_too_long:" in done.stderr


def test_the_api_refuses_such_a_draft_and_stages_nothing(lifecycle: Lifecycle) -> None:  # noqa: F811
    before = lifecycle.call("GET", "/v1/policies/environments/staging", "alice")
    draft = {
        "id": "long", "title": "t", "owner": "o", "priority": 10,
        "trigger": {"phrase": ["chocolate", TOO_LONG]},
        "rules": [{"economics": {"margin_weight": 1.0}}],
    }
    response = lifecycle.call("PUT", "/v1/policies/staging/policies/long", "alice", json={"policy": draft})
    assert response.status_code == 422, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_policy"
    assert [d["code"] for d in error["details"]] == ["phrase_too_long"]
    assert "trigger.phrase.1" in error["details"][0]["message"]
    after = lifecycle.call("GET", "/v1/policies/environments/staging", "alice")
    assert after.status_code == before.status_code == 404  # staging is still empty
    assert after.json()["error"]["code"] == "empty_environment"


class RunsOfALongText(Exception):
    """What the spy on lint's word runs raises: the cubic pass reached an over-long text."""


def test_lint_of_a_stored_set_holding_such_a_phrase_flags_it_and_skips_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A set stored before the check, rebuilt as stored sets are (``build_policy_set``
    checks only what is written), with a phrase of 4,000 one-letter words (52 s of lint at
    3,200 before): lint reports it and never looks up the runs of its words."""
    demo = load_policy_set(POLICIES)
    words = " ".join(["a"] * 4000)
    old = Policy.model_validate({
        "id": "old-long", "title": "t", "owner": "o", "priority": 10,
        "trigger": {"phrase": [words]}, "rules": [{"economics": {"margin_weight": 1.0}}],
    })
    stored = build_policy_set([*demo.policies, old], demo.vocabularies, demo.governance)
    runs: list[int] = []  # the word count of every text whose runs lint looks up
    every_run = lint_pairs._runs

    def counted(text: tuple[str, ...]) -> Iterator[tuple[str, ...]]:
        runs.append(len(text))
        if len(text) > MAX_INTENT:  # stop the old code at once rather than after minutes
            raise RunsOfALongText(len(text))
        return every_run(text)

    monkeypatch.setattr(lint_pairs, "_runs", counted)
    now = datetime(2026, 12, 10, tzinfo=UTC)
    findings = lint(stored, now=now)
    assert runs and max(runs) <= 3  # the demo's texts only (at most three words)
    flagged = [f for f in findings if f.policy_id == "old-long"]
    assert [(f.code, f.severity, f.location) for f in flagged] == [
        ("unreachable_trigger", "warning", "policy:old-long:trigger.phrase")
    ]
    assert "7,999 characters once normalised" in flagged[0].message
    assert "it never fires" in flagged[0].message and "phrase_too_long" in flagged[0].message
    assert len(flagged[0].message) < 600  # the text is quoted by its start only
    assert [f for f in findings if f.policy_id != "old-long"] == lint(demo, now=now)
