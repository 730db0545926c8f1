"""Lint: static analysis of a policy set, before review and promotion.

``lint(policy_set, mapping_fields=..., now=...) -> list[Finding]`` is the whole stage. It is
pure: no engine, no clock (``now`` is passed in), no I/O. :func:`lint_directory` is the edge
that reads a policy directory: the loader's errors become findings with the loader's codes
and ``file:line``; a directory that loads is linted with every policy located at the
``file:line`` of its ``id``.

A finding must be true. Trigger texts are compared after folding case and accents and
splitting on white space, which the engine's analyzer (elision, folding, plural stemming)
only ever makes *more* equal: lint may miss an overlap the engine would see ("chocolats"
and "chocolat"), never invent one. Two policies are said to *apply together* only on an
intent lint can name, the witness quoted in the message:

- one of their trigger texts fires both: the same phrase, a phrase containing the other's
  (``"dark chocolate"`` fires ``chocolate``; an ``exact`` text alike), a pattern cue that is,
  or contains, the other's phrase or cue (``"free of …"``);
- or one of them has an ``always`` trigger (it fires with anything);

both enabled, with cohorts a request can carry, active windows that overlap at or after
``now``, and the earlier of the two (composer order: priority, specificity, matched length,
id) not consuming the words the later one matched. Intents that merely combine two
triggers ("cheap vegan") are not analysed: any two phrase policies can be combined so, and
the composer arbitrates them by precedence.

Codes (the loader's error codes, see :data:`control_plane.errors.ERROR_CODES`, come on top:
load errors and governance breaches, always errors):

=========================  ========  ===================================================
code                       severity  meaning
=========================  ========  ===================================================
``unmapped_field``         error     a rule names a field the catalog mapping lacks
``field_type_mismatch``    error     a rule value the field's mapping type cannot hold
                                     (``yes`` on a boolean), or an object field
``contradictory_filters``  error     constraints that cannot all hold and that the
                                     composer does not arbitrate: a policy's own rules
                                     (two filters on a field with no common value, a
                                     filter whose values it also excludes, a price floor
                                     above its ceiling), or a filter or category of one
                                     policy entirely excluded by another it applies with
``conflicting_filters``    warning   two policies that apply together constrain one field
                                     (filters on a field, category, price bounds) in ways
                                     that cannot both hold: the composer keeps the earlier
                                     policy's and drops the later one's rule
``shadowed_policy``        warning   every trigger text of the policy is matched and
                                     consumed first by higher-precedence policies that are
                                     active whenever it is: it can never apply
``overlapping_triggers``   warning   two policies match the same text at equal priority
                                     and specificity: which applies first depends only on
                                     their ids
``window_expired``         warning   the active window ended at or before ``now``
``unreachable_trigger``    warning   a trigger text with no word in it (punctuation only):
                                     the analyzer gives no token, it never matches
``unreachable_cohort``     warning   a cohort no request can carry (requests' cohorts are
                                     identifiers: letters, digits, ``_.:@-``)
``untested_policy``        warning   no policy test names the policy (only when the tested
                                     ids are given)
``disabled_policy``        info      ``enabled: false``: the policy never fires
=========================  ========  ===================================================

An active window whose ``until`` is not after its ``from`` never reaches a policy set: the
loader refuses it (``bad_window``). Disabled, expired and unreachable policies are left out
of the analyses between policies (they never fire); their own rules are still checked.
``docs/lint.md`` has an example of every code.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from pathlib import Path
from typing import Literal

from control_plane.catalog.profile import NUMERIC_TYPES, CatalogProfile, mapping_fields
from control_plane.errors import ERROR_CODES, PolicyError, PolicyLoadError
from control_plane.loader import check_policy_set, load_policy_set, policy_locations
from control_plane.policy import (
    CAPTURE,
    SPECIFICITY,
    BoostRule,
    BuryRule,
    CategoryRule,
    ExcludeRule,
    FilterRule,
    Loc,
    Policy,
    PolicySet,
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
    "unreachable_trigger": ("warning", "a trigger text with no word in it never matches"),
    "unreachable_cohort": ("warning", "a cohort no request can carry"),
    "untested_policy": ("warning", "no policy test names the policy"),
    "disabled_policy": ("info", "enabled: false, the policy never fires"),
}

#: The cohorts a request may carry (``SearchRequest.cohorts`` in ``control_plane.service``).
COHORT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")
#: Stands for the words a pattern captures after its cue (no trigger text folds to it).
CAPTURED = "\x00"
BOOLEAN_STRINGS = frozenset({"true", "false", ""})


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


# --- entry points ----------------------------------------------------------------------


def lint(
    policy_set: PolicySet,
    *,
    mapping_fields: Mapping[str, str] | None = None,
    now: datetime,
    locations: Mapping[str, str] | None = None,
    tested_policy_ids: set[str] | None = None,
    profile: CatalogProfile | None = None,
) -> list[Finding]:
    """Every finding on ``policy_set``, sorted by severity, location, code, then message.

    ``mapping_fields`` (field -> mapping type, see :func:`mapping_fields_of`) enables the
    field checks; ``locations`` (policy id -> ``file:line``) places findings in files;
    ``tested_policy_ids`` enables ``untested_policy``; ``profile`` names the fields that
    category and price rules constrain (checked against the mapping, and a category rule
    against exclusions of the category field).
    """
    where = _Where(locations or {})
    category_field = profile.category if profile is not None else None
    found = list(_governance(policy_set, where))
    for policy in policy_set.policies:
        found += _reachability(policy, now, where)
        found += _own_constraints(policy, category_field, where)
        if mapping_fields is not None:
            found += _mapped_fields(policy, mapping_fields, profile, where)
        if tested_policy_ids is not None and policy.id not in tested_policy_ids:
            found.append(where.finding(
                "untested_policy", policy.id, "no policy test case names this policy in its expectations"
            ))
    live = sorted((p for p in policy_set.policies if _can_fire(p, now)), key=lambda p: p.id)
    shadowed: set[str] = set()
    for policy in live:
        findings = list(_shadowed(policy, live, now, where))
        shadowed |= {policy.id} if findings else set()
        found += findings
    # a shadowed policy never applies: it conflicts with nothing
    reachable = [p for p in live if p.id not in shadowed]
    for one, other in combinations(reachable, 2):
        found += _between(one, other, now, category_field, where)
    return sorted(found, key=_order)


def lint_directory(
    directory: Path | str,
    *,
    mapping: dict[str, object] | None,
    now: datetime,
    tested_policy_ids: set[str] | None = None,
    profile: CatalogProfile | None = None,
) -> list[Finding]:
    """Lint a policy directory. When it does not load, its load errors are the findings
    (the loader's codes, at ``file:line``); otherwise :func:`lint` with every policy
    located at its file. ``mapping`` is an index mapping body (None skips field checks)."""
    try:
        policy_set = load_policy_set(directory)
    except PolicyLoadError as exc:
        return sorted((_load_finding(error) for error in exc.errors), key=_order)
    return lint(
        policy_set,
        mapping_fields=mapping_fields_of(mapping) if mapping is not None else None,
        now=now,
        locations=policy_locations(directory),
        tested_policy_ids=tested_policy_ids,
        profile=profile,
    )


def mapping_fields_of(mapping: Mapping[str, object]) -> dict[str, str]:
    """Dotted field -> mapping type of an index mapping (``{"mappings": ...}``, the mapping
    itself, or a ``GET _mapping`` entry): properties, objects (type ``object``) and their
    sub-fields, multi-fields (``title.raw``)."""
    return mapping_fields(dict(mapping))


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


# --- locations and order ---------------------------------------------------------------


@dataclass(frozen=True)
class _Where:
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


def _load_finding(error: PolicyError) -> Finding:
    location = f"{error.file}:{error.line}" if error.line else error.file
    return Finding(error.code, "error", None, location, error.message)


def _order(finding: Finding) -> tuple[int, str, int, str, str, str]:
    """Severity, then location (``file:10`` after ``file:9``), code, policy, message."""
    head, _, tail = finding.location.rpartition(":")
    place = (head, int(tail)) if head and tail.isdigit() else (finding.location, 0)
    return (
        SEVERITIES.index(finding.severity), *place, finding.code, finding.policy_id or "", finding.message,
    )


def _quoted(values: Iterable[Value]) -> str:
    return "[" + ", ".join(repr(v) if isinstance(v, str) else str(v).lower() for v in values) + "]"


# --- governance (sets that did not come through the loader) --------------------------------


def _governance(policy_set: PolicySet, where: _Where) -> Iterator[Finding]:
    """The loader's cross-checks again, for sets built or stored elsewhere (none for a set
    :func:`load_policy_set` returned). Findings carry the loader's codes."""
    violations = check_policy_set(policy_set.policies, policy_set.vocabularies, policy_set.governance)
    for violation in violations:
        if violation.subject == "policy":
            policy_id = policy_set.policies[violation.index].id
            yield where.finding(violation.code, policy_id, violation.message, violation.loc)
        else:
            name = policy_set.vocabularies[violation.index].name
            yield Finding(violation.code, "error", None, f"vocabulary:{name}", violation.message)


