"""Policy test files: what a policy set must do for an intent, kept next to the policies.

Every ``*.yaml`` / ``*.yml`` file inside a ``tests/`` folder of a policy directory (the
folders the policy loader skips; hidden files and folders are ignored) holds test cases:
a list of case mappings, or a mapping ``{now: ..., cases: [...]}``, in one or more ``---``
documents. ``now`` there is the file's instant: every case of the document that sets no
``now`` of its own runs at it (like Cerbos' ``options.now``). A case that pins no ``now``
at all runs at the run's instant (``--now``, else the day it runs), and ``govsearch policy
lint`` warns (``test_unpinned_window``) when that makes its result depend on the date::

    now: 2026-11-15T12:00:00Z                           # optional: the file's instant
    cases:

    - name: cheap chocolate keeps the allergen filter   # required, unique in the suite
      intent: cheap chocolate sans arachide             # required
      cohorts: [vegan]                                  # optional request context
      user: alice
      market: fr
      now: 2026-12-10T12:00:00Z                         # optional; default: the file's now,
                                                        # else the run's instant
      expect:                                           # required, at least one expectation
        matched: [cheap, chocolate]                     # policy ids: subsets
        not_matched: [oranges]
        applied: [cheap]
        not_applied: [christmas-chocolate]
        skipped: {drinks-bury-sodas: span_consumed}     # id -> substring of "code: reason"
        plan: {price.max.value: 4.14, category.values: [Chocolates]}
        dsl_contains: [{terms: {allergens: [peanuts]}}]
        status: ok                                      # ok | no_results
        tier: strict                                    # strict | relaxed | broad
        results:
          size: 10                                      # hits requested and checked (1-50)
          min_hits: 1                                   # bounds on the total served
          max_hits: 100
          top: [demo-123]                               # among the first top_n hits
          top_n: 3                                      # default: every hit served
          top_exact: [demo-123, demo-456]               # the first hits, in this order
          absent: [demo-789]                            # not among the hits served
          every: {price: {lte: 5}}                      # every hit satisfies (per field)
          none: {allergens: {contains: peanuts}}        # no hit satisfies (per field)

What each expectation means is :mod:`control_plane.lifecycle.checks` (and
``docs/policy-tests.md``). Loading checks the shape, types and ranges of everything, the
request context as :class:`~control_plane.service.SearchRequest` would, that a plan path
starts with a plan field, and that case names are unique. :func:`load_suite` returns a
suite only when there is no error at all; otherwise it raises :class:`SuiteLoadError` with
every error, each located at the ``file:line:column`` of its YAML node (files relative to
the directory).

A suite's ``sha256`` is the hash of its canonical JSON: the cases sorted by name, without
their file and line, keys sorted, each with the ``now`` it runs at (its own or its file's).
Moving a case to another file, reordering files, reformatting them or moving a ``now``
between a case and its file keeps the hash; changing what a case asks, expects or runs at
changes it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    StrictFloat,
    StrictInt,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from control_plane.errors import PolicyError, PolicyLoadError
from control_plane.intent_text import MAX_INTENT, normalise, refusal
from control_plane.loader import (
    PYDANTIC_CODES,
    SUFFIXES,
    TESTS_DIR,
    FieldRoles,
    Progress,
    Source,
    YamlReading,
    load_policy_set,
    paused_collection,
    validation_errors,
    yaml_files,
)
from control_plane.plan import Plan
from control_plane.policy import PolicySet
from control_plane.renderer import Tier
from control_plane.service import IDENTIFIER

STORED = "(stored suite)"
"""the file name errors of :func:`suite_from_json` carry"""

DEFAULT_FILE = f"{TESTS_DIR}/cases.yaml"
"""where :meth:`Suite.files` puts cases that have no file"""


def _date_is_midnight(value: Any) -> Any:
    if isinstance(value, date) and not isinstance(value, datetime):
        return datetime.combine(value, time(0), UTC)
    return value


def _naive_is_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


Instant = Annotated[datetime, BeforeValidator(_date_is_midnight), AfterValidator(_naive_is_utc)]
"""A test's fixed time: an ISO time (no zone: UTC) or a date (its midnight, UTC)."""

