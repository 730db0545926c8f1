"""The composer's fast path gives what its reference path gives (ADR 0021).

Inside one compose the cascade changes one working draft per step, keeps the residual as
the runs of the intent left (cut per consumed span), writes the plan's value dumps out and
remembers, across composes, what each policy object proposes. The reference path
(``composer_state.REFERENCE``) is the specification done the slow way: a frozen state per
rule, the residual recomputed from every consumed span by ``residual_text``, pydantic's
dumps, nothing remembered. Both must give the same ``model_dump_json()`` on every case
file and on random requests, cold and warm; the pieces are checked one by one below.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import control_plane.composer as composer
import control_plane.composer_state as composer_state
from control_plane.composer import ComposeContext, compose, residual_text
from control_plane.composer_state import Remembered, State
from control_plane.money import MoneyNotation
from control_plane.plan import (
    Boost,
    Bound,
    CapturedText,
    Constraint,
    Match,
    Plan,
    PriceBounds,
    Span,
    Sponsored,
    Weight,
)
from control_plane.policy import Governance, PolicySet, RewriteRule, Vocabulary
from tests.composer.casefile import all_cases, policy_set
from tests.composer.test_properties import SETS, LinearStats, requests

Request = tuple[PolicySet, str, list[Match], ComposeContext]


def _reference(policies: PolicySet, intent: str, matches: list[Match], context: ComposeContext) -> str:
    composer_state.REFERENCE = True
    try:
        return compose(policies, intent, matches, context).model_dump_json()
    finally:
        composer_state.REFERENCE = False


def _fast(policies: PolicySet, intent: str, matches: list[Match], context: ComposeContext) -> str:
    return compose(policies, intent, matches, context).model_dump_json()


def test_every_case_file_composes_as_the_reference_cold_and_warm() -> None:
    cases = [case for case in all_cases() if "error" not in case.expect]
    assert cases
    expected = [_reference(c.policy_set, c.intent, list(c.matches), c.context) for c in cases]
    for _ in range(2):  # the second round reuses what the first remembered
        got = [_fast(c.policy_set, c.intent, list(c.matches), c.context) for c in cases]
        assert [c.id for c, a, b in zip(cases, got, expected, strict=True) if a != b] == []


@settings(max_examples=300, deadline=None)
@given(requests())
def test_random_requests_compose_as_the_reference(request: Request) -> None:
    policies, intent, matches, context = request
    expected = _reference(policies, intent, matches, context)
    assert _fast(policies, intent, matches, context) == expected
    assert _fast(policies, intent, matches, context) == expected


REWRITE_WORDS = ["choc", "chocolate", "Chocolate", "creme", "Crème", "fraiche", "Fraîche", "please", "cheap"]


@st.composite
def rewrite_requests(draw: st.DrawFn) -> Request:
    """The scoring set (rewrites, a consuming price policy) on words its rewrites meet."""
    policies = SETS["scoring"]
    intent = "  ".join(draw(st.lists(st.sampled_from(REWRITE_WORDS), min_size=1, max_size=8)))
    matches = []
    for policy_id in draw(st.lists(st.sampled_from([p.id for p in policies.policies]), unique=True)):
        spans: list[Span] = []
        if policies.policy(policy_id).trigger.kind != "always":
            for _ in range(draw(st.integers(0, 3))):
                start = draw(st.integers(0, len(intent) - 1))
                end = draw(st.integers(start + 1, len(intent)))
                spans.append(Span(start=start, end=end, text=intent[start:end]))
        matches.append(Match(policy_id=policy_id, spans=tuple(spans)))
    context = ComposeContext(category_field="categories", price_stats={"_all": LinearStats()})
    return policies, intent, matches, context


@settings(max_examples=200, deadline=None)
@given(rewrite_requests())
def test_rewrites_and_consumption_compose_as_the_reference(request: Request) -> None:
    policies, intent, matches, context = request
    assert _fast(policies, intent, matches, context) == _reference(policies, intent, matches, context)


# --- the residual: runs of the intent left ------------------------------------------------

#: white space of several kinds (no-break, ideographic, tabs), accents composed and not,
#: letters whose case folding changes their length
ALPHABET = st.sampled_from(
    ["a", "b", "é", "e\u0301", "ß", "İ", "ﬁ", " ", "  ", "\u00a0", "\u3000", "\t", "."]
)
REWRITES = [
    RewriteRule.model_validate({"from": "ab", "to": "x"}),
    RewriteRule.model_validate({"from": "é", "to": ""}),
    RewriteRule.model_validate({"from": "ss", "to": "s s"}),
]


Consumption = tuple[str, list[list[Span]], list[RewriteRule]]


def _consumption(draw: st.DrawFn, intent: str) -> Consumption:
    """Steps of spans anywhere in ``intent`` (on word edges, inside a word, over a space)
    and the rewrites to apply."""

    def span() -> Span:
        start = draw(st.integers(0, len(intent) - 1))
        end = draw(st.integers(start + 1, min(len(intent), start + draw(st.integers(1, 8)))))
        return Span(start=start, end=end, text=intent[start:end])

    steps = draw(st.lists(st.lists(st.builds(span), max_size=3), max_size=8))
    return intent, steps, draw(st.lists(st.sampled_from(REWRITES), max_size=3))


@st.composite
def consumptions(draw: st.DrawFn) -> Consumption:
    return _consumption(draw, "".join(draw(st.lists(ALPHABET, min_size=1, max_size=30))))


@settings(max_examples=400, deadline=None)
@given(consumptions())
def test_the_residual_is_residual_text_after_every_step(case: Consumption) -> None:
    intent, steps, rewrites = case
    left = composer._Residual(intent)
    consumed: list[Span] = []
    assert left.text(rewrites) == residual_text(intent, [], rewrites)
    for spans in steps:
        probe = left.without(spans)  # a copy: ``left`` itself is unchanged
        assert probe.text(rewrites) == residual_text(intent, [*consumed, *spans], rewrites)
        assert left.text(rewrites) == residual_text(intent, consumed, rewrites)
        for span in spans:
            assert left.free(span) == (not any(span.overlaps(taken) for taken in consumed))
        left.consume(spans)
        consumed.extend(spans)
        assert left.text(rewrites) == residual_text(intent, consumed, rewrites)
        assert left.text(()) == residual_text(intent, consumed, ())


#: words of a normalised intent: single spaces between them, none at the ends (the
#: residual's runs are then cut without a split: ``_Residual._plain``)
WORDS = st.lists(
    st.sampled_from(["ab", "é", "e\u0301", "ß", "ﬁ", "x.", "cheap", "İ"]), min_size=1, max_size=12
)


@st.composite
def normalised_consumptions(draw: st.DrawFn) -> Consumption:
    return _consumption(draw, " ".join(draw(WORDS)))


@settings(max_examples=400, deadline=None)
@given(normalised_consumptions())
def test_the_residual_of_a_normalised_intent_is_residual_text_after_every_step(case: Consumption) -> None:
    intent, steps, rewrites = case
    left = composer._Residual(intent)
    assert left._plain  # the branch under test
    consumed: list[Span] = []
    for spans in steps:
        probe = left.without(spans)
        assert probe.text(rewrites) == residual_text(intent, [*consumed, *spans], rewrites)
        for span in spans:
            assert left.free(span) == (not any(span.overlaps(taken) for taken in consumed))
        left.consume(spans)
        consumed.extend(spans)
        assert left.text(rewrites) == residual_text(intent, consumed, rewrites)


def test_an_intent_with_other_white_space_is_not_taken_for_a_normalised_one() -> None:
    for intent in (" a b", "a b ", "a  b", "a\tb", "a\u00a0b", "a\u3000b", "a\nb"):
        assert not composer._Residual(intent)._plain, repr(intent)
    for intent in ("a", "a b", "a.b c", ""):
        assert composer._Residual(intent)._plain, repr(intent)


def test_overlapping_adjacent_nested_and_repeated_spans() -> None:
    intent = "cheap dark chocolate  sans lait"

    def at(start: int, end: int) -> Span:
        return Span(start=start, end=end, text=intent[start:end])

    left = composer._Residual(intent)
    left.consume([at(0, 5)])
    assert left.text(()) == "dark chocolate sans lait"
    left.consume([at(0, 5)])  # consumed again: nothing changes
    left.consume([at(2, 4)])  # inside a consumed span
    assert left.text(()) == "dark chocolate sans lait"
    left.consume([at(5, 10)])  # adjacent to the consumed span, with the space before it
    assert left.text(()) == "chocolate sans lait"
    assert not left.free(at(9, 12)) and left.free(at(11, 20)) and left.free(at(20, 22))
    left.consume([at(16, 27), at(13, 18)])  # overlapping each other
    assert left.text(()) == "ch lait"
    left.consume([at(0, len(intent))])
    assert left.text(()) == "" and not left.free(at(28, 30))


# --- the working draft ---------------------------------------------------------------------


def _state() -> State:
    plan = Plan(residual="cheap chocolate", pins=("p1",))
    governance = Governance(filterable_fields=(), boostable_fields=())
    return State(plan=plan, governance=governance, category_field="categories")


def test_a_draft_changes_itself_and_never_the_state_it_came_from() -> None:
    state = _state()
    before = state.plan.model_dump_json()
    policy = policy_set({"policies": [_policy("a")]}).policies[0]
    actor = composer._turn(policy, 0, 5, Match(policy_id="a"), ())
    draft = state.draft()
    assert draft.with_plan(residual="chocolate", pins=state.plan.pins) is draft  # pins: the same value
    assert draft.record("route", "highest_priority", actor.actor, [], "r") is draft
    assert draft.evolved(rewrites=(REWRITES[0],)) is draft
    assert draft.touched == {"residual"}  # only what became another value
    assert (draft.plan.residual, draft.plan.pins, len(draft.resolutions)) == ("chocolate", ("p1",), 1)
    assert state.plan.model_dump_json() == before and state.resolutions == () and state.rewrites == ()
    again = draft.draft()
    again.with_plan(residual="")
    assert draft.plan.residual == "chocolate" and again.touched == {"residual"}
    with pytest.raises(TypeError):
        draft.evolved(plan=state.plan)
    with pytest.raises(TypeError):
        draft.evolved(nonsense=1)


def test_a_draft_copies_the_plan_only_when_a_rule_changes_it() -> None:
    state = _state()
    draft = state.draft()
    draft.with_plan(residual="cheap chocolate")
    assert draft.plan is state.plan and not draft.touched
    draft.with_plan(residual="chocolate")
    assert draft.plan is not state.plan and state.plan.residual == "cheap chocolate"


def test_the_reference_path_has_no_draft() -> None:
    state = _state()
    composer_state.REFERENCE = True
    try:
        assert state.draft() is state
    finally:
        composer_state.REFERENCE = False


# --- dumps ---------------------------------------------------------------------------------

VALUES: list[object] = [
    Constraint(field="brand", values=("Lindt", 1, 1.5, True), policies=("a", "b")),
    Constraint(field="text", values=("nuts",), policies=("a",), match="phrase"),
    Constraint(field="text", values=("nuts",), policies=("a",), match="words"),
    Constraint(field="price", values=(math.inf,), policies=("a",)),  # pydantic dumps it as None
    Boost(field="labels", values=("organic", 2), weight=1.5, policy="a"),
    Bound(value=4.2, policy="cheap", relative=30),
    Bound(value=math.nan, policy="odd"),
    PriceBounds(),
    PriceBounds(min=Bound(value=1.0, policy="a"), max=Bound(value=4.2, policy="b", relative=30)),
    Weight(),
    Weight(value=0.0, policy="a"),
    Sponsored(ids=("p1", "p2"), weight=2.0, policy="s"),
]


def _same(a: object, b: object) -> bool:
    """Equal, types included (``1`` is not ``True``), NaN equal to itself."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_the_written_out_dumps_are_pydantic_s(value: Constraint) -> None:
    assert _same(composer._Dumped()(value), value.model_dump(mode="json"))