# --- one policy: can it fire at all? ------------------------------------------------------


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _words(text: str) -> tuple[str, ...]:
    return tuple(_fold(text).split())


def _wordless(text: str) -> bool:
    """Only punctuation, separators and control characters: the analyzer yields no token."""
    return all(unicodedata.category(c)[0] in "PZC" for c in text)


def _trigger_texts(policy: Policy) -> tuple[str, ...]:
    trigger = policy.trigger
    if trigger.kind == "pattern":
        return tuple(dict.fromkeys(cue for pattern in trigger.patterns for cue in pattern.cues))
    return trigger.values


def _reachable_texts(policy: Policy) -> tuple[str, ...]:
    return tuple(t for t in _trigger_texts(policy) if not _wordless(t))


def _expired(policy: Policy, now: datetime) -> bool:
    return policy.active is not None and policy.active.until is not None and policy.active.until <= now


def _can_fire(policy: Policy, now: datetime) -> bool:
    cohorts_ok = not policy.cohorts or any(COHORT.match(c) for c in policy.cohorts)
    triggers_ok = policy.trigger.kind == "always" or bool(_reachable_texts(policy))
    return policy.enabled and not _expired(policy, now) and cohorts_ok and triggers_ok


def _reachability(policy: Policy, now: datetime, where: _Where) -> Iterator[Finding]:
    if not policy.enabled:
        yield where.finding(
            "disabled_policy", policy.id, "the policy is disabled: it never fires", ("enabled",)
        )
    if _expired(policy, now) and policy.active is not None and policy.active.until is not None:
        yield where.finding(
            "window_expired", policy.id,
            f"the active window ended {policy.active.until.isoformat()}, at or before"
            f" {now.isoformat()}: the policy never fires again",
            ("active", "until"),
        )
    unreachable = [t for t in _trigger_texts(policy) if _wordless(t)]
    if unreachable:
        never = "" if _reachable_texts(policy) else "; the policy has no other trigger text: it never fires"
        yield where.finding(
            "unreachable_trigger", policy.id,
            f"{_quoted(unreachable)} has no word the analyzer keeps: it never matches{never}",
            ("trigger", policy.trigger.kind),
        )
    bad = [c for c in policy.cohorts if not COHORT.match(c)]
    if bad:
        never = "; the policy has no other cohort: it never fires" if len(bad) == len(policy.cohorts) else ""
        yield where.finding(
            "unreachable_cohort", policy.id,
            f"no request can carry {_quoted(bad)} (a request's cohorts are identifiers: letters,"
            f" digits and '_.:@-', starting with a letter or digit){never}",
            ("cohorts",),
        )