Number = StrictInt | StrictFloat
PolicyId = Annotated[str, Field(min_length=1, max_length=128)]
ProductId = Annotated[str, Field(min_length=1, max_length=256)]


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class Condition(Frozen):
    """What one field of a hit must satisfy; every operator given must hold. A bare value
    is short for ``{eq: value}``."""

    eq: JsonValue = None
    ne: JsonValue = None
    lt: Number | None = None
    lte: Number | None = None
    gt: Number | None = None
    gte: Number | None = None
    in_: tuple[JsonValue, ...] | None = Field(default=None, alias="in")
    contains: JsonValue = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return data if isinstance(data, dict) else {"eq": data}

    @model_validator(mode="after")
    def _not_empty(self) -> Condition:
        if not self.model_fields_set:
            raise ValueError(f"a condition needs at least one operator ({', '.join(OPERATORS)})")
        return self

    def operators(self) -> tuple[tuple[str, Any], ...]:
        """The operators given, as the author named them, in :data:`OPERATORS` order."""
        given = {Condition.model_fields[name].alias or name for name in self.model_fields_set}
        values = self.model_dump(by_alias=True)
        return tuple((op, values[op]) for op in OPERATORS if op in given)


OPERATORS: tuple[str, ...] = tuple(
    info.alias or name for name, info in Condition.model_fields.items()
)


class Results(Frozen):
    """Expectations on what the governed search served (checked on the hits' catalog
    documents)."""

    size: int = Field(default=10, ge=1, le=50)
    min_hits: int | None = Field(default=None, ge=0)
    max_hits: int | None = Field(default=None, ge=0)
    top: tuple[ProductId, ...] = ()
    top_n: int | None = Field(default=None, ge=1, le=50)
    top_exact: tuple[ProductId, ...] = ()
    absent: tuple[ProductId, ...] = ()
    every: dict[str, Condition] = {}
    none: dict[str, Condition] = {}

    @model_validator(mode="after")
    def _consistent(self) -> Results:
        if self.min_hits is not None and self.max_hits is not None and self.min_hits > self.max_hits:
            raise ValueError(f"min_hits {self.min_hits} exceeds max_hits {self.max_hits}")
        if self.top_n is not None and self.top_n > self.size:
            raise ValueError(f"top_n {self.top_n} exceeds size {self.size} (the hits requested)")
        if len(self.top_exact) > self.size:
            raise ValueError(f"top_exact names {len(self.top_exact)} ids; size is {self.size}")
        return self


class Expectation(Frozen):
    """What a case expects. Policy lists are subsets; see :mod:`.checks` for each kind."""

    matched: tuple[PolicyId, ...] = ()
    not_matched: tuple[PolicyId, ...] = ()
    applied: tuple[PolicyId, ...] = ()
    not_applied: tuple[PolicyId, ...] = ()
    skipped: dict[PolicyId, str] = {}
    plan: dict[str, JsonValue] = {}
    dsl_contains: tuple[dict[str, JsonValue], ...] = ()
    status: Literal["ok", "no_results"] | None = None
    tier: Tier | None = None
    results: Results | None = None

    @field_validator("skipped", mode="before")
    @classmethod
    def _skipped_ids(cls, value: Any) -> Any:
        """``skipped: [a, b]`` is short for ``{a: "", b: ""}`` (skipped, whatever the reason)."""
        return dict.fromkeys(value, "") if isinstance(value, list) else value

    @field_validator("plan")
    @classmethod
    def _plan_paths(cls, value: dict[str, JsonValue]) -> dict[str, JsonValue]:
        for path in value:
            parts = path.split(".")
            if not all(parts):
                raise ValueError(f"plan path {path!r} has an empty segment")
            if parts[0] not in Plan.model_fields:
                raise ValueError(
                    f"plan path {path!r} does not start with a plan field"
                    f" ({', '.join(Plan.model_fields)})"
                )
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> Expectation:
        if not self.model_fields_set:
            raise ValueError("expect names no expectation")
        return self

    @property
    def needs_search(self) -> bool:
        """Whether checking needs the search executed, not only compiled."""
        return bool({"status", "tier", "results"} & self.model_fields_set)

    def policy_ids(self) -> set[str]:
        return {*self.matched, *self.not_matched, *self.applied, *self.not_applied, *self.skipped}


