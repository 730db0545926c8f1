"""Shopper language without an engine: the pattern grammar, the loader's checks (with
``file:line``), the ``match`` the loader picks from the mapping, the YAML round trip, and
the capture bounds read around given cue ranges (the ranges the engine highlights)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from control_plane.catalog.profile import load_profile
from control_plane.errors import PolicyLoadError
from control_plane.loader import dump_policy_yaml, load_policy_set
from control_plane.matcher_patterns import anchors_of, resolve
from control_plane.plan import Match
from control_plane.policy import Pattern, Policy, Trigger
from control_plane.shopper_language import field_types_of

ROOT = Path(__file__).resolve().parents[2]
TYPES = field_types_of(load_profile(ROOT / "mappings" / "catalog.profile.yaml"))
HEAD = "id: p\ntitle: t\nowner: o\n"


def directory(tmp_path: Path, policy: str) -> Path:
    shutil.copy(ROOT / "policies" / "governance.yaml", tmp_path / "governance.yaml")
    (tmp_path / "governance.yaml").write_text(
        (tmp_path / "governance.yaml").read_text().replace("  - price\n", "  - price\n  - text\n  - title\n")
    )
    shutil.copytree(ROOT / "policies" / "vocabularies", tmp_path / "vocabularies")
    (tmp_path / "p.yaml").write_text(policy, encoding="utf-8")
    return tmp_path


def errors(path: Path, **kwargs: object) -> list[tuple[str, int]]:
    with pytest.raises(PolicyLoadError) as raised:
        load_policy_set(path, **kwargs)  # type: ignore[arg-type]
    return [(e.code, e.line) for e in raised.value.errors]


# --- grammar ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "captures", "cues"),
    [
        ("(without|sans) {item}", ("item",), ("without", "sans")),
        ("{item} (free|-free|less)", ("item",), ("free", "-free", "less")),
        ("(between) {low} (and) {high}", ("low", "high"), ("between", "and")),
        ("(no) {item:2}", ("item",), ("no",)),
    ],
)
def test_patterns_put_captures_before_after_or_between_cues(
    text: str, captures: tuple[str, ...], cues: tuple[str, ...]
) -> None:
    pattern = Pattern.parse(text)
    assert pattern.captures == captures and pattern.cues == cues
    assert Pattern.parse(pattern.source()) == pattern


@pytest.mark.parametrize(
    "text", ["{a} {b}", "(x) (y) {a}", "(x)", "x {a}", "(x) {a} (y) {a}", "(x) {a:0}", "(x) {a:11}", "() {a}"]
)
def test_malformed_patterns_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        Pattern.parse(text)


def test_each_pattern_of_a_trigger_binds_its_own_capture_names() -> None:
    trigger = Trigger.model_validate({"pattern": ["(without) {item}", "(sans) {ingredient}"]})
    assert trigger.captures == ("ingredient", "item")
    policy = Policy.model_validate({
        "id": "p", "title": "t", "owner": "o",
        "trigger": {"pattern": ["(without) {item}", "(sans) {ingredient}"]},
        "rules": [{"exclude": {"field": "text", "values": ["{ingredient}"]}}],
    })
    assert policy.trigger.captures == ("ingredient", "item")


# --- the loader's checks, located --------------------------------------------------------


def test_a_bad_second_pattern_is_reported_at_its_line(tmp_path: Path) -> None:
    policy = HEAD + "trigger:\n  pattern:\n    - '(without) {item}'\n    - 'free {item}'\n" \
        "rules:\n  - exclude: {field: text, values: ['{item}']}\n"
    assert errors(directory(tmp_path, policy)) == [("bad_pattern", 7)]


def test_an_unknown_vocabulary_trigger_is_reported_at_its_key(tmp_path: Path) -> None:
    policy = HEAD + "trigger:\n  vocabulary: colours\nrules:\n" \
        "  - filter: {field: labels, values: ['{colours}']}\n"
    assert errors(directory(tmp_path, policy)) == [("unknown_vocabulary", 5)]


def test_unless_must_be_phrases(tmp_path: Path) -> None:
    policy = HEAD + "trigger: {any: [x], unless: []}\nrules:\n  - category: {values: [Chocolates]}\n"
    assert errors(directory(tmp_path, policy)) == [("invalid_value", 4)]


@pytest.mark.parametrize(
    ("rule", "line"),
    [
        ("  - exclude: {field: text, values: [x], match: terms}\n", 6),
        ("  - filter: {field: labels, values: [x], match: phrase}\n", 6),
    ],
)
def test_a_match_that_does_not_fit_the_field_type_is_refused(tmp_path: Path, rule: str, line: int) -> None:
    policy = HEAD + "trigger: {any: [x]}\nrules:\n" + rule
    assert errors(directory(tmp_path, policy), field_types=TYPES) == [("match_field_type", line)]


def test_the_loader_picks_phrase_on_text_fields_and_terms_on_keyword_fields(tmp_path: Path) -> None:
    policy = HEAD + "trigger: {pattern: ['(without) {item}'], consume: true}\nrules:\n" \
        "  - exclude: {field: text, values: ['{item}']}\n  - exclude: {field: labels, values: ['{item}']}\n"
    root = directory(tmp_path, policy)
    frozen = load_policy_set(root, field_types=TYPES)
    matches = [getattr(r.body, "match", None) for r in frozen.policy("p").rules]
    assert matches == ["phrase", None]
    assert [getattr(r.body, "match", None) for r in load_policy_set(root).policy("p").rules] == [None, None]


def test_a_vocabulary_trigger_holds_its_vocabulary_words_and_dumps_as_written(tmp_path: Path) -> None:
    policy = HEAD + "trigger: {vocabulary: allergens, unless: [peanut butter cup], consume: true}\n" \
        "rules:\n  - exclude: {field: allergens, values: ['{allergens}']}\n"
    frozen = load_policy_set(directory(tmp_path, policy)).policy("p")
    assert "arachide" in frozen.trigger.values and "peanuts" in frozen.trigger.values
    dumped = dump_policy_yaml(frozen)
    assert "vocabulary: allergens" in dumped and "arachide" not in dumped
    (tmp_path / "p.yaml").write_text(dumped, encoding="utf-8")
    assert load_policy_set(tmp_path).policy("p") == frozen


# --- captures around highlighted cues ------------------------------------------------------


def ranges(intent: str, *words: str) -> dict[str, list[tuple[int, int]]]:
    """What the engine highlights: each cue's word ranges (first occurrence after the last)."""
    found: dict[str, list[tuple[int, int]]] = {}
    position = 0
    for word in words:
        start = intent.index(word.strip("-"), position)
        found.setdefault(word, []).append((start, start + len(word.strip("-"))))
        position = start + 1
    return found