def test_an_appended_tuple_is_dumped_as_a_whole_one() -> None:
    one = Constraint(field="a", values=(1,), policies=("p",))
    true = Constraint(field="a", values=(True,), policies=("p",))  # equal to ``one`` for pydantic
    two = Boost(field="labels", values=("x",), weight=2.0, policy="q")
    for old, new in [((one,), (one, two)), ((one,), (true, two)), ((one, two), (one,)), ((), (two,))]:
        dumped = composer._Dumped()
        dumped(old)
        assert _same(dumped.extended(old, new), composer._Dumped()(new))
    assert composer._Dumped().extended((one,), (true, two))[0]["values"] == [True]


# --- what is remembered across composes --------------------------------------------------


def _policy(policy_id: str, values: tuple[str, ...] = ("Chocolates",)) -> dict[str, object]:
    rules = [{"category": {"values": list(values)}}]
    return {"id": policy_id, "priority": 50, "trigger": {"always": True}, "rules": rules}


def test_a_new_version_of_a_policy_never_gets_what_the_old_one_proposed() -> None:
    context = ComposeContext(category_field="categories", price_stats={"_all": LinearStats()})
    first = policy_set({"policies": [_policy("a", ("Chocolates",))]}, version="v1")
    second = policy_set({"policies": [_policy("a", ("Teas",))]}, version="v2")
    for _ in range(2):
        for policies, expected in ((first, ("Chocolates",)), (second, ("Teas",))):
            plan = compose(policies, "x", [Match(policy_id="a")], context).plan
            assert plan.category is not None and plan.category.values == expected
    other = ComposeContext(category_field="path", price_stats={"_all": LinearStats()})
    plan = compose(first, "x", [Match(policy_id="a")], other).plan
    assert plan.category is not None and plan.category.field == "path"  # the same rule, another field


