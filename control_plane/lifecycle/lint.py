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
                                     the analyzer gives no token, it never matches; or
                                     one longer than an intent can be, in a set stored
                                     before the loader refused it (``phrase_too_long``):
                                     left out of the analyses between policies
``unreachable_cohort``     warning   a cohort no request can carry (requests' cohorts are
                                     identifiers: letters, digits, ``_.:@-``)
``untested_policy``        warning   no policy test names the policy (only when the tested
                                     ids are given)
``test_unpinned_window``   warning   a test case that pins no ``now`` (neither the case
                                     nor its file) fires a policy whose active window is
                                     open at ``now`` or has an edge within the horizon
                                     (default a year): the case's result depends on the
                                     day it runs (at the case's ``file:line``; see
                                     :mod:`control_plane.lifecycle.lint_cases`)
``disabled_policy``        info      ``enabled: false``: the policy never fires
``absent_role``            info      the catalog profile leaves out an optional role (no
                                     margin: no margin signal; no visibility: no guard)
=========================  ========  ===================================================

An active window whose ``until`` is not after its ``from`` never reaches a policy set: the
loader refuses it (``bad_window``). Disabled, expired and unreachable policies are left out
of the analyses between policies (they never fire); their own rules are still checked.
``docs/lint.md`` has an example of every code. The analyses between policies are in
:mod:`control_plane.lifecycle.lint_pairs`; what both read of a policy (findings, trigger
texts, constraints, price bounds) in :mod:`control_plane.lifecycle.lint_facts`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from itertools import combinations
from pathlib import Path

from control_plane.catalog.profile import NUMERIC_TYPES, CatalogProfile, mapping_fields
from control_plane.errors import PolicyError, PolicyLoadError
from control_plane.lifecycle import lint_pairs
from control_plane.lifecycle.lint_cases import DEFAULT_HORIZON, Case, unpinned_windows
from control_plane.lifecycle.lint_facts import (
    LINT_CODES,
    SEVERITIES,
    Finding,
    Severity,
    Where,
    bounds,
    constraints,
    crossed,
    disjoint_on_one_key,
    excerpt,
    excluded,
    literal,
    overlong,
    quoted,
    reachable_texts,
    trigger_texts,
    wordless,
)
from control_plane.loader import check_policy_set, load_policy_set
from control_plane.policy import (
    BoostRule,
    BuryRule,
    CategoryRule,
    ExcludeRule,
    FilterRule,
    Loc,
    Policy,
    PolicySet,
    PriceRule,
    Value,
)

__all__ = [
    "COHORT", "DEFAULT_HORIZON", "LINT_CODES", "SEVERITIES", "Finding", "Severity", "has_errors", "lint",
    "lint_directory", "mapping_fields_of",
]

#: The cohorts a request may carry (``SearchRequest.cohorts`` in ``control_plane.service``).
COHORT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")
BOOLEAN_STRINGS = frozenset({"true", "false", ""})




# --- entry points ----------------------------------------------------------------------


def lint(
    policy_set: PolicySet,
    *,
    mapping_fields: Mapping[str, str] | None = None,
    now: datetime,
    locations: Mapping[str, str] | None = None,
    tested_policy_ids: set[str] | None = None,
    profile: CatalogProfile | None = None,
    cases: Iterable[Case] = (),
    horizon: timedelta = DEFAULT_HORIZON,
) -> list[Finding]:
    """Every finding on ``policy_set``, sorted by severity, location, code, then message.

    ``mapping_fields`` (field -> mapping type, see :func:`mapping_fields_of`) enables the
    field checks; ``locations`` (policy id -> ``file:line``) places findings in files;
    ``tested_policy_ids`` enables ``untested_policy``; ``profile`` names the fields that
    category and price rules constrain (checked against the mapping, and a category rule
    against exclusions of the category field); ``cases`` (the suite's test cases) are
    checked for ``test_unpinned_window`` with ``horizon``.
    """

    where = Where(locations or {})
    category_field = profile.category if profile is not None else None
    found = list(_governance(policy_set, where, profile))
    found += _absent_roles(profile)
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
    index = lint_pairs.TriggerIndex(live)
    shadowed: set[str] = set()
    for policy in live:
        findings = list(lint_pairs.shadowed(policy, index, now, where))
        shadowed |= {policy.id} if findings else set()
        found += findings
    # a shadowed policy never applies: it conflicts with nothing
    reachable = [p for p in live if p.id not in shadowed]
    found += lint_pairs.meetings(index, reachable, now, category_field, where)
    found += unpinned_windows(policy_set.policies, cases, now, horizon)
    return sorted(found, key=_order)


def lint_directory(
    directory: Path | str,
    *,
    mapping: dict[str, object] | None,
    now: datetime,
    tested_policy_ids: set[str] | None = None,
    profile: CatalogProfile | None = None,
    cases: Iterable[Case] = (),
    horizon: timedelta = DEFAULT_HORIZON,
) -> list[Finding]:
    """Lint a policy directory. When it does not load, its load errors are the findings
    (the loader's codes, at ``file:line``); otherwise :func:`lint` with every policy
    located at its file. ``mapping`` is an index mapping body (None skips field checks)."""
    locations: dict[str, str] = {}
    try:
        types = mapping_fields_of(mapping) if mapping is not None else None
        policy_set = load_policy_set(directory, profile, field_types=types, locations=locations)
    except PolicyLoadError as exc:
        return sorted((_load_finding(error) for error in exc.errors), key=_order)
    return lint(
        policy_set,
        mapping_fields=mapping_fields_of(mapping) if mapping is not None else None,
        now=now,
        locations=locations,
        tested_policy_ids=tested_policy_ids,
        profile=profile,
        cases=cases,
        horizon=horizon,
    )