class TestCase(Frozen):
    """One test case: a request, an optional fixed time, and what it must give. ``file``
    and ``line`` say where it was written (set by the loader, never by the author)."""

    __test__: ClassVar[bool] = False  # not a pytest class

    name: str = Field(min_length=1, max_length=200)
    intent: str = Field(min_length=1, max_length=MAX_INTENT)
    cohorts: tuple[Annotated[str, Field(pattern=IDENTIFIER)], ...] = Field(default=(), max_length=10)
    user: str | None = Field(default=None, pattern=IDENTIFIER)
    market: str | None = Field(default=None, pattern=r"^[a-z]{2}$")
    now: Instant | None = None
    expect: Expectation
    file: str = ""
    line: int = Field(default=0, ge=0)

    @field_validator("intent")
    @classmethod
    def _intent(cls, value: str) -> str:
        problem = refusal(normalise(value))  # what a search request refuses (control_plane.service)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("cohorts")
    @classmethod
    def _cohorts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    def content(self) -> dict[str, Any]:
        """The case as written (keys the author set), without its location: what the
        suite's hash covers."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"file", "line"})

    def as_json(self) -> dict[str, Any]:
        return {**self.content(), "file": self.file, "line": self.line}


LOCATION = frozenset({"file", "line"})
"""the keys the loader sets, never the author"""


@dataclass(frozen=True)
class Suite:
    """The test cases of a policy directory, in file and line order, and their hash."""

    cases: tuple[TestCase, ...]
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.cases, key=lambda case: (case.file, case.line)))
        object.__setattr__(self, "cases", ordered)
        object.__setattr__(self, "sha256", hashlib.sha256(canonical_json(ordered).encode()).hexdigest())

    def as_json(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "cases": [case.as_json() for case in self.cases]}

    def policy_ids(self) -> set[str]:
        """Every policy id an expectation names."""
        return {pid for case in self.cases for pid in case.expect.policy_ids()}

    def with_file(
        self, name: str, cases: Sequence[Mapping[str, Any]], now: datetime | None = None
    ) -> Suite:
        """This suite with test file ``name``'s cases replaced by ``cases`` (mappings as an
        author writes them; none removes the file), or :class:`SuiteLoadError`. The new
        cases have no line (0) and keep their order; ``now`` is the file's instant, for the
        cases that set none."""
        errors = _file_name_errors(name)
        added: list[TestCase] = []
        for index, raw in enumerate(cases):
            case = _unlocated_case(_at_file_now(raw, now), name, f"cases.{index}", errors)
            if case is not None:
                added.append(case)
        kept = [case for case in self.cases if case.file != name]
        errors += _duplicate_names((case, None) for case in [*kept, *added])
        if errors:
            raise SuiteLoadError(errors)
        return Suite((*kept, *added))

    def files(self) -> dict[str, list[dict[str, Any]]]:
        """Test file (relative path) -> its cases as written, in line order: what writing
        the suite back to a policy directory needs. Cases without a file go to
        :data:`DEFAULT_FILE`."""
        grouped: dict[str, list[dict[str, Any]]] = {}
        for case in self.cases:
            grouped.setdefault(case.file or DEFAULT_FILE, []).append(case.content())
        return grouped


def canonical_json(cases: Iterable[TestCase]) -> str:
    content = [case.content() for case in sorted(cases, key=lambda case: case.name)]
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class SuiteLoadError(Exception):
    """Raised instead of returning a suite when anything is wrong: every error, sorted by
    ``file:line:column`` and de-duplicated."""

    def __init__(self, errors: Iterable[PolicyError]) -> None:
        self.errors: list[PolicyError] = sorted(set(errors), key=lambda error: error.sort_key)
        count = len(self.errors)
        lines = [f"{count} policy test error{'s' if count != 1 else ''}"]
        super().__init__("\n".join([*lines, *map(str, self.errors)]))


# --- loading ----------------------------------------------------------------------------


def load_suite(directory: Path | str) -> Suite:
    """Every test case under ``directory``'s ``tests/`` folders, or :class:`SuiteLoadError`
    with every error (never a half-loaded suite). No test file gives an empty suite."""
    root = Path(directory)
    if not root.is_dir():
        raise SuiteLoadError([
            PolicyError(code="io_error", message="not a policy directory", file=str(directory))
        ])
    reading = YamlReading(root)
    located: list[tuple[TestCase, Source]] = []
    with paused_collection():
        for path in case_files(root):
            for source, data in reading.documents(path):
                if data is not None:
                    located += _cases(source, data, reading.errors)
    errors = reading.errors + _duplicate_names(located)
    if errors:
        raise SuiteLoadError(errors)
    return Suite(tuple(case for case, _ in located))


def load_directory(
    directory: Path | str,
    roles: FieldRoles | None = None,
    *,
    field_types: Mapping[str, str] | None = None,
    locations: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> tuple[PolicySet, Suite]:
    """The policy set and the test suite of a policy directory, or one
    :class:`~control_plane.errors.PolicyLoadError` with every problem of both (what
    ``policy check`` and ``policy lint`` report before anything else). ``field_types``:
    the catalog mapping's, so text-field rules are checked and resolved; ``locations`` and
    ``progress``: as for :func:`~control_plane.loader.load_policy_set`."""
    problems: list[PolicyError] = []
    policy_set = suite = None
    with paused_collection():
        try:
            policy_set = load_policy_set(
                directory, roles, field_types=field_types, locations=locations, progress=progress
            )
        except PolicyLoadError as error:
            problems += error.errors
        try:
            suite = load_suite(directory)
        except SuiteLoadError as error:
            problems += error.errors  # a missing directory is one error: equal errors are one
    if problems or policy_set is None or suite is None:
        raise PolicyLoadError(problems)
    return policy_set, suite


def case_files(root: Path) -> list[Path]:
    """YAML files inside a ``tests/`` folder, sorted by relative path."""
    return [path for relative, path in yaml_files(root) if TESTS_DIR in relative.split("/")[:-1]]


def suite_from_json(data: dict[str, Any]) -> Suite:
    """The suite :meth:`Suite.as_json` produced. A ``sha256`` in ``data`` must match the
    cases; errors name the case's recorded file and line."""
    errors: list[PolicyError] = []
    raw_cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(raw_cases, list):
        raise SuiteLoadError([
            PolicyError(code="invalid_document", message="expected {cases: [...]}", file=STORED)
        ])
    cases: list[TestCase] = []
    for number, raw in enumerate(raw_cases):
        file = str(raw.get("file") or STORED) if isinstance(raw, dict) else STORED
        case = _unlocated_case(raw, file, f"cases.{number}", errors, located=True)
        if case is not None:
            cases.append(case)
    errors += _duplicate_names((case, None) for case in cases)
    if errors:
        raise SuiteLoadError(errors)
    suite = Suite(tuple(cases))
    if data.get("sha256", suite.sha256) != suite.sha256:
        raise SuiteLoadError([PolicyError(
            code="invalid_value",
            message=f"stored sha256 {data['sha256']} does not match the cases ({suite.sha256})",
            file=STORED,
        )])
    return suite