def test_a_step_that_changes_nothing_shares_its_policy_s_record_and_only_its_own() -> None:
    """A policy that loses every contest and consumes nothing makes the same step record
    whatever the request: it is kept per policy object (and binding) and shared; another
    version's policy of the same id, or another binding of it, gets its own."""
    context = ComposeContext(category_field="categories", price_stats={"_all": LinearStats()})
    held = {**_policy("a", ("Chocolates",)), "priority": 90}

    def loser(explain: str) -> dict[str, object]:
        return {**_policy("b", ("Teas",)), "explain": explain}

    first = policy_set({"policies": [held, loser("the first")]}, version="v1")
    second = policy_set({"policies": [held, loser("the second")]}, version="v2")
    matches = [Match(policy_id="a"), Match(policy_id="b")]
    steps = {}
    for policies in (first, second, first, second):
        step = compose(policies, "x", matches, context).explanation.applied[1]
        assert (step.policy_id, step.changes, step.consumed) == ("b", (), ())
        assert steps.setdefault(policies.version, step) is step  # kept: the same record again
        assert step.explain == f"the {'first' if policies.version == 'v1' else 'second'}"
    # one policy, two bindings: without a market its {market} rule is dropped (and listed)
    market_rule = {"category": {"values": ["{market}"]}}
    rules = [{"category": {"values": ["Teas"]}}, market_rule]
    third = policy_set({"policies": [held, {**loser("the third"), "rules": rules}]}, version="v3")
    in_market = ComposeContext(category_field="categories", market="fr", price_stats={"_all": LinearStats()})
    for policies, request in ((first, context), (third, context), (third, in_market), (third, context)):
        composer_state.REFERENCE = True
        try:
            reference = compose(policies, "x", matches, request).model_dump_json()
        finally:
            composer_state.REFERENCE = False
        assert compose(policies, "x", matches, request).model_dump_json() == reference
    dropped = [compose(third, "x", matches, c).explanation.applied[1].dropped for c in (context, in_market)]
    assert len(dropped[0]) == 1 and dropped[1] == ()


