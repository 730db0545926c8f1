"""Inputs ``compose`` refuses rather than compose a wrong plan."""

from __future__ import annotations

import pytest

from control_plane.composer import ComposeContext, compose
from control_plane.plan import Match, Span
from tests.composer.casefile import policy_set

POLICIES = policy_set(
    {"policies": [{"id": "tea", "trigger": {"phrase": ["tea"]}, "rules": [{"route": {"to": "title"}}]}]}
)


def test_two_matches_for_one_policy_are_refused() -> None:
    tea = Match(policy_id="tea", spans=(Span(start=0, end=3, text="tea"),))
    with pytest.raises(ValueError, match="two matches for 'tea'"):
        compose(POLICIES, "tea", [tea, tea], ComposeContext(category_field="categories"))


def test_an_empty_span_is_refused() -> None:
    empty = Match(policy_id="tea", spans=(Span(start=1, end=1, text=""),))
    with pytest.raises(ValueError, match="empty or outside the intent"):
        compose(POLICIES, "tea", [empty], ComposeContext(category_field="categories"))


def test_no_matches_give_the_default_plan() -> None:
    composition = compose(POLICIES, "  green   tea ", [], ComposeContext(category_field="categories"))
    assert composition.plan.residual == "green tea"
    assert composition.plan.applied == ()
    assert composition.explanation.matched == ()
    assert composition.explanation.policy_set_version == "test"
    assert composition.explanation.intent == "  green   tea "
