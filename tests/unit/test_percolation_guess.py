"""The percolation guess's pure parts (ADR 0049): the tokens it is sure about, the analyzers
it trusts, the queries it reads, and the learner that runs its engine work. The guess
against the engine's own answers: ``tests/integration/test_percolation_guess.py``."""

from __future__ import annotations

import threading

import pytest

from control_plane import percolation_guess
from control_plane.catalog.analysis import PolicyAnalysis
from control_plane.percolation_guess import (
    COMPLEX,
    MAX_TOKEN,
    Guesser,
    Learner,
    Terms,
    per_token,
    standard_tokens,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("cheap chocolate", ["cheap", "chocolate"]),
        ("chocolat sans arachide", ["chocolat", "sans", "arachide"]),
        ("jus d'orange", ["jus", "d'orange"]),
        ("jus d\u2019orange", ["jus", "d\u2019orange"]),
        ("alice's lentils", ["alice's", "lentils"]),
        ("sugar-free cola", ["sugar", "free", "cola"]),
        ("1,5 kg", ["1,5", "kg"]),
        ("3.5l water", ["3.5l", "water"]),
        ("5kg", ["5kg"]),
        ("under 5.", ["under", "5"]),
        ("'quoted'", ["quoted"]),
        ("a.b", ["a.b"]),
        ("a,b", ["a", "b"]),
        ("1:2", ["1", "2"]),
        ("crème brûlée", ["crème", "brûlée"]),
        ("τσάι чай", ["τσάι", "чай"]),
        ("(chocolate)!", ["chocolate"]),
        ("", []),
        ("!!", []),
    ],
)
def test_tokens_are_the_standard_tokenizers_words(text: str, tokens: list[str]) -> None:
    found = standard_tokens(text)
    assert found is not None
    assert [token for _, _, token in found] == tokens
    assert all(text[start:end] == token for start, end, token in found)


@pytest.mark.parametrize(
    "text",
    [
        "snake_case", "中文", "chocolat 中", "🍫 chocolate", "thé\u0301", "a\u00b7b", "wort\u05d0",
        "x\u3000y", "a\tb",
    ],
)
def test_text_the_reading_is_not_sure_about_gets_no_tokens(text: str) -> None:
    assert standard_tokens(text) is None


def _analysis(
    filters: list[str], defined: dict[str, dict[str, str]] | None = None, **extra: object
) -> PolicyAnalysis:
    analyzer = {"type": "custom", "tokenizer": "standard", "filter": filters, **extra}
    return PolicyAnalysis("text", {"analyzer": {"text": analyzer}, "filter": defined or {}})


def test_only_an_analyzer_of_one_term_per_token_is_trusted() -> None:
    assert per_token(PolicyAnalysis("standard", {}))
    assert per_token(_analysis(["lowercase", "asciifolding"]))
    assert per_token(_analysis(["fr_stem"], {"fr_stem": {"type": "stemmer", "language": "minimal_french"}}))
    assert not per_token(_analysis(["lowercase", "stop"]))  # removes tokens
    assert not per_token(_analysis(["syn"], {"syn": {"type": "synonym_graph"}}))  # depends on neighbours
    assert not per_token(_analysis(["lowercase"], char_filter=["html_strip"]))
    assert not per_token(PolicyAnalysis("text", {"analyzer": {"text": {"tokenizer": "whitespace"}}}))
    assert not per_token(PolicyAnalysis("english", {}))  # a built-in with a stop filter


DOCUMENTS = {
    "exact:oranges": ("exact", "oranges"),
    "phrase:chocolate": ("phrase", "chocolate"),
    "phrase:dark-chocolate": ("phrase", "dark chocolate"),
    "phrase:pas-cher": ("phrase", "pas cher"),
    "suffix:free": ("suffix", "-free"),
}
TERMS = {
    "oranges": "orang", "Oranges": "orang", "chocolate": "chocolat", "chocolat": "chocolat",
    "dark": "dark", "pas": "_pas", "cher": "cher", "free": "free", "sugarfree": "sugarfre",
    "juice": "juic", "cheap": "cheap", "the": COMPLEX,
}


def _guesser() -> Guesser:
    guesser = Guesser.of(DOCUMENTS, Terms(known=TERMS))
    assert guesser is not None
    return guesser