def policy(*patterns: str, unless: tuple[str, ...] = ()) -> Policy:
    return Policy.model_validate({
        "id": "p", "title": "t", "owner": "o",
        "trigger": {"pattern": list(patterns), **({"unless": list(unless)} if unless else {})},
        "rules": [{"exclude": {"field": "text", "values": ["{item}"]}}],
    })


def captures(found: Match | None) -> list[tuple[str, str]]:
    assert found is not None
    return [(c.name, c.text) for c in found.captures]


def run(p: Policy, intent: str, *cues: str) -> Match | None:
    own = ranges(intent, *cues)
    return resolve(p, intent, own, anchors_of([(p, own)], intent), {})


@pytest.mark.parametrize(
    ("intent", "cues", "expected"),
    [
        ("mug without a handle", ("without",), ["handle"]),
        ("flask without strap or lid", ("without",), ["strap", "lid"]),
        ("sans gluten ni lactose", ("sans",), ["gluten", "lactose"]),
        ("no nuts, milk or soy", ("no",), ["nuts", "milk", "soy"]),
        ("no nuts, 100g", ("no",), ["nuts"]),
        ("without overflow brushed nickel finish", ("without",), ["overflow brushed nickel"]),
        ("huile sans d'arachide", ("sans",), ["arachide"]),
    ],
)
def test_captures_after_a_cue_are_bounded(intent: str, cues: tuple[str, ...], expected: list[str]) -> None:
    p = policy("(without|no|sans) {item}")
    assert [t for _, t in captures(run(p, intent, *cues))] == expected


