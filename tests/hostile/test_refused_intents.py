"""A refused intent leaves nothing behind, and is refused exactly as the definition says.

An intent within its bound as received can expand past it once normalised (NFKC: U+FDFA is
18 characters). Such an intent is refused (``/v1/search``: 422, the agent: 413 or an
abstention), and the refusal is decided on, and quotes, the normalised length. Before
2026-12-07 the search intent's refusal also left the intent in the process's normalisation
cache (``search_intent``, 4,096 entries): a stream of refused intents pushed the intents
being served out of it, and each cost 5.5 ms of event-loop time, normalised character by
character (bench/RESULTS.md, 2026-12-07). Now a refused intent is not remembered, and the
normaliser does its per-character and per-word work once per distinct character and word.

The refusal decisions, their messages and what normalisation reports are held here to the
definition: the steps done one by one (:func:`plainly`, the normaliser as it was), over a
corpus of hostile texts at each bound (512 for a search, 2,000 for an agent's message, 120
for an extracted or MCP intent) and over generated ones.

An extracted or MCP intent also has a bound as received, 16 times its own (1,920): the MCP
tool's argument had none, so refusing a megabyte intent normalised all of it first. Past
that bound it is refused without being normalised (ADR 0058).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_gateway.guardrails import MessageTooLarge, screen
from agent_gateway.intent_validation import validate_intent
from control_plane.bootstrap import Ready
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.intent_text import (
    _WORD,
    NormalisedIntent,
    _latin_word,
    _visible,
    normalise_intent,
    search_intent,
)
from control_plane.lifecycle.suite import TestCase
from control_plane.service import SearchRequest, SearchService
from tests.hostile.conftest import Recorded, recorded_app

SEARCH, MESSAGE, EXTRACTED = 512, 2000, 120


def plainly(raw: str) -> NormalisedIntent:
    """The steps of :mod:`control_plane.intent_text`, character by character and word by
    word (the normaliser as it was before 2026-12-07): the definition."""
    folded = unicodedata.normalize("NFKC", raw)
    visible = "".join(_visible(char) for char in folded)
    mixed: list[str] = []
    mapped = visible if visible.isascii() else _WORD.sub(lambda m: _latin_word(m.group(), mixed), visible)
    text = " ".join(unicodedata.normalize("NFKC", mapped).split())
    return NormalisedIntent(text=text, changed=text != raw, removed=len(folded) - len(visible),
                            mixed_script=tuple(mixed))


#: characters NFKC expands, and by how much
EXPANDERS = {"\ufdfa": 18, "\ufdfb": 8, "\u3316": 6, "\ufb03": 3, "\u2474": 3, "\ufb01": 2,
             "\u0344": 2, "\u0958": 2}
CYRILLIC_A, CYRILLIC_I = "\u0430", "\u0456"


def hostile(bound: int) -> list[str]:
    """Texts of at most ``bound`` characters as received, on both sides of ``bound`` once
    normalised: expanders at and just past it, expanders hidden behind zero-width and
    white-space characters, combining marks, mixed-script words (whose mapped letters
    compose with their accents, shrinking them), nothing visible."""
    texts: list[str] = []
    for char, size in EXPANDERS.items():
        fits = bound // size
        texts += [char * fits, char * (fits + 1), "a" * (bound - fits) + char * fits,
                  "a" * (bound - fits - 1) + char * (fits + 1)]
        texts += [(char + "\u200b") * (fits + 1), (char + "\u3000") * (fits // 2 + 1)]
    half = bound // 2
    texts += [
        "\u200b" * bound, "\ufe0f" * bound, "\u3164" * bound, "\u3000" * bound,  # nothing visible
        "a\u200b" * half, "a\ufe0f" * half, "\u2003a" * half, "a\u0301" * half,
        "a" + "\u0300" * (bound - 1), "e" + "\u0344" * (bound - 1),
        (CYRILLIC_A + "\u0301b") * (bound // 3),  # mixed: mapped to a, then composed with the accent
        # one mixed word, 6/5 of the bound before its letters are mapped, the bound after
        "\ufb01" * (2 * bound // 5) + (CYRILLIC_A + "\u0301") * (bound // 5),
        (f"w{CYRILLIC_I}thout " + "\ufdfa") * (bound // 10),  # a mixed word among expanders
        ("\ufdfa" * 3 + "a") * (bound // 4), "\u200b" * (bound - 30) + "\ufdfa",
        "\u0958\u093c" * half, "\u1100\u1161\u11a8" * (bound // 3),  # composition-excluded; jamo
    ]
    return [text[:bound] for text in dict.fromkeys(texts) if text]


def _refused_by_definition(text: str, bound: int) -> bool:
    normalised = plainly(text).text
    return not normalised or len(normalised) > bound


def _search_message(normalised: str) -> str | None:
    """The refusal's message as /v1/search words it (unchanged since the bound came in)."""
    if not normalised:
        return "intent is empty once invisible characters and spaces are removed"
    if len(normalised) <= SEARCH:
        return None
    return (f"intent has {len(normalised):,} characters once normalised (compatibility characters"
            f" such as \ufdfa expand); at most {SEARCH}")


