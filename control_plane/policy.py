"""The policy language: merchandising policies as frozen, validated data.

A policy says *when* it fires (its :class:`Trigger`) and *what* it changes in the
search plan (its :class:`Rule` list). Policies never carry raw query DSL: every rule
is one of a closed set of kinds, each with the conflict strategy it may use.

YAML shape (one policy per document)::

    id: cheap
    title: Cheap means the bottom 30% of the category
    owner: merch-team
    priority: 50
    trigger: {any: [cheap, "pas cher"], consume: true}
    rules:
      - price: {max: {percentile: 30}}
    explain: "'cheap' becomes a price ceiling relative to the category"

Every rule is a one-key mapping whose key is the rule kind, as the author writes it.
Values may reference a capture of a ``pattern`` trigger as ``"{name}"``; a capture is
mapped to catalog values through the vocabulary the rule names.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from itertools import pairwise
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from control_plane.intent_text import normalise

if TYPE_CHECKING:
    from control_plane.policy_index import PolicyIndex

POLICY_ID = r"^[a-z0-9][a-z0-9._-]{0,79}$"
CAPTURE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
CAPTURE_NAME = re.compile(r"[a-z_][a-z0-9_]*")
PATTERN = re.compile(r"^\((?P<cues>[^()]+)\)\s+\{(?P<name>[a-z_][a-z0-9_]*)\}$")
"""the original prefix form, ``(cue|cue) {name}``; :meth:`Pattern.parse` reads the general one"""

TriggerKind = Literal["exact", "pattern", "phrase", "any", "vocabulary", "always"]
#: Specificity used to order policies of equal priority (higher is more specific).
SPECIFICITY: dict[str, int] = {
    "exact": 4, "pattern": 3, "phrase": 2, "any": 1, "vocabulary": 1, "always": 0,
}
#: trigger keys other than the kind
TRIGGER_OPTIONS = ("consume", "unless", "capture")


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


Loc = tuple[str | int, ...]


def invalid(errors: list[tuple[str, str, Loc, Any]]) -> ValidationError:
    """A validation error made of ``(code, message, loc, input)`` entries.

    ``loc`` is relative to the model being validated and follows the YAML an author
    writes (``("price", "max")``), so the loader can point at the exact line. ``code``
    becomes the error ``type`` (one of the loader's error codes, see
    :mod:`control_plane.errors`). Raised from a validator, pydantic prefixes each
    ``loc`` with the location of the model being validated.
    """
    details = [
        InitErrorDetails(type=PydanticCustomError(code, message), loc=loc, input=value)
        for code, message, loc, value in errors
    ]
    return ValidationError.from_exception_data("Policy", details)


def relocated(exc: ValidationError, *prefix: str | int) -> ValidationError:
    """``exc`` with every error's ``loc`` prefixed (a nested model validated by hand).

    Types and messages are kept as they are; ``ctx`` is folded into the message.
    """
    details = [
        InitErrorDetails(
            type=PydanticCustomError(error["type"], error["msg"]),
            loc=(*prefix, *error["loc"]),
            input=error["input"],
        )
        for error in exc.errors()
    ]
    return ValidationError.from_exception_data(exc.title, details)


class PatternPart(Frozen):
    """One element of a pattern: a cue group ``(without|sans)`` or a capture ``{item}``
    (``{item:2}``: at most 2 words; no bound written: :data:`DEFAULT_MAX_WORDS`)."""

    cues: tuple[str, ...] = ()
    capture: str | None = None
    max_words: int | None = Field(default=None, ge=1, le=10)

    def source(self) -> str:
        if self.capture is None:
            return "(" + "|".join(self.cues) + ")"
        bound = "" if self.max_words is None else f":{self.max_words}"
        return "{" + self.capture + bound + "}"


#: words a capture takes at most: after its cue, and before it (a postfix cue such as
#: ``free`` qualifies the word right before it: "gluten free pasta")
DEFAULT_MAX_WORDS = 3
DEFAULT_MAX_WORDS_BEFORE = 1
_PART = re.compile(r"\((?P<cues>[^()]+)\)|\{(?P<name>[a-z_][a-z0-9_]*)(?::(?P<max>[1-9]|10))?\}|(?P<bad>\S+)")


class Pattern(Frozen):
    """Cue groups and captures in the order a shopper writes them:
    ``"(without|sans) {item}"``, ``"{item} (free|-free|less)"``,
    ``"(between) {low} (and) {high}"``. A cue written with a leading hyphen (``-free``)
    is a suffix: it also matches ``sugar-free`` and ``sugarfree``."""

    parts: tuple[PatternPart, ...]

    @model_validator(mode="before")
    @classmethod
    def _stored_before_parts(cls, data: Any) -> Any:
        """A set stored by an earlier release (``{"cues": [...], "capture": name}``, a cue
        group then one capture) reads as the same pattern, so a live set published before
        an upgrade keeps serving."""
        if isinstance(data, dict) and "parts" not in data and "cues" in data and "capture" in data:
            return {"parts": [{"cues": data["cues"]}, {"capture": data["capture"]}]}
        return data

    @classmethod
    def parse(cls, text: str) -> Pattern:
        shape = (
            f"pattern {text!r} must be cue groups and captures, e.g. '(without|sans) {{item}}',"
            " '{item} (free|-free)' or '(between) {low} (and) {high}'"
        )
        parts: list[PatternPart] = []
        for found in _PART.finditer(text.strip()):
            if found["bad"] is not None:
                raise ValueError(shape)
            if found["cues"] is not None:
                cues = tuple(c.strip() for c in found["cues"].split("|") if normalise(c))
                if not cues:
                    raise ValueError(f"pattern {text!r} has no cue in one of its groups")
                parts.append(PatternPart(cues=cues))
            else:
                bound = int(found["max"]) if found["max"] else None
                parts.append(PatternPart(capture=found["name"], max_words=bound))
        captures = [p.capture for p in parts if p.capture is not None]
        if not captures or len(captures) == len(parts):
            raise ValueError(shape)
        if len(set(captures)) != len(captures):
            raise ValueError(f"pattern {text!r} uses a capture name twice")
        for first, second in pairwise(parts):
            if (first.capture is None) == (second.capture is None):
                kind = "cue groups" if first.capture is None else "captures"
                raise ValueError(f"pattern {text!r} has two {kind} in a row")
        return cls(parts=tuple(parts))

    def source(self) -> str:
        return " ".join(part.source() for part in self.parts)

    @property
    def cues(self) -> tuple[str, ...]:
        """Every cue of every group, in order, each once."""
        return tuple(dict.fromkeys(c for part in self.parts for c in part.cues))

    @property
    def capture(self) -> str:
        """The first capture's name."""
        return self.captures[0]

    @property
    def captures(self) -> tuple[str, ...]:
        return tuple(p.capture for p in self.parts if p.capture is not None)


