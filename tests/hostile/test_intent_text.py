"""The intent normaliser, on its own: what it removes, what it maps, what it must keep.

Pure tests (no engine). The look-alikes used here are written as escapes so a reader sees
which code point each test is about.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from control_plane.intent_text import is_mixed_script, latin_look_alike, normalise, normalise_intent
from control_plane.matcher import POST_TAG, PRE_TAG, compile_trigger
from control_plane.policy import Pattern, Trigger
from tests.hostile.unicode_data import FORMAT_AND_CONTROL

CYRILLIC_I = "\u0456"
CYRILLIC_IE = "\u0435"

#: the three evasions the issue measured, and the text each must become
EVASIONS = [
    (f"w{CYRILLIC_I}thout peanuts", "without peanuts"),
    (f"chocolat sans arachid{CYRILLIC_IE}", "chocolat sans arachide"),
    ("chocolate with\u200bout pea\u200dnuts\ufeff", "chocolate without peanuts"),
]


@pytest.mark.parametrize(("raw", "expected"), EVASIONS)
def test_the_measured_evasions_normalise_to_their_latin_text(raw: str, expected: str) -> None:
    normalised = normalise_intent(raw)
    assert normalised.text == expected and normalised.changed


def test_mixed_script_words_are_reported_as_received() -> None:
    normalised = normalise_intent(f"w{CYRILLIC_I}thout peanuts and arachid{CYRILLIC_IE}")
    assert normalised.mixed_script == (f"w{CYRILLIC_I}thout", f"arachid{CYRILLIC_IE}")
    assert normalised.removed == 0


def test_invisible_characters_are_removed_and_counted() -> None:
    normalised = normalise_intent("pea\u200dnuts\u00ad \u202eno\u202c\x00\x07 milk\ufe0f\u034f")
    assert normalised.text == "peanuts no milk"
    assert normalised.removed == 8 and normalised.mixed_script == ()


@pytest.mark.parametrize(
    "raw", ["\u0000\u0001 \u200b", "\u200b\u200c\u200d\ufeff", " \t\n ", "\ue000\ue001", ""]
)
def test_nothing_visible_normalises_to_nothing(raw: str) -> None:
    assert normalise(raw) == ""


def test_white_space_controls_separate_words() -> None:
    assert normalise("cheap\tchocolate\r\nbar\u00a0\u3000noir\u2028x") == "cheap chocolate bar noir x"


def test_compatibility_forms_fold() -> None:
    fullwidth = "".join(chr(ord(c) + 0xFEE0) for c in "without")
    bold = "".join(chr(0x1D41A + ord(c) - ord("a")) for c in "peanuts")
    assert normalise(f"{fullwidth} {bold} \ufb01gs") == "without peanuts figs"


@pytest.mark.parametrize(
    "text",
    [
        "thé vert bio",
        "crème brûlée façon grand-mère",
        "bon marché, déstockage, noël",
        "œufs sans gluten",
        "\u0447\u0430\u0439 \u0437\u0435\u043b\u0451\u043d\u044b\u0439",  # Russian, one script
        "\u03c4\u03c3\u03ac\u03b9",  # Greek
        "\u6771\u4eac\u30bf\u30ef\u30fc",  # Han + Katakana: one Japanese word
        "T\u30b7\u30e3\u30c4",  # Latin + Katakana: TR39 highly restrictive allows it
        "\u0627\u0644\u0634\u0627\u064a",  # Arabic
    ],
)
def test_single_script_words_are_kept_as_written(text: str) -> None:
    normalised = normalise_intent(text)
    assert normalised.text == text and not normalised.changed and normalised.mixed_script == ()


def test_decomposed_accents_are_composed() -> None:
    assert normalise("the\u0301 vert") == "th\u00e9 vert"
    # a Cyrillic e with a combining accent, in a Latin word: mapped, then composed
    assert normalise(f"arachid{CYRILLIC_IE}\u0301s") == "arachid\u00e9s"


def test_look_alikes_keep_their_case() -> None:
    assert latin_look_alike("\u0406") == "I"  # the data's prototype is "l"; the capital is I
    assert latin_look_alike(CYRILLIC_I) == "i"
    assert latin_look_alike("\u0410") == "A" and latin_look_alike("\u0430") == "a"
    assert normalise("W\u0406THOUT PEANUTS") == "WITHOUT PEANUTS"


def test_letters_without_a_latin_look_alike_stay() -> None:
    assert latin_look_alike("\u0436") == "\u0436"  # Cyrillic zhe
    assert normalise_intent("a\u0436b").mixed_script == ("a\u0436b",)


def test_mixed_script_follows_tr39_highly_restrictive() -> None:
    assert is_mixed_script(f"w{CYRILLIC_I}thout")
    assert is_mixed_script("\u03bf\u043a")  # Greek omicron + Cyrillic ka
    assert not is_mixed_script("T\u30b7\u30e3\u30c4")
    assert not is_mixed_script("caf\u00e9")


def test_highlight_tags_never_survive() -> None:
    assert normalise(f"{PRE_TAG}chocolate{POST_TAG}") == "chocolate"


text_strategy = st.text(
    st.characters(codec=None, exclude_categories=()), max_size=60
) | st.lists(
    st.sampled_from(
        ["without", " ", "peanuts", CYRILLIC_I, CYRILLIC_IE, "\u200b", "\u0301", "\u00e9", "\u0406", "\u30b7"]
    ),
    max_size=12,
).map("".join)


@hypothesis_settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(text_strategy)
def test_normalising_is_idempotent_and_leaves_nothing_invisible(raw: str) -> None:
    once = normalise_intent(raw)
    assert normalise(once.text) == once.text
    assert once.changed == (once.text != raw)
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs", "Cn") for c in once.text)
    assert once.text == once.text.strip() and "  " not in once.text
    assert unicodedata.normalize("NFKC", once.text) == once.text


@hypothesis_settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.sampled_from(FORMAT_AND_CONTROL)), max_size=8))
def test_inserting_format_or_control_characters_changes_nothing(insertions: list[tuple[int, str]]) -> None:
    clean = "chocolat pas cher sans arachide"
    chars = list(clean)
    for position, char in insertions:
        chars.insert(min(position, len(chars)), char)
    assert normalise("".join(chars)) == clean


def test_triggers_compile_from_their_normalised_phrases() -> None:
    tokens = len  # any counter: both sides must call it with the same phrase
    hostile = Trigger(kind="phrase", values=(f"chocolat{CYRILLIC_IE}", "dark\u200b chocolate", "chocolate"))
    clean = Trigger(kind="phrase", values=("chocolate", "dark chocolate"))
    assert compile_trigger(hostile, tokens) == compile_trigger(clean, tokens)
    hostile_pattern = Pattern.parse(f"(w{CYRILLIC_I}thout|sans\u200d) {{item}}")
    hostile_cues = Trigger(kind="pattern", patterns=(hostile_pattern,))
    clean_cues = Trigger(kind="pattern", patterns=(Pattern.parse("(without|sans) {item}"),))
    assert compile_trigger(hostile_cues, tokens) == compile_trigger(clean_cues, tokens)


def test_a_trigger_phrase_of_invisible_characters_only_is_refused() -> None:
    with pytest.raises(ValueError, match="invisible characters"):
        Trigger.model_validate({"phrase": ["\u200b\u200d"]})
    with pytest.raises(ValueError, match="no cue"):
        Pattern.parse("(\u200b) {item}")


ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=60)


@given(ASCII)
def test_the_printable_ascii_shortcut_is_what_the_steps_give(raw: str) -> None:
    """``normalise_intent`` answers printable ASCII without running the steps (the warm
    path's intents, ADR 0033): it must be exactly what the steps give, for every ASCII
    string (the non-printable ones take the steps, as a control)."""
    from control_plane.intent_text import _normalised

    assert normalise_intent(raw) == _normalised(raw)


def test_the_shortcut_covers_every_printable_ascii_character() -> None:
    from control_plane.intent_text import _normalised

    for code in range(128):
        for raw in (chr(code), f"a{chr(code)}b", f" {chr(code)}  {chr(code)} "):
            assert normalise_intent(raw) == _normalised(raw), repr(raw)


def test_only_search_intents_are_remembered_never_an_agents_message() -> None:
    """A search intent's normalisation is remembered (validated, then compiled: one
    normalisation); an agent's chat message is normalised before its e-mails and phone
    numbers are redacted, so it must never be kept in the process."""
    from agent_gateway.guardrails import screen
    from control_plane.intent_text import normalise_intent, search_intent
    from control_plane.service import SearchRequest

    search_intent.cache_clear()
    message = "write to bob.smith@example.com or call +33 6 12 34 56 78 for cheap chocolate"
    screened = screen(message)
    assert "bob.smith@example.com" not in screened.text
    assert search_intent.cache_info().currsize == 0
    assert not hasattr(normalise_intent, "cache_info")  # the function the gateway calls keeps nothing
    SearchRequest(intent="cheap  chocolate")
    assert search_intent.cache_info().currsize == 1
    assert search_intent("cheap  chocolate").text == "cheap chocolate"
    assert search_intent.cache_info().hits == 1