def test_remembered_values_are_kept_by_identity_and_bounded() -> None:
    table: Remembered[str] = Remembered(limit=2)
    a, b, c = (object() for _ in range(3))
    table.put(a, "A", "k")
    assert table.get(a, "k") == "A" and table.get(a, "other") is None and table.get(b, "k") is None
    table.put(b, "B")
    table.put(c, "C")  # full: the oldest entry dropped, not all of them
    assert (table.get(a, "k"), table.get(b), table.get(c)) == (None, "B", "C")
    table.put(a, "A")
    assert (table.get(a), table.get(b), table.get(c)) == ("A", None, "C")



def test_the_same_policy_object_binds_through_each_set_s_own_vocabularies() -> None:
    rule = {"exclude": {"field": "allergens", "values": ["{allergen}"], "vocabulary": "allergens"}}
    trigger = {"pattern": ["(without|sans) {allergen}"], "consume": True}
    data = {
        "policies": [{"id": "no-allergen", "priority": 75, "trigger": trigger, "rules": [rule]}],
        "vocabularies": [{"name": "allergens", "entries": {"en:peanuts": ["arachide"]}}],
    }
    first = policy_set(data, version="v1")
    renamed = Vocabulary.model_validate({"name": "allergens", "entries": {"peanuts": ["arachide"]}})
    second = PolicySet(  # a new version keeping the policy object, with another vocabulary
        version="v2", policies=first.policies, vocabularies=(renamed,), governance=first.governance
    )
    assert second.policies[0] is first.policies[0]
    intent = "chocolate sans arachide"
    span = Span(start=10, end=14, text="sans")
    words = Span(start=15, end=23, text="arachide")
    capture = CapturedText(name="allergen", text="arachide", span=words)
    found = Match(policy_id="no-allergen", spans=(span,), captures=(capture,))
    context = ComposeContext(category_field="categories", price_stats={"_all": LinearStats()})
    for _ in range(2):
        for policies, expected in ((first, ("en:peanuts",)), (second, ("peanuts",))):
            plan = compose(policies, intent, [found], context).plan
            assert [c.values for c in plan.exclusions] == [expected]


def test_a_remembered_binding_is_per_money_notation() -> None:
    """The same policy and captured words read through another money notation (a notation
    holds a dict: it is kept by identity, never hashed)."""
    policies = SETS["captures"]
    intent = "chocolate under 2k"
    found = Match(
        policy_id="under",
        spans=(Span(start=10, end=15, text="under"),),
        captures=(CapturedText(name="amount", text="2k", span=Span(start=16, end=18, text="2k")),),
    )
    rupees = MoneyNotation(currency="INR", multipliers={"k": 1000.0})
    stats = {"_all": LinearStats()}
    with_money = ComposeContext(category_field="categories", price_stats=stats, money=rupees)
    built_in = ComposeContext(category_field="categories", price_stats=stats)
    for _ in range(2):
        for context in (with_money, built_in):
            expected = _reference(policies, intent, [found], context)
            assert _fast(policies, intent, [found], context) == expected
    plan = compose(policies, intent, [found], with_money).plan
    assert plan.price.max is not None and plan.price.max.value == 2000.0
    skipped = compose(policies, intent, [found], built_in).explanation.skipped
    assert [s.code for s in skipped] == ["capture_unmapped"]
