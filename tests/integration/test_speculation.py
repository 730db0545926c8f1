"""Speculation against the real engine (ADR 0048): a plan miss of a request without a user,
whose intent shares no word with any trigger phrase, sends its percolation and the first
tiers of the plan it gets when nothing matches in one ``_msearch``. Whatever the guess, the
answer, the plan and the bodies are those of the search without speculation; the
percolation decides, and its failure fails the search."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from bench.governed import INTENTS
from control_plane import matcher
from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError
from control_plane.intent_text import search_intent
from control_plane.lifecycle.regression import load_queries
from control_plane.loader import load_policy_set
from control_plane.service import PURCHASES_INDEX, SearchRequest, SearchService, _percolation_scope
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import CHRISTMAS, QUERIES, Recording, _seen, _service

UNMATCHED = ("mustard", "french toast", "salad dressing", "vanilla ice cream", "lentils")
"""demo intents no trigger phrase shares a word with"""
MATCHED = ("chocolate", "cheap chocolate", "chocolat sans arachide", "baby formula", "clearance")
NOTHING_FOUND = "quantum xylophone"
"""no product has these words: every tier runs (the first with the percolation)"""


def _items(path: str, body: object) -> list[str]:
    """The indices one request searched, in order (an ``_msearch``'s items, or a ``_search``'s)."""
    if path == "/_msearch":
        assert isinstance(body, str)
        return [json.loads(header)["index"] for header in body.splitlines()[::2]]
    return [path.split("/")[1]]


@pytest.fixture()
def pair(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> Iterator[tuple[Recording, SearchService, SearchService]]:
    """A recorded service that speculates, one that does not; neither caches plans (every
    search a miss). Their watches are read before the test."""
    recording = Recording(engine)
    on = _service(recording, settings, ready, plan_cache_size=0, speculation=True)
    off = _service(engine, settings, ready, plan_cache_size=0, speculation=False)
    for service in (on, off):
        service.search(SearchRequest(intent="oranges"), FIXED_NOW)
    _settled(on)  # the version's guesses learned (ADR 0049)
    recording.sent.clear()
    yield recording, on, off
    on.close()
    off.close()


def _settled(service: SearchService) -> None:
    """Wait for what the service's guesses learn in the background."""
    assert service.guessing is not None
    service.guessing.learner.settle()


def _same(first: SearchService, second: SearchService, request: SearchRequest, now: datetime) -> None:
    one, other = first.search(request, now), second.search(request, now)
    assert _seen(one.execution) == _seen(other.execution)
    assert one.compiled.composition == other.compiled.composition
    assert one.compiled.explanation_data() == other.compiled.explanation_data()
    assert one.compiled.plan_data() == other.compiled.plan_data()


@pytest.mark.parametrize("now", [FIXED_NOW, CHRISTMAS], ids=["ordinary-day", "christmas"])
@pytest.mark.parametrize("intent", UNMATCHED)
def test_an_unmatched_intent_takes_one_round_trip_and_is_served_as_without_speculation(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready, intent: str, now: datetime  # noqa: F811
) -> None:
    recording, on, off = pair
    _, policies = on.snapshot()
    assert isinstance(policies, matcher.PolicyMap) and not policies.triggers.may_match(intent)
    for cohorts in ((), ("vegan",)):
        request = SearchRequest(intent=intent, cohorts=cohorts)
        recording.sent.clear()
        outcome = on.search(request, now)
        first = recording.sent[0]
        assert first[1] == "/_msearch"
        assert _items(first[1], first[2]) == [ready.policies_index, on.profile.alias]  # percolation, strict
        assert outcome.engine_requests == outcome.execution.round_trips == len(recording.sent)
        stages = {stage.name: stage for stage in outcome.stages}
        assert stages["percolate"].start_ns <= stages["compose"].start_ns  # the shared round trip
        assert stages["percolate"].end_ns >= stages["render.strict"].end_ns
        assert off.search(request, now).engine_requests == outcome.engine_requests + 1
        _same(on, off, request, now)


