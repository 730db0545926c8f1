"""The percolation guess (ADR 0049) against the engine's own answers.

- Its tokens are the standard tokenizer's, offset for offset, for every text it reads (a
  seeded corpus of words, numbers and signs, letters of three scripts, glued and spaced).
- Its guess is what the engine's percolation finds, document for document and range for
  range, in the engine's order, on the demo's published triggers (phrases, patterns, exact
  phrases) and on the matcher's case file (exact phrases, patterns, disabled policies) with a
  pattern of suffix cues and an ``unless`` phrase, for the
  bench's and the regression file's intents, every trigger phrase in forms the tokenizer
  and the analyzer cut differently (elision, plurals, case, accents, digits, signs), and
  hostile text; and it guesses most of them (the test fails if it guesses too few to matter).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest

from control_plane import matcher, policy_store
from control_plane.bootstrap import Ready
from control_plane.engine import Engine
from control_plane.intent_text import search_intent
from control_plane.loader import load_policy_set
from control_plane.percolation_guess import COMPLEX, Guessing, Terms, standard_tokens
from control_plane.policy_store import ANALYZE_BATCH
from tests.e2e.conftest import ready, settings  # noqa: F401
from tests.integration.test_hot_path import QUERIES
from tests.integration.test_matching import CASES, build, hostile_intent
from tests.integration.test_speculation import _corpus

ALPHABET = "abcdeéèçàôüßæøœ" + "ABCÉ" + "αβγΣ" + "жчя" + "0123456789" + "  " + "'.,;:\u2019-/!?()&%+\"#@"


LETTERS = "".join(
    chr(c) for c in [*range(0x530), *range(0x1E00, 0x1F00)] if standard_tokens(chr(c)) == [(0, 1, chr(c))]
)
"""every letter the tokens read (Latin, Greek, Cyrillic)"""


def _texts(count: int, alphabet: str = ALPHABET, longest: int = 14) -> list[str]:
    """Short texts drawn from ``alphabet`` (seeded: the same corpus on every run)."""
    draw = random.Random(49)
    return ["".join(draw.choice(alphabet) for _ in range(draw.randint(1, longest))) for _ in range(count)]


CRAFTED = [
    "jus d'orange", "l'huile d'olive", "alice's lentils", "aujourd\u2019hui", "1,5 kg", "1.5kg", "3.5l",
    "a.b.c", "a.1", "1.a", "u.s.a.", "e-mail", "sans-arachide", "sugar-free", "5'6", "x'", "'x",
    "a:b", "12:30", "1;2", "a;b", "éclair's", "Σίσυφος", "чай-молоко", "rock'n'roll", "...",
]


def test_its_tokens_are_the_standard_tokenizers(engine: Engine) -> None:
    read = 0
    every_letter = _texts(300, LETTERS + "0123456789" + "   '.,;:\u2019-", longest=40)
    for text in [*CRAFTED, *_texts(400), *every_letter, "a" * 64, "b" * 65]:
        tokens = standard_tokens(text)
        if tokens is None:
            continue
        read += 1
        answer = engine.request("POST", "/_analyze", body={"tokenizer": "standard", "text": text})
        engine_tokens = [(t["start_offset"], t["end_offset"], t["token"]) for t in answer["tokens"]]
        assert tokens == engine_tokens, text
    assert len(LETTERS) > 1000
    assert read >= 650  # it reads most of the corpus


def _variants() -> list[str]:
    """Forms of every demo phrase the analyzer reads otherwise than the tokenizer's words:
    plurals, elisions, case, accents, hyphens, digits."""
    around = (
        "{}s", "d'{}", "l\u2019{}", "{}-free", "{} 1,5 kg", "pas de {}", "{} sans lait", "{}. {}", "{} ?"
    )
    phrases = {value for p in load_policy_set(QUERIES.parents[1]).policies for value in p.trigger.values}
    return [form.format(phrase, phrase) for phrase in sorted(phrases) for form in around]


def _check(engine: Engine, index: str, documents: dict[str, tuple[str, str]], texts: list[str]) -> int:
    """Every guess of ``texts`` (normalised) against the percolation of ``index``; the number
    of texts guessed. Each is guessed once its words are learned (a first try teaches them)."""
    guessing = Guessing(engine, policy_store.default_analysis)
    scope = f"{index}#test"
    try:
        assert guessing.guess(scope, index, documents, "x") is None  # the version's guesser: built next
        guessing.learner.settle()
        intents = list(dict.fromkeys(search_intent(text).text for text in texts))
        for intent in intents:
            guessing.guess(scope, index, documents, intent)  # teaches its words, if need be
        guessing.learner.settle()
        guessed, wrong = 0, []
        for intent in intents:
            guess = guessing.guess(scope, index, documents, intent)
            if guess is None:
                continue
            guessed += 1
            found = matcher.percolated(engine, index, intent)
            if list(guess.items()) != list(found.items()):
                wrong.append((intent, dict(guess), dict(found)))
        assert not wrong
        return guessed
    finally:
        guessing.close()


def test_the_guess_is_the_percolation_of_the_demo_triggers(engine: Engine, ready: Ready) -> None:  # noqa: F811
    policies = matcher.PolicyMap(load_policy_set(QUERIES.parents[1]).policies)
    texts = [*_corpus(), *_variants()]
    guessed = _check(engine, ready.policies_index, dict(policies.triggers.documents), texts)
    assert guessed >= 0.6 * len(set(texts))


FREE_FROM = {
    "id": "free-from", "title": "free from an allergen", "owner": "test", "priority": 80,
    "trigger": {"pattern": ["{allergen} (-free|-less)"], "unless": ["free from care"]},
    "rules": [{"exclude": {"field": "allergens", "values": ["{allergen}"], "vocabulary": "allergens"}}],
}
"""a pattern of suffix cues (``-free`` is also the end of a word: ``sugarfree``) with an
``unless`` phrase"""


@pytest.fixture(scope="module")
def cases_index(engine: Engine) -> Iterator[tuple[str, matcher.PolicyMap]]:
    """The matcher's case file and :data:`FREE_FROM`, published in an index of their own."""
    prefix = f"gstest-guess-{uuid.uuid4().hex[:8]}"
    policy_set = build({**CASES, "policies": [*CASES["policies"], FREE_FROM]})
    index = policy_store.publish(engine, prefix, policy_set, "live")
    yield index, matcher.PolicyMap(policy_set.policies)
    for name in engine.list_indices(prefix + "*"):
        engine.delete_index(name)