def test_a_capture_before_a_postfix_cue_takes_one_word_and_reads_lists() -> None:
    p = policy("{item} (free|-free)")
    assert captures(run(p, "organic gluten free pasta", "free")) == [("item", "gluten")]
    assert captures(run(p, "nut and dairy free cookies", "free")) == [("item", "nut"), ("item", "dairy")]
    found = run(p, "sugar-free gum", "-free")
    assert captures(found) == [("item", "sugar")]
    assert found is not None and [s.text for s in found.spans] == ["-free"]  # the hyphen is consumed


def test_an_unless_phrase_cancels_the_cue_inside_it() -> None:
    p = policy("(without) {item}", unless=("without remorse",))
    intent = "without remorse novel"
    own = {"without": [(0, 7)], "without remorse": [(0, 7), (8, 15)]}
    assert resolve(p, intent, own, [], {}) is None
    intent = "without remorse without plastic"
    own = {"without": [(0, 7), (16, 23)], "without remorse": [(0, 7), (8, 15)]}
    assert captures(resolve(p, intent, own, [], {})) == [("item", "plastic")]


# --- the CLI: policy check and policy lint -------------------------------------------------


@pytest.mark.parametrize("command", ["check", "lint"])
def test_policy_check_and_lint_locate_the_new_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    from control_plane.cli import main

    policy = HEAD + "trigger:\n  pattern: ['(without) {item}', '{item} (free)']\n  unless: [carefree]\n" \
        "rules:\n  - exclude: {field: text, values: ['{item}'], match: terms}\n" \
        "---\n" + HEAD.replace("id: p", "id: q") + "trigger: {vocabulary: colours}\n" \
        "rules:\n  - filter: {field: labels, values: ['{colours}']}\n"
    root = directory(tmp_path, policy)
    code = main(["policy", command, str(root)])
    err = capsys.readouterr().err
    assert code != 0
    assert "p.yaml:8:48: match_field_type" in err
    assert "p.yaml:13:11: unknown_vocabulary" in err


def test_a_rendered_text_exclusion_is_an_analysed_phrase_query() -> None:
    from control_plane.plan import Constraint, Plan
    from control_plane.renderer import render

    profile = load_profile(ROOT / "mappings" / "catalog.profile.yaml")
    plan = Plan(
        residual="chocolate",
        exclusions=(
            Constraint(field="allergens", values=("peanuts",), policies=("a",)),
            Constraint(field="text", values=("dark chocolate", "peanuts"), policies=("b",), match="phrase"),
        ),
    )
    must_not = render(plan, profile, engine="opensearch", tier="strict")["query"]["bool"]["must_not"]
    assert must_not[0] == {"terms": {"allergens": ["peanuts"], "_name": "exclude:a"}}
    assert must_not[1] == {"bool": {
        "should": [
            {"match_phrase": {"text": {"query": "dark chocolate"}}},
            {"match_phrase": {"text": {"query": "peanuts"}}},
        ],
        "minimum_should_match": 1,
        "_name": "exclude:b",
    }}
    assert "match" not in plan.exclusions[0].model_dump()
    assert plan.exclusions[1].model_dump()["match"] == "phrase"


def test_a_pattern_stored_by_an_earlier_release_reads_as_the_same_pattern() -> None:
    # the JSON a policies index written before patterns had parts holds
    stored = {"cues": ["without", "sans"], "capture": "item"}
    assert Pattern.model_validate(stored) == Pattern.parse("(without|sans) {item}")