def test_tiers_past_the_first_are_sent_after_it_as_without_speculation(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready  # noqa: F811
) -> None:
    recording, on, off = pair
    request = SearchRequest(intent=NOTHING_FOUND)
    outcome = on.search(request, FIXED_NOW)
    assert outcome.execution.status == "no_results"
    assert [run.tier for run in outcome.execution.runs] == ["strict", "relaxed", "broad"]
    assert len(recording.sent) == outcome.engine_requests == 3  # the strict tier went with the percolation
    assert [_items(path, body) for _, path, body in recording.sent[1:]] == [[on.profile.alias]] * 2
    _same(on, off, request, FIXED_NOW)


@pytest.mark.parametrize("intent", MATCHED)
def test_a_matched_intent_once_its_words_are_learned_takes_one_round_trip_less(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready, intent: str  # noqa: F811
) -> None:
    """ADR 0049: the learned guess is the percolation's answer, so the plan guessed is the
    plan, and its first tier goes with the percolation."""
    recording, on, off = pair
    request = SearchRequest(intent=intent)
    on.search(request, FIXED_NOW)  # whatever its words, they are learned after this one
    _settled(on)
    recording.sent.clear()
    right, wrong = on.speculations.counts()
    outcome = on.search(request, FIXED_NOW)
    first = recording.sent[0]
    assert _items(first[1], first[2]) == [ready.policies_index, on.profile.alias]
    assert outcome.compiled.composition.explanation.matched
    assert on.speculations.counts() == (right + 1, wrong)
    assert all(ready.policies_index not in _items(path, body) for _, path, body in recording.sent[1:])
    assert outcome.engine_requests == off.search(request, FIXED_NOW).engine_requests - 1
    _same(on, off, request, FIXED_NOW)


def test_an_intent_with_a_word_not_learned_is_not_speculated_until_it_is(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready  # noqa: F811
) -> None:
    recording, on, off = pair
    request = SearchRequest(intent="cheap chocolate zanzibar")  # "zanzibar": in no trigger phrase
    recording.learned.clear()
    on.search(request, FIXED_NOW)
    assert recording.sent[0][1] == f"/{ready.policies_index}/_search"  # the percolation alone, first
    _settled(on)
    assert [(path, body["text"]) for _, path, body in recording.learned] == [
        (f"/{ready.policies_index}/_analyze", ["zanzibar"])
    ]
    recording.sent.clear()
    outcome = on.search(request, FIXED_NOW)
    assert _items(recording.sent[0][1], recording.sent[0][2]) == [ready.policies_index, on.profile.alias]
    assert outcome.engine_requests == off.search(request, FIXED_NOW).engine_requests - 1
    _same(on, off, request, FIXED_NOW)


@pytest.mark.parametrize("intent", ["mustard", "lentils"])
def test_a_user_whose_purchases_are_cached_is_speculated_with_the_boosts_of_a_search_without(
    engine: Engine, settings: Settings, ready: Ready, intent: str  # noqa: F811
) -> None:
    """Plans cached: a first search caches alice's purchases; then a new unmatched intent is
    a plan miss whose bodies carry her boosts: one round trip, the same answer. A user whose
    purchases are not cached yet is not speculated (they go with the percolation)."""
    recording = Recording(engine)
    on = _service(recording, settings, ready, speculation=True)
    off = _service(engine, settings, ready, speculation=False)
    try:
        for service in (on, off):
            service.search(SearchRequest(intent="oranges", user_id="alice"), FIXED_NOW)  # her rows cached
        recording.sent.clear()
        request = SearchRequest(intent=intent, user_id="alice")
        one, other = on.search(request, FIXED_NOW), off.search(request, FIXED_NOW)
        assert not one.compiled.cached and one.compiled.purchases and one.compiled.personalization
        assert one.engine_requests == 1 == other.engine_requests - 1 == len(recording.sent)
        assert _seen(one.execution) == _seen(other.execution)
        assert one.compiled.personalization == other.compiled.personalization
        assert one.compiled.composition == other.compiled.composition
        recording.sent.clear()
        new = on.search(SearchRequest(intent=f"{intent} x", user_id="someone-new"), FIXED_NOW)
        assert not new.compiled.cached  # a miss, not speculated: percolation and purchases together
        assert _items(recording.sent[0][1], recording.sent[0][2]) == [ready.policies_index, PURCHASES_INDEX]
    finally:
        on.close()
        off.close()


