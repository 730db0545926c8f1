"""The search plan and the data that explains it.

The matcher produces :class:`Match` es (which policy fired on which span of the intent);
the composer folds them into one immutable :class:`Plan` and an :class:`Explanation`;
the renderer turns the plan into query DSL. Every model here is frozen and serialises
deterministically (tuples, sorted where order carries no meaning).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from control_plane.policy import Value


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- matching ----------------------------------------------------------------------


class Span(Frozen):
    """Character offsets ``[start, end)`` into the intent, and the text they cover."""

    start: int
    end: int
    text: str

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


class CapturedText(Frozen):
    """Words a ``pattern`` trigger captured after its cue (before vocabulary mapping)."""

    name: str
    text: str
    span: Span


class Match(Frozen):
    """One policy the engine matched for an intent: the spans it matched (cue spans for
    patterns; the whole intent for ``exact``; empty for ``always``) and its captures."""

    policy_id: str
    spans: tuple[Span, ...] = ()
    captures: tuple[CapturedText, ...] = ()


# --- the plan ----------------------------------------------------------------------


class Constraint(Frozen):
    """A set of values on one catalog field, and the policies that produced it.

    ``match`` says how the values meet the field: ``terms`` (exact keyword values),
    ``phrase`` or ``words`` (analysed text queries, see :data:`control_plane.policy.TextMatch`).
    """

    field: str
    values: tuple[Value, ...]
    policies: tuple[str, ...]
    match: Literal["terms", "words", "phrase"] = "terms"

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        """``match`` is left out when it is ``terms``: keyword constraints keep the shape
        they always had (explanations, audit records, goldens)."""
        data: dict[str, object] = handler(self)
        if data.get("match") == "terms":
            del data["match"]
        return data


class Bound(Frozen):
    value: float
    policy: str
    relative: int | None = None
    """the percentile this bound was resolved from, when it was category-relative"""


class PriceBounds(Frozen):
    min: Bound | None = None
    max: Bound | None = None


class Boost(Frozen):
    """A soft boost (weight > 1) or bury (weight < 1) as one function_score function."""

    field: str
    values: tuple[Value, ...]
    weight: float
    policy: str


class Sponsored(Frozen):
    ids: tuple[str, ...]
    weight: float
    policy: str


class Weight(Frozen):
    value: float = 1.0
    policy: str | None = None
    """the policy that set it; None for the default"""


Route = Literal["fulltext", "title", "browse"]


class Plan(Frozen):
    """Everything the renderer needs, and nothing it must look up elsewhere.

    ``guards`` and ``guard_exclusions`` come from guard policies only and are rendered
    first and unconditionally; policy ``filters``/``exclusions`` never replace them.
    """

    residual: str
    route: Route = "fulltext"
    synonyms: tuple[str, ...] = ()
    category: Constraint | None = None
    filters: tuple[Constraint, ...] = ()
    exclusions: tuple[Constraint, ...] = ()
    guards: tuple[Constraint, ...] = ()
    guard_exclusions: tuple[Constraint, ...] = ()
    price: PriceBounds = PriceBounds()
    boosts: tuple[Boost, ...] = ()
    pins: tuple[str, ...] = ()
    hides: tuple[str, ...] = ()
    sponsored: tuple[Sponsored, ...] = ()
    margin_weight: Weight = Weight()
    popularity_weight: Weight = Weight()
    applied: tuple[str, ...] = ()
    """ids of the policies applied, in application order"""


# --- explanation -------------------------------------------------------------------


class MatchedPolicy(Frozen):
    policy_id: str
    kind: Literal["policy", "guard"]
    priority: int
    trigger: str
    spans: tuple[Span, ...]


class CaptureMapping(Frozen):
    """A capture and what its vocabulary made of it (``arachide`` -> ``peanuts``)."""

    policy_id: str
    name: str
    text: str
    vocabulary: str | None
    values: tuple[str, ...]
    """catalog values; empty when the vocabulary had no entry for the words"""


class Change(Frozen):
    """One field a step changed: its value before and after, as JSON-ready data."""

    field: str
    before: object
    after: object


class DroppedRule(Frozen):
    """A rule of an applied policy that did not apply, e.g. ``{market}`` on a request
    without a market. The policy's other rules still apply."""

    index: int
    """the rule's position in the policy's ``rules``"""
    kind: str
    code: Literal["context_missing"]
    reason: str


class AppliedStep(Frozen):
    policy_id: str
    consumed: tuple[Span, ...]
    changes: tuple[Change, ...]
    explain: str
    dropped: tuple[DroppedRule, ...] = ()


class Skipped(Frozen):
    policy_id: str
    code: Literal[
        "span_consumed",
        "capture_unmapped",
        "capture_missing",
        "inactive",
        "cohort",
        "disabled",
        "would_empty_intent",
    ]
    reason: str


class Resolution(Frozen):
    """A conflict on one plan field, as decided: ``priority 90 > 50``."""

    field: str
    strategy: str
    winner: str
    losers: tuple[str, ...]
    reason: str


class Explanation(Frozen):
    policy_set_version: str
    intent: str
    matched: tuple[MatchedPolicy, ...]
    applied: tuple[AppliedStep, ...]
    skipped: tuple[Skipped, ...]
    residual: str
    resolutions: tuple[Resolution, ...]
    captures: tuple[CaptureMapping, ...]


class Composition(Frozen):
    plan: Plan
    explanation: Explanation
