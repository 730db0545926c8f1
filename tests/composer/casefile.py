"""Reading the composer's YAML case files (``cases/*.yaml``).

A file holds a small policy set and the cases run against it::

    policies:                 # as authors write them; title defaults to the id, owner to "merch"
      - {id: cheap, priority: 40, trigger: {any: [cheap], consume: true},
         rules: [{price: {max: {percentile: 30}}}]}
    vocabularies: [{name: allergens, entries: {peanuts: [arachide]}}]   # optional
    governance: {max_pins: 2}                                           # optional
    stats: {_all: {30: 3.0}, Chocolates: {count: 0}}   # category -> percentiles (count: 10)
    context: {cohorts: [vegan], market: fr}            # defaults for every case
    cases:
      - name: cheap_alone
        intent: cheap chocolate
        context: {market: null}                        # merged over the file's context
        matches:                                       # policy id -> spans, or spans + captures
          cheap: [cheap]                               # a string is its first occurrence
          chocolate: [[6, 15]]                         # or [start, end)
          no-peanuts: {spans: [without], captures: {item: [peanuts]}}
          vegan-boost: []                              # always: no span
        expect:
          applied: [chocolate, cheap]                  # in order
          skipped: {other: span_consumed}              # exactly these
          residual: chocolate
          plan: {price.max.value: 3.0, filters.brand.values: [x]}   # dotted paths
          explanation: {applied.0.consumed: []}                     # dotted paths
          resolutions: [{field: category, winner: a, losers: [b], reason_contains: "90 > 60"}]
          captures: [{policy_id: no-peanuts, values: [peanuts]}]    # each must match one
          changes: {cheap: [residual, price.max]}                   # fields each step changed
          error: "substring of the ValueError"

In a dotted path a number indexes a list, and a name picks the one element of a list whose
``field`` is that name (``filters.brand.values``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from control_plane.composer import ComposeContext
from control_plane.plan import CapturedText, Match, Span
from control_plane.policy import Governance, Policy, PolicySet, Vocabulary

CASES = Path(__file__).parent / "cases"


@dataclass(frozen=True)
class FixedStats:
    """Price statistics with the percentiles a case spells out."""

    percentiles: Mapping[int, float]
    count: int = 10
    samples: tuple[float, ...] = ()

    def percentile(self, p: int, /) -> float:
        return self.percentiles[int(p)]


@dataclass(frozen=True)
class Case:
    id: str
    policy_set: PolicySet
    intent: str
    matches: tuple[Match, ...]
    context: ComposeContext
    expect: Mapping[str, Any] = field(default_factory=dict)


def policy_set(data: Mapping[str, Any], version: str = "test") -> PolicySet:
    policies = []
    for raw in data.get("policies", []):
        raw = {"title": raw["id"], "owner": "merch", **raw}
        policies.append(Policy.model_validate(raw))
    governance = {"filterable_fields": [], "boostable_fields": [], **data.get("governance", {})}
    return PolicySet(
        version=version,
        policies=tuple(policies),
        vocabularies=tuple(Vocabulary.model_validate(v) for v in data.get("vocabularies", [])),
        governance=Governance.model_validate(governance),
    )


def span(intent: str, spec: Any) -> Span:
    if isinstance(spec, str):
        start = intent.find(spec)
        if start < 0:
            raise ValueError(f"{spec!r} is not in {intent!r}")
        return Span(start=start, end=start + len(spec), text=spec)
    start, end = spec
    return Span(start=start, end=end, text=intent[start:end])


def match(intent: str, policy_id: str, spec: Any) -> Match:
    if spec is None or isinstance(spec, list):
        spec = {"spans": spec or []}
    captures = []
    for name, texts in (spec.get("captures") or {}).items():
        for text in [texts] if isinstance(texts, str) else texts:
            found = span(intent, text)
            captures.append(CapturedText(name=name, text=found.text, span=found))
    return Match(
        policy_id=policy_id,
        spans=tuple(span(intent, s) for s in spec.get("spans") or []),
        captures=tuple(captures),
    )


def context(data: Mapping[str, Any], stats: Mapping[str, Any]) -> ComposeContext:
    table = {
        name: FixedStats(
            percentiles={int(k): float(v) for k, v in values.items() if k not in ("count", "samples")},
            count=int(values.get("count", 10)),
            samples=tuple(float(v) for v in values.get("samples", ())),
        )
        for name, values in stats.items()
    }
    return ComposeContext(
        cohorts=tuple(data.get("cohorts", ())),
        market=data.get("market"),
        category_field=data.get("category_field", "categories"),
        price_stats=table,
    )


def load(path: Path) -> Iterator[Case]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    policies = policy_set(data)
    for raw in data["cases"]:
        intent = raw["intent"]
        yield Case(
            id=f"{path.stem}/{raw['name']}",
            policy_set=policies,
            intent=intent,
            matches=tuple(match(intent, pid, spec) for pid, spec in (raw.get("matches") or {}).items()),
            context=context({**data.get("context", {}), **raw.get("context", {})}, data.get("stats", {})),
            expect=raw.get("expect", {}),
        )


def all_cases() -> list[Case]:
    return [case for path in sorted(CASES.glob("*.yaml")) for case in load(path)]


def dig(data: Any, path: str) -> Any:
    """``dig(dump, "filters.brand.values")``: numbers index lists, names pick by ``field``."""
    for part in path.split("."):
        if isinstance(data, list):
            if part.lstrip("-").isdigit():
                data = data[int(part)]
                continue
            chosen = [item for item in data if isinstance(item, dict) and item.get("field") == part]
            assert len(chosen) == 1, f"{path}: {len(chosen)} elements with field {part!r} in {data}"
            data = chosen[0]
        else:
            assert isinstance(data, dict) and part in data, f"{path}: no {part!r} in {data}"
            data = data[part]
    return data
