"""``test_unpinned_window``: a test case that pins no ``now`` and fires a policy whose
active window can move its result. Pure (no engine), through the library and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from control_plane.cli import main
from control_plane.lifecycle.lint import lint
from control_plane.lifecycle.suite import TestCase, load_suite
from control_plane.loader import build_policy_set
from control_plane.policy import Governance, Policy

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "policies_unpinned"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
GOVERNANCE = Governance(filterable_fields=("categories",), boostable_fields=("diet",))


def campaign(trigger: dict[str, Any], start: str | None, until: str | None, **fields: Any) -> Policy:
    window = {key: value for key, value in (("from", start), ("until", until)) if value}
    return Policy.model_validate({
        "id": "campaign", "title": "campaign", "owner": "merch", "trigger": trigger,
        "rules": [{"boost": {"field": "diet", "values": ["vegan"], "weight": 2}}],
        **({"active": window} if window else {}), **fields,
    })


def case(intent: str, **fields: Any) -> TestCase:
    data = {"name": intent, "intent": intent, "expect": {"applied": ["campaign"]},
            "file": "x/tests/cases.yaml", "line": 7, **fields}
    return TestCase.model_validate(data)


def unpinned(policy: Policy, *cases: TestCase, horizon: timedelta = timedelta(days=365)) -> list[str]:
    policy_set = build_policy_set([policy], (), GOVERNANCE)
    findings = lint(policy_set, now=NOW, cases=cases, horizon=horizon)
    return [f.location for f in findings if f.code == "test_unpinned_window"]


SUMMER = ("2026-05-15", "2026-07-01")  # open at NOW


@pytest.mark.parametrize(
    ("trigger", "intent", "fires"),
    [
        ({"phrase": ["chocolate"]}, "cheap chocolate", True),
        ({"phrase": ["chocolat"]}, "Chocolats noirs", True),  # case, plural
        ({"phrase": ["jus d'orange"]}, "un jus d'orange", True),  # the apostrophe splits both alike
        ({"phrase": ["dark chocolate"]}, "chocolate dark", False),  # words in a row
        ({"any": ["cheap", "budget"]}, "budget tea", True),
        ({"exact": ["oranges"]}, "Oranges", True),
        ({"exact": ["oranges"]}, "orange juice", False),
        ({"pattern": ["(without|sans) {allergen}"]}, "chocolat sans arachide", True),
        ({"pattern": ["(without|sans) {allergen}"]}, "chocolate without", False),  # nothing to capture
        ({"always": True}, "anything at all", True),
    ],
)
def test_an_unpinned_case_that_fires_an_open_window(
    trigger: dict[str, Any], intent: str, fires: bool
) -> None:
    assert unpinned(campaign(trigger, *SUMMER), case(intent)) == (["x/tests/cases.yaml:7"] if fires else [])


def test_a_pinned_case_is_fine() -> None:
    assert unpinned(campaign({"phrase": ["chocolate"]}, *SUMMER), case("chocolate", now=NOW)) == []


@pytest.mark.parametrize(
    ("start", "until", "warned"),
    [
        ("2026-05-15", "2026-07-01", True),  # open now
        ("2026-05-15", None, True),  # open now, for good
        ("2026-12-01", "2026-12-26", True),  # starts within the horizon
        ("2027-12-01", "2027-12-26", False),  # starts beyond it
        ("2026-01-01", "2026-02-01", False),  # ended
        (None, "2026-05-01", False),  # ended
        (None, "2026-08-01", True),  # open now, ends within the horizon
    ],
)
def test_only_windows_that_move_the_result_from_now_on(
    start: str | None, until: str | None, warned: bool
) -> None:
    found = unpinned(campaign({"phrase": ["chocolate"]}, start, until), case("chocolate"))
    assert bool(found) is warned


def test_the_horizon_is_a_parameter() -> None:
    winter = campaign({"phrase": ["chocolate"]}, "2026-12-01", "2026-12-26")
    assert unpinned(winter, case("chocolate"), horizon=timedelta(days=30)) == []
    assert unpinned(winter, case("chocolate"), horizon=timedelta(days=200)) == ["x/tests/cases.yaml:7"]


def test_cohorts_and_the_kill_switch_decide_whether_a_policy_can_fire() -> None:
    vegan = campaign({"always": True}, *SUMMER, cohorts=["vegan"])
    assert unpinned(vegan, case("tea")) == []
    assert unpinned(vegan, case("tea", cohorts=["vegan"])) == ["x/tests/cases.yaml:7"]
    assert unpinned(campaign({"always": True}, *SUMMER, enabled=False), case("tea")) == []
    assert unpinned(campaign({"always": True}, None, None), case("tea")) == []  # no window


def test_the_message_names_the_case_the_policy_and_the_window() -> None:
    policy_set = build_policy_set([campaign({"phrase": ["chocolate"]}, *SUMMER)], (), GOVERNANCE)
    (finding,) = lint(policy_set, now=NOW, cases=[case("cheap chocolate")])
    assert (finding.code, finding.severity) == ("test_unpinned_window", "warning")
    assert finding.policy_id == "campaign"
    assert finding.message == (
        "test case 'cheap chocolate' pins no 'now' and its intent 'cheap chocolate' fires 'campaign', whose"
        " window is open now, ends 2026-07-01T00:00:00+00:00: its result depends on the day it runs. Give"
        " the case, or its test file, a 'now'"
    )


def _lint_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["policy", "lint", *argv])
    return code, capsys.readouterr().out.splitlines()


def test_the_fixture_directory_has_exactly_its_unpinned_case(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _lint_cli(capsys, str(FIXTURE), "--now", "2027-01-10T12:00:00Z")
    assert code == 0  # a warning: the set is not broken
    assert lines[-1] == "1 findings, 0 errors"
    assert lines[0].startswith(
        "campaigns/tests/easter.yaml:1: warning: test_unpinned_window: test case"
        " 'chocolate eggs stay in Chocolates' pins no 'now'"
    )
    assert "fires 'easter-eggs', whose window starts 2027-03-22" in lines[0]


def test_the_fixture_suite_pins_by_file_and_by_case() -> None:
    by_name = {c.name: c for c in load_suite(FIXTURE).cases}
    assert by_name["oeufs en chocolat, pinned by the file"].now == datetime(2027, 1, 10, 12, tzinfo=UTC)
    assert by_name["chocolate eggs at Easter"].now == datetime(2027, 4, 1, 10, tzinfo=UTC)
    assert by_name["chocolate eggs stay in Chocolates"].now is None


@pytest.mark.parametrize("now", ["2026-11-15T12:00:00Z", "2026-12-01T00:00:00Z", "2026-12-25T12:00:00Z",
                                 "2027-01-10T12:00:00Z"])
def test_the_demo_suite_has_no_unpinned_window(capsys: pytest.CaptureFixture[str], now: str) -> None:
    _, lines = _lint_cli(capsys, str(ROOT / "policies"), "--now", now)
    assert not [line for line in lines if "test_unpinned_window" in line], lines


def test_the_word_index_finds_what_comparing_every_case_with_every_policy_finds() -> None:
    from control_plane.lifecycle.lint_cases import fires, unpinned_windows, window_moves, words

    texts = ["chocolate", "dark chocolate", "jus d'orange", "oranges", "tea"]
    triggers: list[dict[str, Any]] = [
        {"phrase": [texts[n % 5]]} for n in range(5)
    ] + [{"any": [t, "budget"]} for t in texts] + [{"exact": [t]} for t in texts] + [
        {"pattern": ["(without|sans) {allergen}"]}, {"always": True},
    ]
    policies = [
        campaign(triggers[n % len(triggers)], *SUMMER).model_copy(
            update={"id": f"c{n:02d}", "cohorts": ("vip",) if n % 7 == 0 else ()}
        )
        for n in range(40)
    ]
    intents = ["cheap chocolate", "un jus d'orange", "Oranges", "tea sans lait", "budget", "nothing here"]
    cases = [case(i, cohorts=["vip"] if n % 2 else []) for n, i in enumerate(intents)]
    found = [(f.policy_id, f.message) for f in unpinned_windows(policies, cases, NOW)]
    naive = [
        (policy.id, c.intent) for c in cases for policy in policies
        if policy.active is not None and window_moves(policy.active, NOW, timedelta(days=365))
        and (not policy.cohorts or set(policy.cohorts) & set(c.cohorts)) and fires(policy, words(c.intent))
    ]
    assert len(found) == len(naive) > len(cases)
    assert [pid for pid, _ in found] == [pid for pid, _ in naive]
    assert all(repr(intent) in message for (_, message), (_, intent) in zip(found, naive, strict=True))