# --- fields against the mapping -------------------------------------------------------


def _rule_fields(
    policy: Policy, profile: CatalogProfile | None
) -> Iterator[tuple[str, Loc, tuple[Value, ...], str]]:
    """(field, path, literal values, what) for each catalog field a rule names or implies."""
    for index, rule in enumerate(policy.rules):
        body, at = rule.body, ("rules", index, rule.kind)
        if isinstance(body, FilterRule | ExcludeRule | BoostRule | BuryRule):
            yield body.field, (*at, "field"), _literal(body.values), f"field {body.field!r}"
        elif isinstance(body, CategoryRule) and profile is not None:
            what = f"the profile's category field {profile.category!r}"
            yield profile.category, at, _literal(body.values), what
        elif isinstance(body, PriceRule) and profile is not None:
            yield profile.price, at, (), f"the profile's price field {profile.price!r}"


def _literal(values: Sequence[Value]) -> tuple[Value, ...]:
    return tuple(v for v in values if not (isinstance(v, str) and CAPTURE.search(v)))


def _misfit(value: Value, field_type: str) -> bool:
    if field_type == "boolean":
        return not (isinstance(value, bool) or (isinstance(value, str) and value in BOOLEAN_STRINGS))
    if field_type in NUMERIC_TYPES:
        if isinstance(value, bool):
            return True
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:
                return True
    return False


