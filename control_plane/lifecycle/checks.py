"""Checking a test case's expectations against what the pipeline did: pure functions.

:func:`check` takes an :class:`~.suite.Expectation` and an :class:`Observation` (what the
runner saw: the explanation, the plan JSON, the strict DSL and, when asked, what the search
served) and returns one failure message per unmet expectation, ``"<kind>: expected ...;
actual ..."``, in expectation order. No I/O, no clock: a test can build an observation.

Semantics
---------
Policy lists are subsets, not exact lists:

- ``matched`` / ``not_matched``: each id is (is not) among the policies the matcher
  matched (including those then skipped);
- ``applied`` / ``not_applied``: each id is (is not) among the policies the composer
  applied (for the exact order, use ``plan: {applied: [...]}``);
- ``skipped``: each id was skipped, and ``"<code>: <reason>"`` contains the given text,
  ignoring case (an empty text, or the list form, accepts any reason). A policy outside
  its active window is never matched, so it is ``not_matched``, not skipped.

An expectation naming a policy that is not in the policy set fails the case with only
that message.

``plan``: each dotted path is looked up in the plan JSON. A segment picks a mapping key;
in a list, a number picks by position (``filters.0``) and a name picks the one element
whose ``field`` is that name, or else whose ``policy`` is (``exclusions.allergens.values``,
``sponsored.sponsored-dark-chocolate.ids``). The value must *conform* to the expected one:
a mapping names only the keys it cares about, a list matches element by element in order,
scalars are equal (``1 == 1.0``; ``true`` is not ``1``). A path that does not resolve fails
with what is there instead.

``dsl_contains``: each fragment is a deep subset of some subtree of the strict tier's DSL:
a mapping's keys are all present with subset values, each item of a list is a subset of
some item of the DSL list (any order), scalars are equal.

``status`` (``ok`` | ``no_results``) and ``tier`` (``strict`` | ``relaxed`` | ``broad``)
are the execution's.

``results`` (the hits served, up to ``size``; their catalog documents for conditions):

- ``min_hits`` / ``max_hits``: bounds on the total the engine counted for the tier served;
- ``top``: each id is among the first ``top_n`` hits (default: all hits served);
- ``top_exact``: the first hits are exactly these ids, in this order;
- ``absent``: no hit served has one of these ids;
- ``every`` / ``none``: field -> condition, each field checked on its own: every hit
  satisfies it / no hit satisfies it. A condition's operators must all hold: ``eq``,
  ``ne``, ``lt``, ``lte``, ``gt``, ``gte`` (numbers), ``in`` (the value is one of the list;
  a list field shares an element with it) and ``contains`` (a list field has the element;
  a text field has the substring). A field missing from a document (or null) satisfies no
  operator: ``every`` fails on that hit, ``none`` does not count it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from control_plane.lifecycle.suite import Condition, Expectation, Results

SHOWN = 3
"""offending hits named per failure"""

TEXT_LIMIT = 240
"""characters of JSON shown for a value"""


@dataclass(frozen=True)
class Served:
    """What the governed search served: the execution's summary and, per hit, its id and
    catalog document (or its ``_source`` when the document was not read back)."""

    status: str
    tier: str | None
    total: int
    hits: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    runs: tuple[tuple[str, int], ...] = ()
    """(tier, total) for each tier run, in order"""
    reason: str | None = None


@dataclass(frozen=True)
class Observation:
    policy_set_version: str
    policy_ids: AbstractSet[str]
    """every policy of the set (the loaded set's id map's keys: not copied per case)"""
    matched: tuple[str, ...]
    applied: tuple[str, ...]
    skipped: Mapping[str, str]
    """policy id -> ``"<code>: <reason>"``"""
    plan: Mapping[str, Any]
    dsl: Mapping[str, Any] = field(default_factory=dict)
    """the strict tier's request body"""
    served: Served | None = None


def check(expect: Expectation, seen: Observation) -> list[str]:
    """Every unmet expectation, as one message each, in the order the kinds are listed."""
    unknown = unknown_policies(expect, seen)
    if unknown:
        return unknown
    failures = [
        *check_policies("matched", expect.matched, seen.matched, present=True),
        *check_policies("not_matched", expect.not_matched, seen.matched, present=False),
        *check_policies("applied", expect.applied, seen.applied, present=True),
        *check_policies("not_applied", expect.not_applied, seen.applied, present=False),
        *check_skipped(expect.skipped, seen),
        *check_plan(expect.plan, seen.plan),
        *check_dsl(expect.dsl_contains, seen.dsl),
    ]
    if expect.needs_search:
        if seen.served is None:
            return [*failures, "execution: expected the search to be executed; actual not executed"]
        failures += check_execution(expect, seen.served)
        if expect.results is not None:
            failures += check_results(expect.results, seen.served)
    return failures