def test_the_corpus_holds_both_sides_of_each_bound() -> None:
    for bound in (SEARCH, MESSAGE, EXTRACTED):
        decisions = {_refused_by_definition(text, bound) for text in hostile(bound)}
        assert decisions == {True, False}, bound


# --- the normaliser is the definition ---------------------------------------------------

HOSTILE_ALPHABET = st.sampled_from(
    [*EXPANDERS, "\u200b", "\u200d", "\ufeff", "\ufe0f", "\u034f", "\u3164", "\x00", "\t", "\u3000",
     "\u0301", "\u0300", "\u093c", CYRILLIC_A, CYRILLIC_I, "\u03bf", "a", "b", "i", " ", "'", ".",
     "\u6771", "\u30bf", "\ue000", "\U000e0100"]
)


@pytest.mark.parametrize("bound", [SEARCH, MESSAGE, EXTRACTED])
def test_the_normaliser_gives_what_the_steps_give_on_the_corpus(bound: int) -> None:
    for text in hostile(bound):
        assert normalise_intent(text) == plainly(text), repr(text[:40])


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.lists(HOSTILE_ALPHABET, max_size=80).map("".join))
def test_the_normaliser_gives_what_the_steps_give(raw: str) -> None:
    assert normalise_intent(raw) == plainly(raw)


# --- the refusals: decided and worded on the normalised text, as before ------------------


def test_a_search_request_refuses_exactly_what_the_definition_refuses() -> None:
    for text in hostile(SEARCH):
        expected = _search_message(plainly(text).text)
        try:
            SearchRequest(intent=text)
        except ValidationError as error:
            [problem] = error.errors()
            assert problem["msg"] == f"Value error, {expected}", repr(text[:40])
        else:
            assert expected is None, repr(text[:40])


def test_a_policy_test_case_refuses_exactly_what_a_search_request_refuses() -> None:
    for text in hostile(SEARCH):
        case = {"name": "hostile", "intent": text, "expect": {"matched": []}}
        expected = _search_message(plainly(text).text)
        try:
            TestCase.model_validate(case)
        except ValidationError as error:
            assert [e["msg"] for e in error.errors()] == [f"Value error, {expected}"]
        else:
            assert expected is None, repr(text[:40])


def test_an_agent_message_is_refused_exactly_as_the_definition_says() -> None:
    for text in hostile(MESSAGE):
        length = len(plainly(text).text)
        if length <= MESSAGE:
            screen(text, max_chars=MESSAGE)
            continue
        with pytest.raises(MessageTooLarge) as raised:
            screen(text, max_chars=MESSAGE)
        assert str(raised.value) == (f"the message has {length} characters once normalised;"
                                     f" messages are limited to {MESSAGE}")


def test_an_extracted_intent_is_refused_exactly_as_the_definition_says() -> None:
    for text in hostile(EXTRACTED):
        plain = plainly(text)
        verdict = validate_intent(text, max_chars=EXTRACTED)
        assert verdict.normalisation == plain  # what the abstention's record is built from
        assert (verdict.code == "too_long") == (len(plain.text) > EXTRACTED), repr(text[:40])
        if verdict.code == "too_long":
            assert verdict.reason == f"the intent has {len(plain.text)} characters (limit {EXTRACTED})"


# --- nothing is remembered of a refused intent --------------------------------------------

REFUSED = [text for text in hostile(SEARCH) if _refused_by_definition(text, SEARCH)]


def test_a_refused_search_intent_is_not_remembered() -> None:
    search_intent.cache_clear()
    for text in REFUSED:
        with pytest.raises(ValidationError):
            SearchRequest(intent=text)
    assert search_intent.cache_info().currsize == 0
    SearchRequest(intent="\ufb01" * 256)  # 512 characters once normalised: served, remembered
    assert search_intent.cache_info().currsize == 1


def test_refused_intents_do_not_push_served_ones_out() -> None:
    search_intent.cache_clear()
    SearchRequest(intent="cheap chocolate")
    for n in range(search_intent.cache_info().maxsize or 0):
        with pytest.raises(ValidationError):
            SearchRequest(intent="\ufb01" * 257 + str(n))  # 514+ characters once normalised
    hits = search_intent.cache_info().hits
    SearchRequest(intent="cheap chocolate")
    assert search_intent.cache_info().hits == hits + 1