def _mapped_fields(
    policy: Policy, types: Mapping[str, str], profile: CatalogProfile | None, where: _Where
) -> Iterator[Finding]:
    for field, path, values, what in _rule_fields(policy, profile):
        field_type = types.get(field)
        if field_type is None:
            yield where.finding("unmapped_field", policy.id, f"{what} is not in the catalog mapping", path)
        elif field_type in ("object", "nested"):
            problem = f"{what} is an {field_type}: it holds no value to match"
            yield where.finding("field_type_mismatch", policy.id, problem, path)
        else:
            wrong = [v for v in values if _misfit(v, field_type)]
            if wrong:
                yield where.finding(
                    "field_type_mismatch", policy.id,
                    f"{what} is {field_type}: {_quoted(wrong)} cannot be one of its values", path,
                )


# --- constraints: filters, categories, exclusions, price bounds ------------------------------


ConstraintKind = Literal["filter", "guard", "category", "exclude"]
LABELS: dict[ConstraintKind, str] = {
    "filter": "filter on {field!r}", "guard": "guard filter on {field!r}",
    "category": "category", "exclude": "exclusion on {field!r}",
}


@dataclass(frozen=True)
class _Constraint:
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
        text = LABELS[self.kind].format(field=self.field) + f" {_quoted(self.values)}"
        return f"{text} of '{self.policy.id}'" if reader is not None and reader.id != self.policy.id else text


def _constraints(policy: Policy, category_field: str | None) -> list[_Constraint]:
    found = []
    for index, rule in enumerate(policy.rules):
        body = rule.body
        if isinstance(body, FilterRule | ExcludeRule | CategoryRule):
            values: tuple[Value, ...] = tuple(body.values)
            if _literal(values) != values:
                continue
        if isinstance(body, FilterRule):
            kind: ConstraintKind = "guard" if policy.kind == "guard" else "filter"
            found.append(_Constraint(policy, index, kind, body.field, values, body.strategy))
        elif isinstance(body, ExcludeRule):
            found.append(_Constraint(policy, index, "exclude", body.field, values, "union"))
        elif isinstance(body, CategoryRule):
            found.append(_Constraint(policy, index, "category", category_field, values, body.strategy))
    return found


def _identities(values: Iterable[Value]) -> set[tuple[str, str]]:
    """Values as the composer compares them (``1`` and ``True`` differ)."""
    return {(type(v).__name__, repr(v)) for v in values}


def _excluded(positive: _Constraint, exclusion: _Constraint) -> bool:
    """Every value ``positive`` allows is excluded: nothing can pass both (equal values are
    equal terms to the engine, whatever the field's normalizer)."""
    return (
        positive.kind != "exclude" and exclusion.kind == "exclude"
        and positive.field is not None and positive.field == exclusion.field
        and _identities(positive.values) <= _identities(exclusion.values)
    )


def _disjoint_on_one_key(first: _Constraint, second: _Constraint) -> bool:
    return (
        first.plan_key is not None and first.plan_key == second.plan_key
        and not _identities(first.values) & _identities(second.values)
    )


@dataclass(frozen=True)
class _Bound:
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


def _bounds(policy: Policy) -> list[_Bound]:
    found = []
    for index, rule in enumerate(policy.rules):
        if not isinstance(rule.body, PriceRule):
            continue
        sides: tuple[tuple[Literal["min", "max"], object], ...] = (
            ("min", rule.body.min), ("max", rule.body.max),
        )
        for side, bound in sides:
            if isinstance(bound, RelativeBound):
                found.append(_Bound(policy, index, side, None, bound.percentile))
            elif isinstance(bound, int | float):
                found.append(_Bound(policy, index, side, float(bound), None))
    return found