class Trigger(Frozen):
    """When a policy fires. Exactly one kind per trigger.

    - ``exact``: the whole intent equals one of the phrases (after analysis);
    - ``pattern``: cue groups and captures, e.g. ``(without|sans) {item}``,
      ``{item} (free|-free)``, ``(between) {low} (and) {high}``;
    - ``phrase``: the intent contains one of the phrases;
    - ``any``: the intent contains any of the terms;
    - ``vocabulary``: the intent contains any word of the named vocabulary, anywhere; the
      matched words are captured (as ``{<capture>}``, by default ``{<vocabulary>}``) and
      map to the vocabulary's entries;
    - ``always``: every request (guards, cohort policies).

    ``consume: true`` removes the matched span from the residual text. ``unless:
    [phrases]`` (any kind): a cue inside one of these phrases does not fire ("without
    remorse", a title; "no fear", a brand), and the words are not consumed.
    """

    kind: TriggerKind
    values: tuple[str, ...] = ()
    patterns: tuple[Pattern, ...] = ()
    consume: bool = False
    unless: tuple[str, ...] = ()
    vocabulary: str | None = None
    capture: str | None = None
    """the capture name of a vocabulary trigger (default: the vocabulary's name)"""

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, data: Any) -> Any:
        """Accept the YAML form ``{phrase: [...], consume: true}``; errors point at the
        key (``trigger.pattern.1``) the author wrote."""
        if not isinstance(data, dict) or "kind" in data:
            return data
        problems: list[tuple[str, str, Loc, Any]] = [
            ("extra_forbidden", f"unknown trigger key {key!r}", (key,), data[key])
            for key in sorted(map(str, set(data) - {*SPECIFICITY, *TRIGGER_OPTIONS}))
        ]
        kinds = [k for k in SPECIFICITY if k in data]
        if len(kinds) != 1:
            problems.append((
                "trigger_kind",
                "a trigger needs exactly one of " + ", ".join(SPECIFICITY)
                + f" (found {', '.join(kinds) or 'none'})",
                (),
                data,
            ))
            raise invalid(problems)
        kind = kinds[0]
        raw = data[kind]
        out: dict[str, Any] = {"kind": kind, "consume": data.get("consume", False)}
        if "unless" in data:
            unless = data["unless"]
            unless = [unless] if isinstance(unless, str) else unless
            if not (
                isinstance(unless, list) and unless
                and all(isinstance(i, str) and normalise(i) for i in unless)
            ):
                problems.append((
                    "invalid_value", "'unless' takes a non-empty list of non-empty phrases",
                    ("unless",), data["unless"],
                ))
            else:
                out["unless"] = [i.strip() for i in unless]
        if "capture" in data:
            if kind != "vocabulary":
                problems.append((
                    "invalid_value", "'capture' names the capture of a vocabulary trigger only",
                    ("capture",), data["capture"],
                ))
            elif not (isinstance(data["capture"], str) and CAPTURE_NAME.fullmatch(data["capture"])):
                problems.append((
                    "invalid_value", "'capture' must be a capture name such as 'colour'",
                    ("capture",), data["capture"],
                ))
            else:
                out["capture"] = data["capture"]
        items = [raw] if isinstance(raw, str) else raw
        if kind == "always":
            if raw is not True:
                problems.append(("invalid_value", "'always' takes the value true", (kind,), raw))
        elif kind == "vocabulary":
            if not (isinstance(raw, str) and raw.strip()):
                problems.append(("invalid_value", "'vocabulary' takes a vocabulary name", (kind,), raw))
            else:
                out["vocabulary"] = raw.strip()
                if "capture" not in data and not CAPTURE_NAME.fullmatch(raw.strip()):
                    problems.append((
                        "invalid_value",
                        f"vocabulary {raw!r} is not a capture name: give the trigger a 'capture'",
                        (kind,), raw,
                    ))
        elif not (
            isinstance(items, list)
            and items
            and all(isinstance(i, str) and normalise(i) for i in items)
        ):
            problems.append((
                "invalid_value",
                f"'{kind}' takes a non-empty list of non-empty strings (once invisible characters"
                " and spaces are removed)",
                (kind,), raw,
            ))
        elif kind == "pattern":
            out["patterns"] = []
            for index, item in enumerate(items):
                try:
                    out["patterns"].append(Pattern.parse(item))
                except ValueError as exc:
                    loc: Loc = (kind, index) if isinstance(raw, list) else (kind,)
                    problems.append(("bad_pattern", str(exc), loc, item))
        else:
            out["values"] = [i.strip() for i in items]
        if problems:
            raise invalid(problems)
        return out

    @model_validator(mode="after")
    def _check(self) -> Trigger:
        if self.kind == "pattern" and not self.patterns:
            raise ValueError("a pattern trigger needs at least one pattern")
        if self.kind in ("exact", "phrase", "any") and not (
            self.values and all(v for v in self.values)
        ):
            raise ValueError(f"'{self.kind}' needs a non-empty list of non-empty phrases")
        if self.kind != "pattern" and self.patterns:
            raise ValueError(f"an '{self.kind}' trigger takes no patterns")
        if self.kind in ("pattern", "always") and self.values:
            raise ValueError(f"a '{self.kind}' trigger takes no values")
        if (self.kind == "vocabulary") != (self.vocabulary is not None):
            raise ValueError("a vocabulary trigger, and only it, names a vocabulary")
        if self.kind == "always" and self.consume:
            raise ValueError("an 'always' trigger has no span to consume")
        return self

    @property
    def specificity(self) -> int:
        return SPECIFICITY[self.kind]

    @property
    def captures(self) -> tuple[str, ...]:
        if self.kind == "vocabulary":
            return (self.vocabulary_capture,)
        return tuple(sorted({name for p in self.patterns for name in p.captures}))

    @property
    def vocabulary_capture(self) -> str:
        """The capture name of a vocabulary trigger."""
        return self.capture or self.vocabulary or ""