WRONG = {
    "one-document-less": lambda found: dict(list(found.items())[:-1]),
    "ranges-narrowed": lambda found: {d: [(a, b - 1) for a, b in r] for d, r in found.items()},
    "order-reversed": lambda found: dict(reversed(list(found.items()))),
}
"""ways to make a learned guess wrong (the order: for intents of two documents or more)"""


@pytest.fixture(params=["nothing", "one-document-less", "ranges-narrowed"])
def every_guess_wrong(
    request: pytest.FixtureRequest, pair: tuple[Recording, SearchService, SearchService]
) -> Iterator[None]:
    """The speculating service guesses wrong: that no intent matches anything (ADR 0048's
    guess, with no learned one), or the learned guess made wrong by one of :data:`WRONG`
    (the same documents with other ranges, or in another order, must be found wrong too)."""
    on = pair[1]
    _, policies = on.snapshot()
    assert isinstance(policies, matcher.PolicyMap) and on.guessing is not None
    words, guessing, guess = policies.triggers.words, on.guessing, on.guessing.guess
    if request.param == "nothing":
        policies.triggers.words, on.guessing = frozenset(), None
    else:
        for intent in MATCHED:  # their words learned, so that each is guessed
            on.search(SearchRequest(intent=intent, market="zz"), FIXED_NOW)
        _settled(on)
        pair[0].sent.clear()

        wrong = WRONG[request.param]

        def wrongly(*args: Any) -> matcher.Percolated | None:
            found = guess(*args)
            assert found, "the learned guess is known and matches something"
            return wrong(found)

        guessing.guess = wrongly  # type: ignore[method-assign]
    yield
    policies.triggers.words, on.guessing = words, guessing
    guessing.guess = guess  # type: ignore[method-assign]


@pytest.mark.parametrize("intent", MATCHED)
def test_a_wrong_guess_serves_what_the_percolation_found_without_percolating_again(
    pair: tuple[Recording, SearchService, SearchService], every_guess_wrong: None, ready: Ready, intent: str  # noqa: F811
) -> None:
    recording, on, off = pair
    request = SearchRequest(intent=intent)
    right, wrong = on.speculations.counts()
    outcome = on.search(request, FIXED_NOW)
    assert outcome.compiled.composition.explanation.matched  # it matched: the guess was wrong
    assert on.speculations.counts() == (right, wrong + 1)
    first, *tiers = recording.sent
    assert _items(first[1], first[2]) == [ready.policies_index, on.profile.alias]
    assert all(ready.policies_index not in _items(path, body) for _, path, body in tiers)  # percolated once
    assert outcome.engine_requests == 1 + outcome.execution.round_trips
    assert outcome.engine_requests == off.search(request, FIXED_NOW).engine_requests
    names = [stage.name for stage in outcome.stages]  # the dropped plan's work is not timed as the plan's
    assert names.count("compose") == names.count("percolate") == names.count("render.strict") == 1
    _same(on, off, request, FIXED_NOW)


@pytest.mark.parametrize("intent", ["chocolate", "cheap chocolate", "chocolat sans arachide"])
def test_the_same_documents_in_another_order_are_a_wrong_guess(
    pair: tuple[Recording, SearchService, SearchService], intent: str
) -> None:
    """The order matters: the matches are expanded in the percolation's order."""
    _, on, off = pair
    assert on.guessing is not None
    on.search(SearchRequest(intent=intent, market="zz"), FIXED_NOW)  # its words learned
    _settled(on)
    guess = on.guessing.guess
    found = guess(*_guess_args(on, intent))
    assert found is not None and len(found) >= 2
    on.guessing.guess = lambda *args: WRONG["order-reversed"](guess(*args))  # type: ignore[method-assign]
    try:
        right, wrong = on.speculations.counts()
        _same(on, off, SearchRequest(intent=intent), FIXED_NOW)
        assert on.speculations.counts() == (right, wrong + 1)
    finally:
        on.guessing.guess = guess  # type: ignore[method-assign]