def _crossed(floor: _Bound, ceiling: _Bound) -> bool:
    """The floor is never below the ceiling (absolute values, or percentiles of one
    category); mixed kinds are not compared."""
    if floor.side != "min" or ceiling.side != "max":
        return False
    if floor.value is not None and ceiling.value is not None:
        return floor.value > ceiling.value
    if floor.percentile is not None and ceiling.percentile is not None:
        return floor.percentile > ceiling.percentile
    return False


def _own_constraints(policy: Policy, category_field: str | None, where: _Where) -> Iterator[Finding]:
    """A policy's rules that contradict each other (``contradictory_filters``)."""
    for first, second in combinations(_constraints(policy, category_field), 2):
        if _disjoint_on_one_key(first, second) and not (
            second.strategy == "merge" and first.strategy != "override"
        ):
            yield where.finding(
                "contradictory_filters", policy.id,
                f"{second.shown()} has nothing in common with {first.shown()} (rules.{first.index}):"
                " the composer drops the later rule whenever the policy applies",
                second.path,
            )
        for positive, exclusion in ((first, second), (second, first)):
            if _excluded(positive, exclusion):
                yield where.finding(
                    "contradictory_filters", policy.id,
                    f"every value of {positive.shown()} is excluded by {exclusion.shown()}"
                    f" (rules.{exclusion.index}):"
                    " nothing can match whenever the policy applies",
                    positive.path,
                )
    for floor, ceiling in combinations(_bounds(policy), 2):
        for low, high in ((floor, ceiling), (ceiling, floor)):
            if _crossed(low, high):
                yield where.finding(
                    "contradictory_filters", policy.id,
                    f"{low.shown} (rules.{low.index}) is never below {high.shown} (rules.{high.index}):"
                    " the policy's price bounds cannot both hold",
                    ("rules", max(low.index, high.index), "price"),
                )


# --- two policies: texts both fire on ---------------------------------------------------


@dataclass(frozen=True)
class _Text:
    """An intent lint can name: folded words (``CAPTURED`` for a pattern's captured words)."""

    words: tuple[str, ...]
    shown: str


def _texts(policy: Policy) -> list[_Text]:
    if policy.trigger.kind == "always":
        return []
    if policy.trigger.kind == "pattern":
        return [_Text((*_words(c), CAPTURED), f"'{c} …'") for c in _reachable_texts(policy)]
    return [_Text(_words(v), f"'{v}'") for v in _reachable_texts(policy)]


def _occurrences(words: tuple[str, ...], part: tuple[str, ...]) -> Iterator[int]:
    for start in range(len(words) - len(part) + 1):
        if part and words[start : start + len(part)] == part:
            yield start


def _matched_length(policy: Policy, words: tuple[str, ...]) -> int | None:
    """Intent characters the policy's spans cover on ``words`` (adjacent matched words merge,
    like the engine's highlights), or None when it does not fire there."""
    kind = policy.trigger.kind
    if kind == "always":
        return 0
    text_length = len(" ".join(words))
    if kind == "exact":
        return text_length if any(_words(v) == words for v in _reachable_texts(policy)) else None
    if kind == "pattern":
        cues = [_words(c) for c in _reachable_texts(policy)]
        fires = any(words[-len(cue) - 1 :] == (*cue, CAPTURED) for cue in cues)
        return text_length if fires else None
    covered = [False] * len(words)
    for value in _reachable_texts(policy):
        part = _words(value)
        for start in _occurrences(words, part):
            covered[start : start + len(part)] = [True] * len(part)
    if not any(covered):
        return None
    length = 0
    for index, word in enumerate(words):
        if covered[index]:
            length += len(word) + (1 if index > 0 and covered[index - 1] else 0)
    return length


@dataclass(frozen=True)
class _Together:
    """Two policies both firing on ``text``, ``first`` applying before ``second``."""

    text: str
    first: Policy
    second: Policy
    first_length: int
    second_length: int

    @property
    def tie(self) -> bool:
        """Only the ids order them."""
        a, b = self.first, self.second
        return a.trigger.kind != "always" and (a.priority, a.trigger.kind, self.first_length) == (
            b.priority, b.trigger.kind, self.second_length
        )

    @property
    def both_apply(self) -> bool:
        """The first does not consume the words the second matched (an ``always`` policy has
        no span; on a witness text, matched spans always overlap)."""
        return not (self.first.trigger.consume and self.second.trigger.kind != "always")

    def precedence(self) -> str:
        a, b = self.first, self.second
        if a.priority != b.priority:
            return f"priority {a.priority} > {b.priority}"
        same = f"priority {a.priority} = {b.priority}"
        if a.trigger.kind != b.trigger.kind:
            return f"{same}, {a.trigger.kind} is more specific than {b.trigger.kind}"
        if self.first_length != self.second_length:
            return f"{same}, longer match {self.first_length} > {self.second_length}"
        return f"{same}, both {a.trigger.kind}, id '{a.id}' < '{b.id}'"