class ActiveWindow(Frozen):
    """Half-open time window ``[from, until)``; either end may be open."""

    start: datetime | None = Field(default=None, alias="from")
    until: datetime | None = None

    @field_validator("start", "until")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> ActiveWindow:
        if self.start and self.until and self.until <= self.start:
            raise invalid([
                ("bad_window", "active window 'until' must be after 'from'", ("until",),
                 self.until.isoformat())
            ])
        return self

    def contains(self, now: datetime) -> bool:
        return (self.start is None or self.start <= now) and (
            self.until is None or now < self.until
        )


# --- rules -------------------------------------------------------------------------

Value = str | int | float | bool


#: How a filter or exclusion meets its field: ``terms`` (keyword fields: the exact values,
#: through the field's normalizer), ``phrase`` (text fields: each value as a
#: ``match_phrase`` analysed with the field's analyzer) or ``words`` (text fields: every
#: word of a value, in any order, as one ``match`` with ``operator: and``). Left out, the
#: loader picks it from the catalog mapping: ``phrase`` on a text field, ``terms`` otherwise.
TextMatch = Literal["terms", "words", "phrase"]


class FilterRule(Frozen):
    """Hard filter: keep only products whose ``field`` has one of ``values``
    (``match``: see :data:`TextMatch`)."""

    field: str
    values: tuple[Value, ...]
    vocabulary: str | None = None
    strategy: Literal["intersect", "override"] = "intersect"
    match: TextMatch | None = None