def _guess_args(service: SearchService, intent: str) -> tuple[str, str, object, str]:
    live, policies = service.snapshot()
    assert isinstance(policies, matcher.PolicyMap)
    return f"{live.index}#{live.load}", live.index, policies.triggers.documents, search_intent(intent).text


class FailingTiers(Recording):
    """The real engine; the tier items of a speculated ``_msearch`` (the percolation of
    ``policies_index`` first) are sent to an index that does not exist: they fail, the
    percolation answers."""

    def __init__(self, real: Engine, policies_index: str) -> None:
        super().__init__(real)
        self.policies_index = policies_index

    def request(
        self, method: str, path: str, body: Any = None, params: Any = None, timeout_s: Any = None
    ) -> Any:
        if path == "/_msearch" and isinstance(body, str):
            lines = body.splitlines()
            if json.loads(lines[0])["index"] == self.policies_index:
                for at in range(2, len(lines), 2):
                    lines[at] = json.dumps({"index": "gstest-no-such-index"})
                body = "\n".join(lines) + "\n"
        return super().request(method, path, body, params, timeout_s)


@pytest.mark.parametrize("intent", ["chocolate", "mustard"])
def test_a_failed_tier_fails_a_right_guess_closed_and_not_a_wrong_one(
    engine: Engine, settings: Settings, ready: Ready, intent: str  # noqa: F811
) -> None:
    """A right guess's tiers are served: one that failed fails the request closed (503), as
    without speculation. A wrong guess's tiers are dropped, so their failure fails nothing:
    the plan the percolation found is served."""
    failing = FailingTiers(engine, ready.policies_index)
    on = _service(failing, settings, ready, plan_cache_size=0, speculation=True)
    off = _service(engine, settings, ready, plan_cache_size=0, speculation=False)
    try:
        on.search(SearchRequest(intent="oranges"), FIXED_NOW)  # not speculated: nothing learned yet
        _settled(on)  # the version's phrases learned (chocolate's words among them)
        request = SearchRequest(intent=intent)
        with pytest.raises(EngineError):
            on.search(request, FIXED_NOW)  # guessed right: its failed tier fails it
        assert on.speculations.counts()[0] >= 1
        assert on.guessing is not None
        guess = on.guessing.guess
        on.guessing.guess = lambda *args: {"phrase:made-up": [(0, 1)]}  # type: ignore[method-assign]
        served = on.search(request, FIXED_NOW)  # guessed wrong: its failed tiers are dropped
        on.guessing.guess = guess  # type: ignore[method-assign]
        assert served.execution.status == "ok"
        assert _seen(served.execution) == _seen(off.search(request, FIXED_NOW).execution)
    finally:
        on.close()
        off.close()


def test_a_guess_that_cannot_be_composed_is_not_tried(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready  # noqa: F811
) -> None:
    """A guess no percolation gives (a span past the intent's end) fails its composition:
    the miss goes as without speculation."""
    recording, on, off = pair
    assert on.guessing is not None
    intent = "cheap chocolate"
    on.search(SearchRequest(intent=intent, market="zz"), FIXED_NOW)  # its words learned
    _settled(on)
    recording.sent.clear()
    guess = on.guessing.guess
    on.guessing.guess = lambda *args: {  # type: ignore[method-assign]
        document: [(a + 100, b + 100) for a, b in ranges] for document, ranges in (guess(*args) or {}).items()
    }
    try:
        _same(on, off, SearchRequest(intent=intent), FIXED_NOW)
        assert recording.sent[0][1] == f"/{ready.policies_index}/_search"  # not speculated
    finally:
        on.guessing.guess = guess  # type: ignore[method-assign]


def test_a_guess_that_raises_fails_nothing(
    pair: tuple[Recording, SearchService, SearchService], ready: Ready  # noqa: F811
) -> None:
    recording, on, off = pair
    assert on.guessing is not None

    def broken(*args: Any) -> None:
        raise KeyError("a bug in the guess")

    guess, on.guessing.guess = on.guessing.guess, broken  # type: ignore[method-assign]
    try:
        _same(on, off, SearchRequest(intent="cheap chocolate"), FIXED_NOW)
        assert recording.sent[0][1] == f"/{ready.policies_index}/_search"  # not speculated
    finally:
        on.guessing.guess = guess  # type: ignore[method-assign]