def unknown_policies(expect: Expectation, seen: Observation) -> list[str]:
    version = seen.policy_set_version[:12]
    return [
        f"policy {pid!r} is not in policy set {version}"
        for pid in sorted(expect.policy_ids())
        if pid not in seen.policy_ids
    ]


# --- policies ------------------------------------------------------------------------


def check_policies(kind: str, expected: Sequence[str], actual: Sequence[str], *, present: bool) -> list[str]:
    wrong = [pid for pid in expected if (pid in actual) != present]
    if not wrong:
        return []
    verb = kind.removeprefix("not_")
    want = "among" if present else "not among"
    return [f"{kind}: expected {', '.join(wrong)} {want} the {verb} policies; actual {verb}: {_ids(actual)}"]


def check_skipped(expected: Mapping[str, str], seen: Observation) -> list[str]:
    failures = []
    for pid, text in expected.items():
        reason = seen.skipped.get(pid)
        want = f"skipped with a reason containing {text!r}" if text else "skipped"
        if reason is None:
            state = "applied" if pid in seen.applied else "not matched"
            failures.append(f"skipped.{pid}: expected {want}; actual not skipped ({state})")
        elif text.casefold() not in reason.casefold():
            failures.append(f"skipped.{pid}: expected {want}; actual {reason!r}")
    return failures


# --- plan ----------------------------------------------------------------------------


