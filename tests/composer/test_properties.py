"""Properties of ``compose`` over random matches, and the purity of the composer's modules."""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from control_plane.composer import ComposeContext, compose
from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import SPECIFICITY, PolicySet
from tests.composer.casefile import CASES, policy_set

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["cheap", "chocolate", "without", "peanuts", "tea", "dark", "sans", "under", "5€", "by"]


@dataclass(frozen=True)
class LinearStats:
    """Any percentile: p / 10."""

    count: int = 10

    def percentile(self, p: int, /) -> float:
        return p / 10


SETS: dict[str, PolicySet] = {
    path.stem: policy_set(yaml.safe_load(path.read_text(encoding="utf-8")))
    for path in sorted(CASES.glob("*.yaml"))
}


@st.composite
def requests(draw: st.DrawFn) -> tuple[PolicySet, str, list[Match], ComposeContext]:
    policies = SETS[draw(st.sampled_from(sorted(SETS)))]
    words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
    intent = " ".join(words)

    def spans(most: int) -> list[Span]:
        found = []
        for _ in range(draw(st.integers(0, most))):
            start = draw(st.integers(0, len(intent) - 1))
            end = draw(st.integers(start + 1, len(intent)))
            found.append(Span(start=start, end=end, text=intent[start:end]))
        return found

    chosen = draw(st.lists(st.sampled_from([p.id for p in policies.policies]), unique=True))
    matches = []
    for policy_id in chosen:
        trigger = policies.policy(policy_id).trigger
        captures = [
            CapturedText(name=draw(st.sampled_from(trigger.captures)), text=span.text, span=span)
            for span in (spans(2) if trigger.captures else [])
        ]
        kept = () if trigger.kind == "always" else tuple(spans(2))
        matches.append(Match(policy_id=policy_id, spans=kept, captures=tuple(captures)))
    context = ComposeContext(
        cohorts=tuple(draw(st.lists(st.sampled_from(["vegan", "pro", "students"]), unique=True))),
        market=draw(st.sampled_from([None, "fr", "de"])),
        category_field="categories",
        price_stats={"_all": LinearStats(), "Chocolates": LinearStats(count=0)},
    )
    return policies, intent, matches, context


@settings(max_examples=300, deadline=None)
@given(requests(), st.randoms(use_true_random=False))
def test_match_order_and_repetition_do_not_change_the_output(
    request: tuple[PolicySet, str, list[Match], ComposeContext], shuffler: random.Random
) -> None:
    policies, intent, matches, context = request
    first = compose(policies, intent, matches, context).model_dump_json()
    assert compose(policies, intent, matches, context).model_dump_json() == first
    shuffled = list(matches)
    shuffler.shuffle(shuffled)
    assert compose(policies, intent, shuffled, context).model_dump_json() == first
    assert compose(policies, intent, tuple(reversed(matches)), context).model_dump_json() == first


@settings(max_examples=300, deadline=None)
@given(requests())
def test_invariants_of_every_composition(
    request: tuple[PolicySet, str, list[Match], ComposeContext],
) -> None:
    policies, intent, matches, context = request
    composition = compose(policies, intent, matches, context)
    plan, explanation = composition.plan, composition.explanation
    matched = [m.policy_id for m in explanation.matched]
    applied = [step.policy_id for step in explanation.applied]
    skipped = [s.policy_id for s in explanation.skipped]
    assert list(plan.applied) == applied
    assert sorted(applied + skipped) == sorted(matched)
    assert [p for p in matched if p in applied] == applied  # applied in the matched order
    keys = [(-policies.policy(p).priority, -SPECIFICITY[policies.policy(p).trigger.kind]) for p in matched]
    assert keys == sorted(keys)
    for policy in policies.policies:
        if policy.kind == "guard" and policy.enabled and policy.active is None:
            assert policy.id in applied  # guards are never skipped nor lost
    assert not set(plan.pins) & set(plan.hides)
    assert not {i for s in plan.sponsored for i in s.ids} & set(plan.hides)
    assert len(plan.pins) <= policies.governance.max_pins
    if plan.price.min is not None and plan.price.max is not None:
        assert plan.price.min.value <= plan.price.max.value
    assert explanation.residual == plan.residual == " ".join(plan.residual.split())


# --- purity --------------------------------------------------------------------------------

ALLOWED = {
    "__future__", "typing", "dataclasses", "re", "unicodedata", "math", "collections.abc", "operator",
    "bisect",
    "decimal", "pydantic", "control_plane.policy", "control_plane.plan",
    "control_plane.composer", "control_plane.composer_captures", "control_plane.composer_fields",
    "control_plane.composer_price", "control_plane.composer_state", "control_plane.money",
    "control_plane.matches", "control_plane.bounded",
}  # fmt: skip
#: the composer's modules, what the matcher hands it (ADR 0028), the memo tables it keeps
MODULES = [
    *sorted((ROOT / "control_plane").glob("composer*.py")),
    ROOT / "control_plane" / "matches.py",
    ROOT / "control_plane" / "bounded.py",
]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def test_the_composer_modules_exist() -> None:
    assert "composer.py" in [p.name for p in MODULES]


def test_the_composer_imports_nothing_impure() -> None:
    for path in MODULES:
        assert _imports(path) <= ALLOWED, f"{path.name} imports {sorted(_imports(path) - ALLOWED)}"