class CategoryRule(Frozen):
    """Category constraint on the catalog's category path."""

    values: tuple[str, ...]
    strategy: Literal["override", "merge", "intersect"] = "override"


class ExcludeRule(Frozen):
    """Exclusion (``must_not``): drop products whose ``field`` has any of ``values``
    (``match``: see :data:`TextMatch`; on a text field "peanuts" drops every product whose
    text says peanut or peanuts)."""

    field: str
    values: tuple[Value, ...]
    vocabulary: str | None = None
    match: TextMatch | None = None


class RelativeBound(Frozen):
    """A price bound relative to the resolved category's price distribution. With several
    resolved categories, ``of`` says which percentile: ``union`` (the default) of all their
    prices together, ``each`` the one that holds for each category (the lowest for a
    ceiling, the highest for a floor), ``max`` the highest of the per-category ones."""

    percentile: int = Field(ge=5, le=95, multiple_of=5)
    of: Literal["union", "each", "max"] = "union"

    @model_serializer(mode="wrap")
    def _without_default_of(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The default ``of`` is left out, so sets written before it existed keep their version."""
        data = handler(self)
        if isinstance(data, dict) and data.get("of") == "union":
            data.pop("of")
        return data


PriceBound = float | RelativeBound | str


class PriceRule(Frozen):
    """Price floor and/or ceiling: a number, ``{percentile: P}`` or a capture ``"{amount}"``."""

    min: PriceBound | None = None
    max: PriceBound | None = None
    strategy: Literal["most_restrictive", "override"] = "most_restrictive"

    @field_validator("min", "max")
    @classmethod
    def _bound(cls, bound: PriceBound | None) -> PriceBound | None:
        if isinstance(bound, str) and not CAPTURE.fullmatch(bound):
            raise ValueError(
                f"price bound {bound!r} must be a number, {{percentile: P}} or '{{capture}}'"
            )
        if isinstance(bound, float) and bound < 0:
            raise ValueError("price bounds must not be negative")
        return bound

    @model_validator(mode="after")
    def _some_bound(self) -> PriceRule:
        if self.min is None and self.max is None:
            raise ValueError("a price rule needs 'min' or 'max'")
        return self


class BoostRule(Frozen):
    """Soft boost (``weight`` > 1) of products whose ``field`` has one of ``values``."""

    field: str
    values: tuple[Value, ...]
    weight: float = Field(gt=1.0)
    strategy: Literal["accumulate", "override"] = "accumulate"


class BuryRule(Frozen):
    """Soft demotion (0 < ``weight`` < 1) of products whose ``field`` has one of ``values``."""

    field: str
    values: tuple[Value, ...]
    weight: float = Field(gt=0.0, lt=1.0)
    strategy: Literal["accumulate", "override"] = "accumulate"


class PinRule(Frozen):
    """Pin product ids to the top, in the order given."""

    ids: tuple[str, ...] = Field(min_length=1)


class HideRule(Frozen):
    """Never show these product ids. Hide beats pin."""

    ids: tuple[str, ...] = Field(min_length=1)


class RewriteRule(Frozen):
    """Replace a word or phrase of the residual text before full-text retrieval."""

    replace: str = Field(alias="from", min_length=1)
    to: str


class SynonymsRule(Frozen):
    """Add alternative phrasings of the residual text (searched with ``should``)."""

    terms: tuple[str, ...] = Field(min_length=1)


class RouteRule(Frozen):
    """Retrieval route: ``fulltext`` (default), ``title`` (title only) or ``browse``
    (no text query: the constraints alone select, scoring decides the order)."""

    to: Literal["fulltext", "title", "browse"]


class EconomicsRule(Frozen):
    """Margin and popularity weights of the economic scoring layer (0 removes a signal)."""

    margin_weight: float | None = Field(default=None, ge=0.0, le=10.0)
    popularity_weight: float | None = Field(default=None, ge=0.0, le=10.0)

    @model_validator(mode="after")
    def _some_weight(self) -> EconomicsRule:
        if self.margin_weight is None and self.popularity_weight is None:
            raise ValueError("an economics rule needs margin_weight or popularity_weight")
        return self


class SponsoredRule(Frozen):
    """Mark product ids as sponsored (labelled in hits) with an optional boost weight."""

    ids: tuple[str, ...] = Field(min_length=1)
    weight: float = Field(default=1.0, ge=1.0)


RULE_MODELS: dict[str, type[Frozen]] = {
    "filter": FilterRule,
    "category": CategoryRule,
    "exclude": ExcludeRule,
    "price": PriceRule,
    "boost": BoostRule,
    "bury": BuryRule,
    "pin": PinRule,
    "hide": HideRule,
    "rewrite": RewriteRule,
    "synonyms": SynonymsRule,
    "route": RouteRule,
    "economics": EconomicsRule,
    "sponsored": SponsoredRule,
}

RuleBody = (
    FilterRule
    | CategoryRule
    | ExcludeRule
    | PriceRule
    | BoostRule
    | BuryRule
    | PinRule
    | HideRule
    | RewriteRule
    | SynonymsRule
    | RouteRule
    | EconomicsRule
    | SponsoredRule
)

RuleKind = Literal[
    "filter", "category", "exclude", "price", "boost", "bury", "pin", "hide",
    "rewrite", "synonyms", "route", "economics", "sponsored",
]


class Rule(Frozen):
    """One rule of a policy: its kind (the YAML key) and its body."""

    kind: RuleKind
    body: Annotated[RuleBody, Field(union_mode="left_to_right")]

    @model_validator(mode="before")
    @classmethod
    def _from_yaml(cls, data: Any) -> Any:
        """Accept the YAML form ``{kind: body}`` and the dump form ``{kind, body}``.

        Body errors are located under the kind as the author wrote it
        (``rules.2.price.max``), or under ``body`` in the dump form.
        """
        if isinstance(data, dict) and "kind" not in data:
            if len(data) != 1:
                raise invalid([(
                    "rule_shape",
                    "a rule is a mapping with exactly one key, the rule kind"
                    f" (found {', '.join(map(str, data)) or 'none'})",
                    (),
                    data,
                )])
            ((kind, body),) = data.items()
            return {"kind": kind, "body": _validate_body(kind, body, (kind,))}
        if isinstance(data, dict) and isinstance(data.get("body"), dict):
            return {**data, "body": _validate_body(data["kind"], data["body"], ("body",))}
        return data

    @model_validator(mode="after")
    def _body_matches_kind(self) -> Rule:
        if not isinstance(self.body, RULE_MODELS[self.kind]):
            raise ValueError(f"rule body does not match kind {self.kind!r}")
        return self

    def to_yaml(self) -> dict[str, Any]:
        return {self.kind: self.body.model_dump(mode="json", by_alias=True, exclude_defaults=True)}

    @property
    def captures(self) -> tuple[str, ...]:
        text = self.body.model_dump_json(by_alias=True)
        return tuple(sorted(set(CAPTURE.findall(text))))


def _validate_body(kind: Any, body: Any, loc: Loc) -> Any:
    if kind not in RULE_MODELS:
        raise invalid([(
            "unknown_rule",
            f"unknown rule kind {kind!r}; known: {', '.join(sorted(RULE_MODELS))}",
            (kind,) if isinstance(kind, str | int) else (),
            kind,
        )])
    try:
        return RULE_MODELS[kind].model_validate(body)
    except ValidationError as exc:
        raise relocated(exc, *loc) from None


class Policy(Frozen):
    """A merchandising policy (``kind: policy``) or a guard (``kind: guard``).

    Guards hold constraints no policy can lift (availability, visibility, market):
    they always apply, are never consumed, skipped or overridden.
    """

    id: str = Field(pattern=POLICY_ID)
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    owner: str = Field(min_length=1)
    priority: int = Field(default=50, ge=0, le=1000)
    enabled: bool = True
    kind: Literal["policy", "guard"] = "policy"
    cohorts: tuple[str, ...] = ()
    active: ActiveWindow | None = None
    trigger: Trigger
    rules: tuple[Rule, ...] = Field(min_length=1)
    explain: str = ""
    origin: Literal["human", "rules", "llm"] = "human"

    @field_validator("cohorts")
    @classmethod
    def _sorted_cohorts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        problems: list[tuple[str, str, Loc, Any]] = []
        if self.kind == "guard" and self.trigger.kind != "always":
            problems.append((
                "guard_trigger", "a guard's trigger must be 'always: true'", ("trigger",),
                self.trigger.kind,
            ))
        if self.kind == "guard" and self.cohorts:
            problems.append((
                "guard_cohorts", "a guard applies to everyone: it takes no cohorts",
                ("cohorts",), list(self.cohorts),
            ))
        captured = set(self.trigger.captures)
        for index, rule in enumerate(self.rules):
            missing = sorted(set(rule.captures) - captured - CONTEXT_VALUES)
            if missing:
                problems.append((
                    "unknown_capture",
                    f"rule '{rule.kind}' uses {', '.join('{' + m + '}' for m in missing)}"
                    " which the trigger does not capture",
                    ("rules", index, rule.kind),
                    missing,
                ))
        if problems:
            raise invalid(problems)
        return self

    def is_active(self, now: datetime) -> bool:
        return self.active is None or self.active.contains(now)


#: Values a rule may reference that come from the request context, not a capture.
CONTEXT_VALUES = frozenset({"market"})


class Vocabulary(Frozen):
    """Maps words a shopper may write to catalog values (``arachide`` -> ``peanuts``)."""

    name: str = Field(pattern=POLICY_ID)
    field: str | None = None
    entries: dict[str, tuple[str, ...]]
    """catalog value -> the words (any language) that mean it"""


class Governance(Frozen):
    """What policies may touch. The loader rejects policies that break it."""

    filterable_fields: tuple[str, ...]
    boostable_fields: tuple[str, ...]
    max_boost_weight: float = Field(default=5.0, gt=1.0)
    max_pins: int = Field(default=5, ge=0)
    max_sponsored: int = Field(default=3, ge=0)
    protected_fields: tuple[str, ...] = ()
    """fields only guards may filter on (e.g. availability, visibility)"""


class PolicySet(Frozen):
    """A compiled, frozen set of policies: what a request is evaluated against.

    ``version`` is the sha256 of the canonical JSON of everything else (policies sorted by
    id, vocabularies by name, governance), so equal content means an equal version,
    whatever the file layout it was loaded from.
    """

    version: str
    policies: tuple[Policy, ...]
    vocabularies: tuple[Vocabulary, ...] = ()
    governance: Governance

    def lookups(self) -> PolicyIndex:
        """The id map, standing guards, vocabulary tables and sorted window edges of this
        set, built once per loaded set (:mod:`control_plane.policy_index`)."""
        from control_plane.policy_index import index_of

        return index_of(self)

    def policy(self, policy_id: str) -> Policy:
        for policy in self.policies:
            if policy.id == policy_id:
                return policy
        raise KeyError(policy_id)

    def vocabulary(self, name: str) -> Vocabulary | None:
        for vocabulary in self.vocabularies:
            if vocabulary.name == name:
                return vocabulary
        return None