def mapping_fields_of(mapping: Mapping[str, object]) -> dict[str, str]:
    """Dotted field -> mapping type of an index mapping (``{"mappings": ...}``, the mapping
    itself, or a ``GET _mapping`` entry): properties, objects (type ``object``) and their
    sub-fields, multi-fields (``title.raw``)."""
    return mapping_fields(dict(mapping))


def has_errors(findings: Iterable[Finding]) -> bool:
    return any(finding.severity == "error" for finding in findings)


# --- locations and order ---------------------------------------------------------------


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




# --- governance (sets that did not come through the loader) --------------------------------


def _absent_roles(profile: CatalogProfile | None) -> Iterator[Finding]:
    """An info finding per optional role the catalog profile leaves out."""
    for role, consequence in profile.absent_roles() if profile is not None else ():
        message = f"the profile has no {role} field: {consequence}"
        yield Finding("absent_role", "info", None, f"profile:{role}", message)


def _governance(
    policy_set: PolicySet, where: Where, profile: CatalogProfile | None = None
) -> Iterator[Finding]:
    """The loader's cross-checks again, for sets built or stored elsewhere (none for a set
    :func:`load_policy_set` returned). Findings carry the loader's codes."""
    violations = check_policy_set(
        policy_set.policies, policy_set.vocabularies, policy_set.governance, roles=profile
    )
    for violation in violations:
        if violation.subject == "policy":
            policy_id = policy_set.policies[violation.index].id
            yield where.finding(violation.code, policy_id, violation.message, violation.loc)
        else:
            name = policy_set.vocabularies[violation.index].name
            yield Finding(violation.code, "error", None, f"vocabulary:{name}", violation.message)


# --- one policy: can it fire at all? ------------------------------------------------------












def _expired(policy: Policy, now: datetime) -> bool:
    return policy.active is not None and policy.active.until is not None and policy.active.until <= now


def _can_fire(policy: Policy, now: datetime) -> bool:
    cohorts_ok = not policy.cohorts or any(COHORT.match(c) for c in policy.cohorts)
    triggers_ok = policy.trigger.kind == "always" or bool(reachable_texts(policy))
    return policy.enabled and not _expired(policy, now) and cohorts_ok and triggers_ok


def _reachability(policy: Policy, now: datetime, where: Where) -> Iterator[Finding]:
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
    never = "" if reachable_texts(policy) else "; the policy has no other trigger text: it never fires"
    unreachable = [t for t in trigger_texts(policy) if wordless(t)]
    if unreachable:
        yield where.finding(
            "unreachable_trigger", policy.id,
            f"{quoted(unreachable)} has no word the analyzer keeps: it never matches{never}",
            ("trigger", policy.trigger.kind),
        )
    for text in trigger_texts(policy):
        problem = None if wordless(text) else overlong(text)
        if problem is not None:  # a set stored before phrase_too_long came in
            yield where.finding(
                "unreachable_trigger", policy.id,
                f"{excerpt(text)} is {problem}{never}. It was stored before such texts were"
                " refused (phrase_too_long): lint leaves it out of its analyses between"
                " policies, and writing the policy again refuses it",
                ("trigger", policy.trigger.kind),
            )
    bad = [c for c in policy.cohorts if not COHORT.match(c)]
    if bad:
        never = "; the policy has no other cohort: it never fires" if len(bad) == len(policy.cohorts) else ""
        yield where.finding(
            "unreachable_cohort", policy.id,
            f"no request can carry {quoted(bad)} (a request's cohorts are identifiers: letters,"
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
            yield body.field, (*at, "field"), literal(body.values), f"field {body.field!r}"
        elif isinstance(body, CategoryRule) and profile is not None:
            what = f"the profile's category field {profile.category!r}"
            yield profile.category, at, literal(body.values), what
        elif isinstance(body, PriceRule) and profile is not None:
            yield profile.price, at, (), f"the profile's price field {profile.price!r}"




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
    policy: Policy, types: Mapping[str, str], profile: CatalogProfile | None, where: Where
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
                    f"{what} is {field_type}: {quoted(wrong)} cannot be one of its values", path,
                )


# --- constraints: filters, categories, exclusions, price bounds ------------------------------




















def _own_constraints(policy: Policy, category_field: str | None, where: Where) -> Iterator[Finding]:
    """A policy's rules that contradict each other (``contradictory_filters``)."""
    for first, second in combinations(constraints(policy, category_field), 2):
        if disjoint_on_one_key(first, second) and not (
            second.strategy == "merge" and first.strategy != "override"
        ):
            yield where.finding(
                "contradictory_filters", policy.id,
                f"{second.shown()} has nothing in common with {first.shown()} (rules.{first.index}):"
                " the composer drops the later rule whenever the policy applies",
                second.path,
            )
        for positive, exclusion in ((first, second), (second, first)):
            if excluded(positive, exclusion):
                yield where.finding(
                    "contradictory_filters", policy.id,
                    f"every value of {positive.shown()} is excluded by {exclusion.shown()}"
                    f" (rules.{exclusion.index}):"
                    " nothing can match whenever the policy applies",
                    positive.path,
                )
    for floor, ceiling in combinations(bounds(policy), 2):
        for low, high in ((floor, ceiling), (ceiling, floor)):
            if crossed(low, high):
                yield where.finding(
                    "contradictory_filters", policy.id,
                    f"{low.shown} (rules.{low.index}) is never below {high.shown} (rules.{high.index}):"
                    " the policy's price bounds cannot both hold",
                    ("rules", max(low.index, high.index), "price"),
                )