def check_plan(expected: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    failures = []
    for path, want in expected.items():
        found, value = resolve(plan, path)
        if not found:
            failures.append(f"plan.{path}: expected {show(want)}; actual {value}")
        elif not conforms(want, value):
            failures.append(f"plan.{path}: expected {show(want)}; actual {show(value)}")
    return failures


def resolve(document: Any, path: str) -> tuple[bool, Any]:
    """``(True, value)`` at the dotted ``path``, or ``(False, what went wrong)``."""
    value, walked = document, "plan"
    for part in path.split("."):
        if isinstance(value, Mapping):
            if part not in value:
                return False, f"{walked} has no field {part!r} (fields: {', '.join(value)})"
            value = value[part]
        elif isinstance(value, list):
            picked = _element(value, part)
            if isinstance(picked, str):
                return False, f"{walked} {picked}"
            value = picked[0]
        else:
            return False, f"{walked} is {show(value)}, not a mapping or a list"
        walked = f"{walked}.{part}"
    return True, value


def _element(items: list[Any], part: str) -> tuple[Any] | str:
    """The element ``part`` picks, or why none is picked."""
    if part.isascii() and part.isdigit():
        index = int(part)
        return (items[index],) if index < len(items) else f"has {len(items)} elements (no index {index})"
    for key in ("field", "policy"):
        picked = [item for item in items if isinstance(item, Mapping) and item.get(key) == part]
        if len(picked) == 1:
            return (picked[0],)
        if len(picked) > 1:
            return f"has {len(picked)} elements whose {key} is {part!r}; pick one by position"
    elements = [item for item in items if isinstance(item, Mapping)]
    names = sorted({str(item.get("field", item.get("policy"))) for item in elements})
    return f"has no element whose field or policy is {part!r} (elements: {', '.join(names) or 'none'})"


def conforms(expected: Any, actual: Any) -> bool:
    """A mapping names only the keys it cares about; lists match item by item, in order."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            key in actual and conforms(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(conforms(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return same(expected, actual)


def same(expected: Any, actual: Any) -> bool:
    """JSON equality: ``1 == 1.0``, but a boolean equals only a boolean."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and expected.keys() == actual.keys() and all(
            same(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(same(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


# --- DSL -----------------------------------------------------------------------------


def check_dsl(fragments: Sequence[Mapping[str, Any]], dsl: Mapping[str, Any]) -> list[str]:
    failures = []
    for number, fragment in enumerate(fragments):
        if not any(subset(fragment, node) for node in subtrees(dsl)):
            failures.append(
                f"dsl_contains.{number}: expected {show(fragment)} in the strict DSL;"
                f" actual {_nearest(fragment, dsl)}"
            )
    return failures


def subtrees(node: Any) -> Iterator[Any]:
    yield node
    children = node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
    for child in children:
        yield from subtrees(child)


def subset(fragment: Any, node: Any) -> bool:
    """Whether ``fragment`` is a deep subset of ``node`` (list items in any order)."""
    if isinstance(fragment, Mapping):
        return isinstance(node, Mapping) and all(
            key in node and subset(value, node[key]) for key, value in fragment.items()
        )
    if isinstance(fragment, list):
        return isinstance(node, list) and all(any(subset(f, n) for n in node) for f in fragment)
    return same(fragment, node)


def _nearest(fragment: Mapping[str, Any], dsl: Mapping[str, Any]) -> str:
    """The DSL objects with the fragment's keys, those sharing the most nested keys with it
    first (what the author probably meant)."""
    keys = set(fragment)
    near = [node for node in subtrees(dsl) if isinstance(node, Mapping) and keys <= set(node)]
    near.sort(key=lambda node: -_shared_keys(fragment, node))
    if not near:
        return f"no object in it has {', '.join(sorted(keys))}"
    shown = "; ".join(show(node) for node in near[:SHOWN])
    more = f" (and {len(near) - SHOWN} more)" if len(near) > SHOWN else ""
    return f"objects with {', '.join(sorted(keys))}: {shown}{more}"


def _shared_keys(fragment: Any, node: Any) -> int:
    if not isinstance(fragment, Mapping) or not isinstance(node, Mapping):
        return 0
    return sum(1 + _shared_keys(value, node[key]) for key, value in fragment.items() if key in node)


# --- execution and results -------------------------------------------------------------


def check_execution(expect: Expectation, served: Served) -> list[str]:
    failures = []
    if expect.status is not None and expect.status != served.status:
        why = f" ({served.reason})" if served.reason else ""
        failures.append(f"status: expected {expect.status!r}; actual {served.status!r}{why}")
    if expect.tier is not None and expect.tier != served.tier:
        runs = ", ".join(f"{tier} {total}" for tier, total in served.runs)
        failures.append(f"tier: expected {expect.tier!r}; actual {served.tier!r} (hits per tier: {runs})")
    return failures


def check_results(results: Results, served: Served) -> list[str]:
    ids = [hit_id for hit_id, _ in served.hits]
    failures = []
    if results.min_hits is not None and served.total < results.min_hits:
        failures.append(f"results.min_hits: expected at least {results.min_hits} hits; actual {served.total}")
    if results.max_hits is not None and served.total > results.max_hits:
        failures.append(f"results.max_hits: expected at most {results.max_hits} hits; actual {served.total}")
    first = ids[: results.top_n] if results.top_n is not None else ids
    missing = [pid for pid in results.top if pid not in first]
    if missing:
        failures.append(
            f"results.top: expected {', '.join(missing)} among the first {len(first)} hits;"
            f" actual {_ids(first)}"
        )
    head = ids[: len(results.top_exact)]
    if results.top_exact and head != list(results.top_exact):
        failures.append(
            f"results.top_exact: expected the first hits to be {_ids(results.top_exact)};"
            f" actual {_ids(head)}"
        )
    present = [f"{pid} at position {ids.index(pid) + 1}" for pid in results.absent if pid in ids]
    if present:
        failures.append(
            f"results.absent: expected none of {_ids(results.absent)} among the {len(ids)} hits;"
            f" actual {', '.join(present)}"
        )
    failures += _conditions("every", results.every, served.hits)
    failures += _conditions("none", results.none, served.hits)
    return failures


def _conditions(
    kind: str, conditions: Mapping[str, Condition], hits: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[str]:
    failures = []
    for name, condition in conditions.items():
        if hits and all(name not in doc for _, doc in hits):
            # a misspelt field would make `none` pass without checking anything
            failures.append(f"results.{kind}.{name}: no served product has a field {name!r}")
            continue
        wanted = kind == "every"
        offending = [
            (hit_id, doc) for hit_id, doc in hits if satisfies(doc.get(name), condition) != wanted
        ]
        if not offending:
            continue
        said = describe(condition)
        want = f"every hit's {name} {said}" if wanted else f"no hit whose {name} {said}"
        shown = ", ".join(
            f"{hit_id} has {show(doc[name])}" if doc.get(name) is not None else f"{hit_id} has no {name}"
            for hit_id, doc in offending[:SHOWN]
        )
        more = f" (and {len(offending) - SHOWN} more)" if len(offending) > SHOWN else ""
        failures.append(f"results.{kind}.{name}: expected {want}; actual {shown}{more}")
    return failures


def describe(condition: Condition) -> str:
    return " and ".join(f"{op} {show(value)}" for op, value in condition.operators())


def satisfies(value: Any, condition: Condition) -> bool:
    """Whether a document's value meets every operator of ``condition``; a missing value
    (``None``) meets none."""
    return value is not None and all(holds(op, value, want) for op, want in condition.operators())


def holds(op: str, value: Any, want: Any) -> bool:
    if op == "eq":
        return same(want, value)
    if op == "ne":
        return not same(want, value)
    if op == "in":
        values = value if isinstance(value, list) else [value]
        return any(same(option, item) for option in want for item in values)
    if op == "contains":
        if isinstance(value, list):
            return any(same(want, item) for item in value)
        return isinstance(value, str) and isinstance(want, str) and want in value
    if not _number(value):
        return False
    number, bound = float(value), float(want)
    return {"lt": number < bound, "lte": number <= bound, "gt": number > bound, "gte": number >= bound}[op]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- text ----------------------------------------------------------------------------


def show(value: Any) -> str:
    """Compact JSON, cut at :data:`TEXT_LIMIT` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "), default=str)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 3] + "..."


def _ids(ids: Sequence[str]) -> str:
    return "[" + ", ".join(ids) + "]"