@pytest.fixture()
def api(
    tmp_path: Path, engine: Engine, settings: Settings, ready: Ready
) -> Iterator[tuple[Recorded, SearchService]]:
    """The API with its plan caches on, a JSONL recorder, and compile open to anyone."""
    auth = settings.auth.model_copy(update={"open_internals": True})
    app, service, path = recorded_app(settings.model_copy(update={"auth": auth}), engine, tmp_path, "refused")
    with TestClient(app) as client:
        yield Recorded(client, path), service
    service.close()


def test_a_refused_request_leaves_no_cache_entry_and_its_answer_is_unchanged(
    api: tuple[Recorded, SearchService],
) -> None:
    recorded, service = api
    search_intent.cache_clear()
    for text in ("\ufdfa" * 512, "\u3316" * 512, "\ufb01" * 257):
        for route in ("/v1/search", "/v1/compile"):
            response = recorded.client.post(route, json={"intent": text})
            assert response.status_code == 422, response.text[:300]
            error = response.json()["error"]
            assert error["code"] == "invalid_request"
            assert error["message"] == "the request does not match the schema"
            assert error["details"] == [
                {"location": "body.intent", "message": f"Value error, {_search_message(plainly(text).text)}"}
            ]
            if route == "/v1/search":  # its one decision record (compile writes none)
                [record] = recorded.records(error["request_id"])
                assert record["status"] == "error" and record["error"]["status"] == 422
    assert search_intent.cache_info().currsize == 0
    assert (len(service.cache), len(service.percolations), len(service.purchases)) == (0, 0, 0)
    assert recorded.client.post("/v1/search", json={"intent": "\ufb01" * 256}).status_code == 200
    assert search_intent.cache_info().currsize == 1 and len(service.cache) == 1


# --- the MCP tool's intent: a raw bound before any normalising -----------------------------

RAW = 16 * EXTRACTED
"""an extracted or MCP intent's bound as received (``intent_validation.RAW_FACTOR`` times 120)"""


class Normalised:
    """A spy on what intent validation normalises: the length of each text."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import agent_gateway.intent_validation as validation

        self.lengths: list[int] = []
        every = validation.normalise_intent

        def counted(raw: str) -> NormalisedIntent:
            self.lengths.append(len(raw))
            return every(raw)

        monkeypatch.setattr(validation, "normalise_intent", counted)


def test_an_intent_past_its_raw_bound_is_refused_before_it_is_normalised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    normalised = Normalised(monkeypatch)
    for text in ("\ufdfa" * (1 << 20), "chocolate " * 400_000, "a" * (RAW + 1), "\u200b" * RAW + "ab"):
        verdict = validate_intent(text, max_chars=EXTRACTED)
        assert (verdict.intent, verdict.code, verdict.normalisation) == (None, "too_long", None)
        assert verdict.reason == f"the intent has {len(text)} characters as received (limit {RAW})"
    assert normalised.lengths == []
    # at the raw bound, what normalising leaves is judged as before (padding removed: served)
    assert validate_intent("\u200b" * (RAW - 9) + "chocolate", max_chars=EXTRACTED).intent == "chocolate"
    assert validate_intent("\ufdfa" * RAW, max_chars=EXTRACTED).code == "too_long"
    assert normalised.lengths == [RAW, RAW]


def test_the_mcp_tool_refuses_a_multi_megabyte_intent_without_normalising_it(
    api: tuple[Recorded, SearchService], monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agent_gateway.mcp_server import search_products_sync
    from agent_gateway.settings import GatewaySettings
    from tests.clocks import FIXED_NOW

    recorded, service = api
    normalised = Normalised(monkeypatch)
    intent = "\ufdfa" * (4 << 20)  # 4 MiB characters, 72 MiB once normalised
    result = search_products_sync(service, GatewaySettings(), intent, now=FIXED_NOW)
    assert normalised.lengths == []
    reason = f"intent refused: the intent has {len(intent)} characters as received (limit {RAW})"
    assert (result.status, result.reason, result.intent) == ("abstained", reason, None)
    assert result.answer == f"I can't search for that: {reason}."
    [record] = recorded.records(result.request_id)
    assert (record["endpoint"], record["status"]) == ("mcp", "abstained")
    assert record["reason"] == reason and record["intent"] is None
    assert record["extraction"]["method"] == "mcp" and record["extraction"]["flags"] == []
