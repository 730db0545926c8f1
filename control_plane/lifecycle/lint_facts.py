"""What lint knows about policies: its findings and their locations, the texts a trigger
matches, and the constraints and price bounds a policy's rules set. Shared by the checks of
one policy (:mod:`control_plane.lifecycle.lint`) and of policies taken together
(:mod:`control_plane.lifecycle.lint_pairs`); pure.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from control_plane.errors import ERROR_CODES
from control_plane.intent_text import normalise
from control_plane.loader import too_long_to_match
from control_plane.policy import (
    CAPTURE,
    CategoryRule,
    ExcludeRule,
    FilterRule,
    Loc,
    Policy,
    PriceRule,
    RelativeBound,
    Value,
)

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


#: Every code lint emits besides the loader's: its severity and meaning.
LINT_CODES: dict[str, tuple[Severity, str]] = {
    "unmapped_field": ("error", "a rule names a field the catalog mapping lacks"),
    "field_type_mismatch": ("error", "a rule value the field's mapping type cannot hold, or an object field"),
    "contradictory_filters": (
        "error", "constraints that cannot all hold and that the composer does not arbitrate",
    ),
    "conflicting_filters": (
        "warning", "two policies that apply together constrain one field in ways that cannot both hold",
    ),
    "shadowed_policy": ("warning", "higher-precedence policies consume every trigger text first"),
    "overlapping_triggers": ("warning", "two policies match one text at equal priority and specificity"),
    "window_expired": ("warning", "the active window ended at or before now"),
    "unreachable_trigger": (
        "warning", "a trigger text with no word in it, or longer than an intent, never matches",
    ),
    "unreachable_cohort": ("warning", "a cohort no request can carry"),
    "untested_policy": ("warning", "no policy test names the policy"),
    "test_unpinned_window": (
        "warning", "a test case that pins no 'now' fires a policy whose active window moves its result",
    ),
    "disabled_policy": ("info", "enabled: false, the policy never fires"),
    "absent_role": ("info", "the catalog profile leaves out an optional role (no margin: no margin signal)"),
}


#: Stands for the words a pattern captures after its cue (no trigger text folds to it).
CAPTURED = "\x00"


@dataclass(frozen=True)
class Finding:
    """One lint result: a stable code, its severity, the policy it is about (None for a
    load error), where (``file:line``, else ``policy:<id>`` or ``policy:<id>:<path>``)
    and what, naming the other policy when there is one."""

    code: str
    severity: Severity
    policy_id: str | None
    location: str
    message: str

    def __post_init__(self) -> None:
        if self.code not in LINT_CODES and self.code not in ERROR_CODES:
            raise ValueError(f"undocumented lint code {self.code!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

    def as_json(self) -> dict[str, str | None]:
        return {
            "code": self.code,
            "severity": self.severity,
            "policy_id": self.policy_id,
            "location": self.location,
            "message": self.message,
        }


@dataclass(frozen=True)
class Where:
    """Where findings about a policy go: its ``file:line`` when known (the path inside the
    policy then leads the message), else ``policy:<id>[:<path>]``."""

    locations: Mapping[str, str]

    def finding(self, code: str, policy_id: str, message: str, path: Loc = ()) -> Finding:
        severity: Severity = LINT_CODES[code][0] if code in LINT_CODES else "error"
        dotted = ".".join(map(str, path))
        if policy_id in self.locations:
            text = f"{dotted}: {message}" if dotted else message
            return Finding(code, severity, policy_id, self.locations[policy_id], text)
        location = f"policy:{policy_id}" + (f":{dotted}" if dotted else "")
        return Finding(code, severity, policy_id, location, message)


def quoted(values: Iterable[Value]) -> str:
    return "[" + ", ".join(repr(v) if isinstance(v, str) else str(v).lower() for v in values) + "]"


def fold(text: str) -> str:
    """Normalised as intents and triggers are (:mod:`control_plane.intent_text`), then case
    and accents folded (what the analyzer's lowercase and ASCII folding at least do)."""
    decomposed = unicodedata.normalize("NFKD", normalise(text))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


@lru_cache(maxsize=1 << 18)
def folded_words(text: str) -> tuple[str, ...]:
    """The folded words of ``text``. Cached: the analyses between policies fold each
    trigger text for every pair and witness text it meets (millions of calls at 10,000
    policies for a few thousand distinct texts)."""
    return tuple(fold(text).split())


@lru_cache(maxsize=1 << 18)
def wordless(text: str) -> bool:
    """Only punctuation, separators and control characters: the analyzer yields no token."""
    return all(unicodedata.category(c)[0] in "PZC" for c in text)


@lru_cache(maxsize=1 << 18)
def overlong(text: str) -> str | None:
    """Why a trigger text is too long to ever match (longer than any intent once normalised:
    the loader's ``phrase_too_long``, :func:`control_plane.loader.too_long_to_match`), or
    None. Such a text is refused where it is written, but a set stored before that check
    came in is read as it is: lint flags the text (``unreachable_trigger``) and leaves it
    out of the analyses between policies, whose runs of a text's words grow with the cube
    of its length (:func:`reachable_texts`)."""
    return too_long_to_match(text)


def excerpt(text: str, size: int = 40) -> str:
    """``text`` quoted, its first ``size`` characters only when it is longer."""
    return repr(text) if len(text) <= size else repr(text[:size]) + "…"


def trigger_texts(policy: Policy) -> tuple[str, ...]:
    trigger = policy.trigger
    if trigger.kind == "pattern":
        return tuple(dict.fromkeys(cue for pattern in trigger.patterns for cue in pattern.cues))
    return trigger.values


def reachable_texts(policy: Policy) -> tuple[str, ...]:
    """The trigger texts that can match an intent: some word in it (:func:`wordless`), not
    longer than an intent (:func:`overlong`). The analyses between policies read these only."""
    return tuple(t for t in trigger_texts(policy) if not wordless(t) and overlong(t) is None)


def literal(values: Sequence[Value]) -> tuple[Value, ...]:
    return tuple(v for v in values if not (isinstance(v, str) and CAPTURE.search(v)))


ConstraintKind = Literal["filter", "guard", "category", "exclude"]
LABELS: dict[ConstraintKind, str] = {
    "filter": "filter on {field!r}", "guard": "guard filter on {field!r}",
    "category": "category", "exclude": "exclusion on {field!r}",
}


@dataclass(frozen=True)
class Constraint:
    """A set-valued rule with literal values only (rules using a capture are left out:
    their values are known per request)."""

    policy: Policy
    index: int
    kind: ConstraintKind
    field: str | None
    """the catalog field; None for a category when the profile is not known"""
    values: tuple[Value, ...]
    strategy: str

    @property
    def path(self) -> Loc:
        return ("rules", self.index, self.policy.rules[self.index].kind)

    @property
    def plan_key(self) -> str | None:
        """The plan field the composer arbitrates, for filters and categories."""
        return {"filter": f"filters.{self.field}", "category": "category"}.get(self.kind)

    def shown(self, reader: Policy | None = None) -> str:
        """``filter on 'brand' ['acme']``, plus ``of '<id>'`` when ``reader`` is another policy."""
        text = LABELS[self.kind].format(field=self.field) + f" {quoted(self.values)}"
        return f"{text} of '{self.policy.id}'" if reader is not None and reader.id != self.policy.id else text


def constraints(policy: Policy, category_field: str | None) -> list[Constraint]:
    found = []
    for index, rule in enumerate(policy.rules):
        body = rule.body
        if isinstance(body, FilterRule | ExcludeRule | CategoryRule):
            values: tuple[Value, ...] = tuple(body.values)
            if literal(values) != values:
                continue
        if isinstance(body, FilterRule):
            kind: ConstraintKind = "guard" if policy.kind == "guard" else "filter"
            found.append(Constraint(policy, index, kind, body.field, values, body.strategy))
        elif isinstance(body, ExcludeRule):
            found.append(Constraint(policy, index, "exclude", body.field, values, "union"))
        elif isinstance(body, CategoryRule):
            found.append(Constraint(policy, index, "category", category_field, values, body.strategy))
    return found


def identities(values: Iterable[Value]) -> set[tuple[str, str]]:
    """Values as the composer compares them (``1`` and ``True`` differ)."""
    return {(type(v).__name__, repr(v)) for v in values}


def excluded(positive: Constraint, exclusion: Constraint) -> bool:
    """Every value ``positive`` allows is excluded: nothing can pass both (equal values are
    equal terms to the engine, whatever the field's normalizer)."""
    return (
        positive.kind != "exclude" and exclusion.kind == "exclude"
        and positive.field is not None and positive.field == exclusion.field
        and identities(positive.values) <= identities(exclusion.values)
    )


def disjoint_on_one_key(first: Constraint, second: Constraint) -> bool:
    return (
        first.plan_key is not None and first.plan_key == second.plan_key
        and not identities(first.values) & identities(second.values)
    )


@dataclass(frozen=True)
class Bound:
    policy: Policy
    index: int
    side: Literal["min", "max"]
    value: float | None
    percentile: int | None

    @property
    def path(self) -> Loc:
        return ("rules", self.index, "price", self.side)

    @property
    def shown(self) -> str:
        name = "floor" if self.side == "min" else "ceiling"
        return f"{name} p{self.percentile}" if self.percentile is not None else f"{name} {self.value:g}"


def bounds(policy: Policy) -> list[Bound]:
    found = []
    for index, rule in enumerate(policy.rules):
        if not isinstance(rule.body, PriceRule):
            continue
        sides: tuple[tuple[Literal["min", "max"], object], ...] = (
            ("min", rule.body.min), ("max", rule.body.max),
        )
        for side, bound in sides:
            if isinstance(bound, RelativeBound):
                found.append(Bound(policy, index, side, None, bound.percentile))
            elif isinstance(bound, int | float):
                found.append(Bound(policy, index, side, float(bound), None))
    return found


def crossed(floor: Bound, ceiling: Bound) -> bool:
    """The floor is never below the ceiling (absolute values, or percentiles of one
    category); mixed kinds are not compared."""
    if floor.side != "min" or ceiling.side != "max":
        return False
    if floor.value is not None and ceiling.value is not None:
        return floor.value > ceiling.value
    if floor.percentile is not None and ceiling.percentile is not None:
        return floor.percentile > ceiling.percentile
    return False