def _rank(policy: Policy, length: int) -> tuple[int, int, int, str]:
    return (-policy.priority, -SPECIFICITY[policy.trigger.kind], -length, policy.id)


def _windows_meet(one: Policy, other: Policy, now: datetime) -> bool:
    starts = [now] + [p.active.start for p in (one, other) if p.active and p.active.start]
    ends = [p.active.until for p in (one, other) if p.active and p.active.until]
    return not ends or min(ends) > max(starts)


def _together(one: Policy, other: Policy, now: datetime) -> list[_Together]:
    """Every named text both fire on, shortest first (policies that can fire at all)."""
    if not _windows_meet(one, other, now):
        return []
    candidates = {t.words: t for t in [*_texts(one), *_texts(other)]}
    if one.trigger.kind == "always" and other.trigger.kind == "always":
        candidates = {(): _Text((), "every intent")}
    found = []
    for words in sorted(candidates, key=lambda w: (len(w), w)):
        length_one, length_other = _matched_length(one, words), _matched_length(other, words)
        if length_one is None or length_other is None:
            continue
        (first, first_length), (second, second_length) = sorted(
            ((one, length_one), (other, length_other)), key=lambda pair: _rank(*pair)
        )
        found.append(_Together(candidates[words].shown, first, second, first_length, second_length))
    return found


def _between(
    one: Policy, other: Policy, now: datetime, category_field: str | None, where: _Where
) -> Iterator[Finding]:
    together = _together(one, other, now)
    tie = next((t for t in together if t.tie), None)
    if tie is not None:
        a, b = tie.first, tie.second
        consumed = f", and it consumes the words, so '{b.id}' is skipped there" if a.trigger.consume else ""
        yield where.finding(
            "overlapping_triggers", b.id,
            f"'{b.id}' and '{a.id}' both match {tie.text} at priority {a.priority} with {a.trigger.kind}"
            f" triggers: '{a.id}' applies first only because its id sorts first{consumed}",
            ("trigger", b.trigger.kind),
        )
    applying = next((t for t in together if t.both_apply), None)
    if applying is not None:
        yield from _clashes(applying, category_field, where)


def _clashes(pair: _Together, category_field: str | None, where: _Where) -> Iterator[Finding]:
    """Constraints of two policies that apply together and cannot both hold; findings go to
    the later policy and name the earlier."""
    first, second = pair.first, pair.second
    ours = _constraints(second, category_field)
    theirs = _constraints(first, category_field)
    for mine in ours:
        for other in theirs:
            if _disjoint_on_one_key(other, mine) and _composer_drops(other, mine):
                consumed = (
                    f", although '{second.id}' consumed the shopper's words"
                    if other.strategy == "override" else ""
                )
                yield where.finding(
                    "conflicting_filters", second.id,
                    f"{mine.shown()} has nothing in common with {other.shown(second)}: when both apply"
                    f" (e.g. on {pair.text}), the composer keeps the values of '{first.id}'"
                    f" ({pair.precedence()}) and drops this rule{consumed}",
                    mine.path,
                )
            if _excluded(mine, other) or _excluded(other, mine):
                positive, exclusion = (mine, other) if _excluded(mine, other) else (other, mine)
                yield where.finding(
                    "contradictory_filters", second.id,
                    f"every value of {positive.shown(second)} is excluded by {exclusion.shown(second)}:"
                    f" whenever both are in force (e.g. on {pair.text}), nothing can match",
                    mine.path,
                )
    for mine_bound in _bounds(second):
        for other_bound in _bounds(first):
            if mine_bound.value is None or other_bound.value is None:
                continue
            if _crossed(mine_bound, other_bound) or _crossed(other_bound, mine_bound):
                yield where.finding(
                    "conflicting_filters", second.id,
                    f"price {mine_bound.shown} and the {other_bound.shown} of '{first.id}' cannot both hold:"
                    f" when both apply (e.g. on {pair.text}), the composer keeps the bound of '{first.id}'"
                    f" ({pair.precedence()}) and drops this one",
                    mine_bound.path,
                )