def _cases(source: Source, data: Any, errors: list[PolicyError]) -> list[tuple[TestCase, Source]]:
    located = []
    file_now = _file_now(source, data, errors)
    for item_source, item, line in _items(source, data, errors):
        case = _case(item_source, _at_file_now(item, file_now), line, errors)
        if case is not None:
            located.append((case, item_source))
    return located


FILE_KEYS = ("now", "cases")
"""what a test file's mapping form may hold"""

_INSTANT: TypeAdapter[datetime] = TypeAdapter(Instant)


def _at_file_now(raw: Any, file_now: datetime | None) -> Any:
    """A case as written, with its file's ``now`` when it sets none of its own."""
    if file_now is not None and isinstance(raw, Mapping) and "now" not in raw:
        return {**raw, "now": file_now}
    return raw


def _file_now(source: Source, data: Any, errors: list[PolicyError]) -> datetime | None:
    """The document's ``now`` (mapping form), validated; None when absent or invalid."""
    if not isinstance(data, dict) or data.get("now") is None:
        return None
    try:
        return _INSTANT.validate_python(data["now"])
    except ValidationError as exc:
        errors.append(source.at(("now",), "invalid_value", f"now: {exc.errors()[0]['msg']}"))
        return None


def _items(source: Source, data: Any, errors: list[PolicyError]) -> Iterator[tuple[Source, Any, int]]:
    """Each case of a document with its source and line: a list of cases, or ``{now: ...,
    cases: [...]}``. Anything else is an error."""
    node, base = source.node, source.base
    if isinstance(data, dict):
        for key in sorted(set(data) - set(FILE_KEYS), key=str):
            errors.append(source.at((key,), "unknown_field", f"unknown field {key!r} (expected now, cases)"))
        if "cases" not in data:
            errors.append(source.at((), "missing_field", "missing required field 'cases'"))
            return
        data = data["cases"]
        node = [value for key, value in node.value if key.value == "cases"][-1]
        base = ("cases",)
    if not isinstance(data, list) or not isinstance(node, yaml.SequenceNode):
        errors.append(source.at(base, "invalid_document", "expected a list of test cases"))
        return
    for index, (item, item_node) in enumerate(zip(data, node.value, strict=True)):
        yield Source(source.file, source.node, (*base, index)), item, item_node.start_mark.line + 1