@pytest.mark.parametrize("intent", ["mustard", "chocolate"])
def test_a_failed_percolation_fails_the_search_though_its_tiers_answered(
    engine: Engine, settings: Settings, ready: Ready, intent: str  # noqa: F811
) -> None:
    """The policies index closed: the percolation item fails, the catalog's tier answers.
    Nothing is served and nothing is cached, with speculation as without, for an intent
    guessed to match nothing (ADR 0048) as for one guessed to match (ADR 0049)."""
    on = _service(engine, settings, ready, speculation=True)
    off = _service(engine, settings, ready, speculation=False)
    request = SearchRequest(intent=intent)
    try:
        for service in (on, off):
            service.search(SearchRequest(intent="oranges"), FIXED_NOW)  # the watches read
        _settled(on)  # the guesses learned
        live, policies = on.snapshot()
        assert isinstance(policies, matcher.PolicyMap)
        assert on._guess(live, _percolation_scope(live), policies.triggers, intent) is not None  # speculated
        engine.request("POST", f"/{ready.policies_index}/_close")
        for service in (on, off):
            with pytest.raises(EngineError):
                service.search(request, FIXED_NOW)
        assert len(on.cache) == len(off.cache) == 1  # "oranges" alone
    finally:
        engine.request("POST", f"/{ready.policies_index}/_open")
        health = {"wait_for_status": "yellow", "timeout": "30s"}
        engine.request("GET", f"/_cluster/health/{ready.policies_index}", params=health)
    served = on.search(request, FIXED_NOW)  # open again: speculated and served
    assert served.engine_requests == 1 and served.execution.status == "ok"
    on.close()
    off.close()


def _trigger_texts() -> list[str]:
    """Every phrase of every demo trigger (a pattern's cues with a word after them)."""
    texts = []
    for policy in load_policy_set(QUERIES.parents[1]).policies:
        trigger = policy.trigger
        if trigger.kind == "pattern":
            texts += [f"{cue} milk" for pattern in trigger.patterns for cue in pattern.cues]
        elif trigger.kind != "always":
            texts += list(trigger.values)
    return texts


def _corpus() -> list[str]:
    """The bench's and the regression file's intents, each trigger phrase alone and glued to
    what the tokenizer cuts at (ideographs, kana, hangul, signs, digits, apostrophes), in a
    sentence, upper-cased; and words no demo trigger has."""
    around = ("{}", "中{}", "{}中", "テ{}", "{}한", "{}!", "¿{}?", "«{}»", "l'{}", "{}'s", "2{}", "{}2",
              "i want {} please", "{}-free", "#{}", "{}\u3000bio", "{}.")
    texts = [*INTENTS, *(request.intent for request in load_queries(QUERIES))]
    for phrase in _trigger_texts():
        texts += [form.format(phrase) for form in around] + [phrase.upper()]
    return [*texts, "mustard", "quantum xylophone", "pâtes complètes", "riz basmati", "🍫", "中文", "x"]


def test_the_guess_never_says_no_to_an_intent_the_engine_matches(
    engine: Engine, settings: Settings, ready: Ready  # noqa: F811
) -> None:
    """Against the engine's own percolation of the demo's published triggers: every intent
    it finds a trigger document for, the guess says may match; and the guess does say no
    (to intents the engine then finds nothing for), so speculation happens at all."""
    service = _service(engine, settings, ready)
    _, policies = service.snapshot()
    service.close()
    assert isinstance(policies, matcher.PolicyMap)
    wrong, unmatched = [], 0
    for raw in _corpus():
        intent = search_intent(raw).text
        found = matcher.percolated(engine, ready.policies_index, intent)
        guess = policies.triggers.may_match(intent)
        if found and not guess:
            wrong.append((raw, intent, sorted(found)))
        unmatched += not guess
    assert not wrong
    assert unmatched >= 8