def _composer_drops(earlier: _Constraint, later: _Constraint) -> bool:
    """Disjoint values on one plan field: does the composer drop the later rule for having
    nothing in common? (An override holds its field: a later rule that did not consume the
    shopper's words loses by design, not by contradiction; a merge unions.)"""
    if later.strategy == "merge":
        return False
    held = earlier.strategy == "override"
    return not held or later.policy.trigger.consume


# --- shadowing ---------------------------------------------------------------------------


def _shadowed(low: Policy, live: Sequence[Policy], now: datetime, where: _Where) -> Iterator[Finding]:
    """``low`` can never apply: each of its trigger texts is consumed first by a policy that
    fires whenever it does (``exact``, ``phrase`` and ``any`` triggers; a pattern's captured
    words are not known, so patterns are neither shadowed nor shadowing)."""
    if low.trigger.kind not in ("exact", "phrase", "any"):
        return
    reasons = []
    for text in _reachable_texts(low):
        shadows = sorted(
            (high for high in live if _consumes_first(high, low, _words(text), now)),
            key=lambda high: _rank(high, 0),
        )
        if not shadows:
            return
        reasons.append(f"'{text}' by '{shadows[0].id}' ({_shadow_precedence(shadows[0], low)})")
    yield where.finding(
        "shadowed_policy", low.id,
        f"'{low.id}' can never apply: policies with consume: true that are active whenever it is"
        f" match its words first and consume them: {'; '.join(reasons)}",
        ("trigger", low.trigger.kind),
    )


def _consumes_first(high: Policy, low: Policy, words: tuple[str, ...], now: datetime) -> bool:
    """Wherever ``low`` matches ``words``, ``high`` matches overlapping words, applies first
    and consumes them. For ``low`` exact, ``high`` may match part of the phrase (the intent
    is exactly the phrase); otherwise it must match the same phrase (its spans are then
    exactly ``low``'s, so a third policy that skips one skips both)."""
    if high.id == low.id or not high.trigger.consume or high.trigger.kind not in ("exact", "phrase", "any"):
        return False
    if not (_active_whenever(high, low, now) and _cohorts_cover(high, low)):
        return False
    texts = [_words(t) for t in _reachable_texts(high)]
    higher = high.priority > low.priority
    equal = high.priority == low.priority
    if low.trigger.kind == "exact" and high.trigger.kind == "exact":
        return words in texts and (higher or (equal and high.id < low.id))
    if low.trigger.kind == "exact":
        return higher and any(any(True for _ in _occurrences(words, t)) for t in texts)
    if high.trigger.kind == "exact":
        return False  # it fires on the phrase alone, ``low`` on any intent containing it
    more_specific = SPECIFICITY[high.trigger.kind] > SPECIFICITY[low.trigger.kind]
    return words in texts and (higher or (equal and more_specific))


def _shadow_precedence(high: Policy, low: Policy) -> str:
    if high.priority != low.priority:
        return f"priority {high.priority} > {low.priority}"
    if high.trigger.kind != low.trigger.kind:
        return f"priority {high.priority} = {low.priority}, {high.trigger.kind} is more specific"
    return f"priority {high.priority} = {low.priority}, both {high.trigger.kind}, id '{high.id}' < '{low.id}'"


def _active_whenever(high: Policy, low: Policy, now: datetime) -> bool:
    """``high``'s window covers ``low``'s from ``now`` on."""
    if high.active is None:
        return True
    low_start = max(now, low.active.start) if low.active and low.active.start else now
    low_until = low.active.until if low.active else None
    starts = high.active.start is None or high.active.start <= low_start
    ends = high.active.until is None or (low_until is not None and high.active.until >= low_until)
    return starts and ends


def _cohorts_cover(high: Policy, low: Policy) -> bool:
    """Every request ``low`` fires for carries a cohort of ``high`` (or ``high`` has none)."""
    return not high.cohorts or (bool(low.cohorts) and set(low.cohorts) <= set(high.cohorts))