@pytest.mark.parametrize(
    ("intent", "found"),
    [
        ("oranges", {"exact:oranges": [(0, 7)]}),
        ("Oranges", {"exact:oranges": [(0, 7)]}),
        ("oranges juice", {}),  # exact: the whole intent
        ("cheap chocolat", {"phrase:chocolate": [(6, 14)]}),
        ("dark chocolate", {"phrase:chocolate": [(5, 14)], "phrase:dark-chocolate": [(0, 4), (5, 14)]}),
        ("chocolate dark", {"phrase:chocolate": [(0, 9)]}),
        ("pas cher pas cher", {"phrase:pas-cher": [(0, 3), (4, 8), (9, 12), (13, 17)]}),
        ("cher pas", {}),
        ("sugarfree", {"suffix:free": [(0, 9)]}),
        ("cheap free", {"suffix:free": [(6, 10)]}),  # the phrase "free" itself
    ],
)
def test_the_guess_is_every_document_a_query_of_matches_with_its_words(
    intent: str, found: dict[str, list[tuple[int, int]]]
) -> None:
    guess = _guesser().guess(intent)
    assert guess == found
    assert list(guess) == sorted(found)  # in document id order, as the engine sorts them


@pytest.mark.parametrize("intent", ["the chocolate", "unknown chocolate", "chocolate 🍫", "snake_case"])
def test_no_guess_with_a_word_not_learned_or_not_read(intent: str) -> None:
    assert _guesser().guess(intent) is None


def test_a_phrase_not_read_here_leaves_out_the_intents_holding_its_words() -> None:
    unread = {
        "phrase:x": ("phrase", "the chocolate"),  # "the": no term of its own
        "phrase:y": ("phrase", "never learned"),
        "phrase:z": ("phrase", "thé 中文"),
    }
    guesser = Guesser.of({**DOCUMENTS, **unread}, Terms(known=TERMS))
    assert guesser.unread == {"the", "chocolate", "never", "learned", "thé", "中", "文"}
    for intent in ("dark chocolate", "learned", "Never", "thé"):
        assert guesser.guess(intent) is None, intent
    assert guesser.guess("oranges") == {"exact:oranges": [(0, 7)]}
    assert guesser.guess("pas cher") == {"phrase:pas-cher": [(0, 3), (4, 8)]}


def test_a_token_longer_than_any_word_is_not_read() -> None:
    assert standard_tokens("a" * MAX_TOKEN) == [(0, MAX_TOKEN, "a" * MAX_TOKEN)]
    assert standard_tokens("cheap " + "a" * (MAX_TOKEN + 1)) is None


def test_the_learner_runs_jobs_in_order_drops_repeats_and_survives_a_failing_job() -> None:
    learner = Learner(size=4)
    started, gate, ran = threading.Event(), threading.Event(), []

    def holding() -> None:
        started.set()
        gate.wait(5)
        ran.append("first")

    def failing() -> None:
        raise RuntimeError("the engine is gone")

    try:
        learner.submit("first", holding)
        assert started.wait(5)  # taken off the queue: the thread is held in it
        learner.submit("failing", failing)
        for name in ("second", "third", "fourth"):
            learner.submit(name, lambda name=name: ran.append(name))
        learner.submit("second", lambda: ran.append("second, again"))  # one of that key waits: dropped
        learner.submit("fifth", lambda: ran.append("fifth"))  # the queue holds four: dropped
        gate.set()
        learner.settle()
        assert ran == ["first", "second", "third", "fourth"]
        learner.submit("second", lambda: ran.append("second, later"))  # no longer waiting: taken
        learner.settle()
        assert ran[-1] == "second, later"  # and the thread outlived the failing job
    finally:
        learner.close()


def test_the_learners_thread_ends_when_idle_and_a_later_job_starts_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(percolation_guess, "IDLE_S", 0.05)
    learner, ran = Learner(), []
    try:
        learner.submit("first", lambda: ran.append(threading.current_thread()))
        learner.settle()
        (first,) = ran
        first.join(5)  # idle: it ends
        assert not first.is_alive()
        learner.submit("second", lambda: ran.append(threading.current_thread()))
        learner.settle()
        assert ran[1] is not first and ran == [first, ran[1]]
    finally:
        learner.close()
    learner.submit("after close", lambda: ran.append(threading.current_thread()))
    assert learner._thread is None and not learner._waiting  # refused: nothing queued or started
    learner.settle()  # and nothing to wait for