def _case(source: Source, item: Any, line: int, errors: list[PolicyError]) -> TestCase | None:
    if not isinstance(item, dict):
        errors.append(source.at((), "invalid_document", "expected a test case mapping"))
        return None
    for key in LOCATION & set(item):
        errors.append(source.at((key,), "unknown_field", f"{key}: unknown field {key!r}"))
    try:
        return TestCase.model_validate({**item, "file": source.file, "line": line})
    except ValidationError as exc:
        errors += validation_errors(exc, source)
        return None


def _duplicate_names(located: Iterable[tuple[TestCase, Source | None]]) -> list[PolicyError]:
    by_name: dict[str, list[tuple[TestCase, Source | None]]] = {}
    for case, source in located:
        by_name.setdefault(case.name, []).append((case, source))
    errors = []
    for name, uses in by_name.items():
        if len(uses) < 2:
            continue
        places = ", ".join(f"{case.file}:{case.line}" for case, _ in uses)
        message = f"test case name {name!r} is used {len(uses)} times ({places})"
        for case, source in uses:
            if source is not None:
                errors.append(source.at(("name",), "duplicate_id", message))
            else:
                file = case.file or STORED
                errors.append(PolicyError(code="duplicate_id", message=message, file=file, line=case.line))
    return errors


def _unlocated_case(
    raw: Any, file: str, where: str, errors: list[PolicyError], *, located: bool = False
) -> TestCase | None:
    """A case that comes as data, not YAML (the API, the store): errors name ``file`` and
    the case's place (``cases.3.expect.plan``). ``located`` cases carry their file and line."""
    if not isinstance(raw, Mapping):
        errors.append(PolicyError(code="invalid_document", message=f"{where}: expected a mapping", file=file))
        return None
    recorded = raw.get("line")
    line = recorded if located and isinstance(recorded, int) and recorded > 0 else 0
    if not located:
        for key in sorted(LOCATION & set(raw)):
            message = f"{where}.{key}: unknown field {key!r}"
            errors.append(PolicyError(code="unknown_field", message=message, file=file))
        raw = {**raw, "file": file, "line": 0}
    try:
        return TestCase.model_validate(raw)
    except ValidationError as exc:
        for detail in exc.errors():
            loc = ".".join(map(str, (where, *detail["loc"])))
            text = detail["msg"].removeprefix("Value error, ")
            code = PYDANTIC_CODES.get(detail["type"], "invalid_value")
            errors.append(PolicyError(code=code, message=f"{loc}: {text}", file=file, line=line))
        return None


def _file_name_errors(name: str) -> list[PolicyError]:
    """A test file name must be one :func:`load_suite` reads back: a relative YAML path
    inside a ``tests/`` folder, nothing hidden, no ``..``."""
    path = PurePosixPath(name)
    parts = path.parts
    if (
        not path.is_absolute()
        and path.suffix in SUFFIXES
        and TESTS_DIR in parts[:-1]
        and not any(part.startswith(".") for part in parts)
    ):
        return []
    message = f"test file name {name!r} is not a relative .yaml path inside a {TESTS_DIR}/ folder"
    return [PolicyError(code="invalid_value", message=message, file=name)]