def test_the_guess_is_the_percolation_of_exact_suffix_unless_and_disabled_triggers(
    engine: Engine, cases_index: tuple[str, matcher.PolicyMap]
) -> None:
    index, policies = cases_index
    assert {kind for kind, _ in policies.triggers.documents.values()} == {"phrase", "exact", "suffix"}
    disabled = [p for p in policies.values() if not p.enabled and p.trigger.kind != "always"]
    assert disabled  # their documents are in the index: the guess has them too
    texts = [case["intent"] for case in CASES["cases"]]
    texts += [hostile_intent(entry) for entry in CASES["hostile"]]
    texts += ["sugarfree chocolate", "peanut-free", "peanutfree", "milkless", "milk-less cookies", "free",
              "free from care", "sugarless", "chocolat sans lait", "oranges", "Oranges", "champagne"]
    guessed = _check(engine, index, dict(policies.triggers.documents), texts)
    assert guessed >= 0.6 * len(set(texts))


def test_terms_are_learned_as_the_analyzer_makes_each_token_alone(engine: Engine, ready: Ready) -> None:  # noqa: F811
    """Over several ``_analyze`` requests (an array each, offsets running on): each token's
    term is the one the analyzer gives it analysed alone; one it cuts in two has none."""
    analyzer = policy_store.default_analysis().analyzer
    special = ["chocolats", "L'orange", "Oranges", "d\u2019arachide", "1,5", "crème", "the", "a" * 300]
    tokens = [*(f"w{number}x" for number in range(ANALYZE_BATCH * 2 + 17)), *special]
    terms = Terms()
    terms.learn(engine, ready.policies_index, analyzer, tokens)
    assert len(terms) == len(tokens)
    for token in [*special, *tokens[ANALYZE_BATCH - 2 : ANALYZE_BATCH + 2], tokens[-len(special) - 1]]:
        alone = engine.analyze(ready.policies_index, analyzer, token)
        expected = alone[0]["token"] if len(alone) == 1 else COMPLEX
        assert terms.get(token) == expected, token
    assert terms.get("a" * 300) == COMPLEX  # the tokenizer cuts at 255
    terms.learn(engine, ready.policies_index, analyzer, ["chocolat"])
    assert terms.get("chocolats") == terms.get("chocolat") == terms.get("Chocolat".lower())  # stemmed alike
