"""Load a policy directory into a frozen, versioned :class:`PolicySet`.

Layout of a policy directory::

    governance.yaml            required: what policies may touch
    vocabularies/*.yaml        one vocabulary per document; ``name`` defaults to the stem
    **/*.yaml, **/*.yml        policies: a mapping, a list of mappings, or several
                               ``---`` documents per file (``tests/`` folders, hidden
                               files and folders are skipped)

:func:`load_policy_set` reads everything, validates it with the models of
:mod:`control_plane.policy`, then cross-checks the whole set (duplicate ids, unknown
vocabularies, governance). It returns a policy set only when there is no error at all;
otherwise it raises one :class:`PolicyLoadError` with every error, each located at the
``file:line:column`` of the YAML node it concerns (files relative to the directory).

A set's version is the sha256 of :func:`canonical_json`: equal content gives an equal
version, whatever the file names, order or formatting.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from control_plane import yaml_aliases
from control_plane.errors import ERROR_CODES, PolicyError, PolicyLoadError
from control_plane.intent_text import MAX_INTENT, normalise
from control_plane.policy import (
    BoostRule,
    BuryRule,
    CategoryRule,
    ExcludeRule,
    FilterRule,
    Governance,
    Loc,
    PinRule,
    Policy,
    PolicySet,
    PriceRule,
    RuleBody,
    SponsoredRule,
    Vocabulary,
)
from control_plane.shopper_language import FieldTypes, resolved, shopper_violations

GOVERNANCE_FILE = "governance.yaml"
VOCABULARY_DIR = "vocabularies"
TESTS_DIR = "tests"
SUFFIXES = (".yaml", ".yml")

M = TypeVar("M", bound=BaseModel)

#: pydantic error types with a loader code of their own (others are ``invalid_value``,
#: unless the type already is a code: :func:`control_plane.policy.invalid` raised it).
PYDANTIC_CODES = {"missing": "missing_field", "extra_forbidden": "unknown_field"}


class FieldRoles(Protocol):
    """The catalog fields that category and price rules constrain (a
    :class:`~control_plane.catalog.profile.CatalogProfile` is one)."""

    @property
    def category(self) -> str: ...

    @property
    def price(self) -> str: ...


def load_policy_set(
    directory: Path | str,
    roles: FieldRoles | None = None,
    *,
    field_types: FieldTypes | None = None,
    locations: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> PolicySet:
    """Load, validate and freeze the policy directory, or raise :class:`PolicyLoadError`
    with every error found (never a half-loaded set). ``roles`` (the catalog profile) names
    the fields category and price rules touch, for governance; without it those two rule
    kinds are not checked against ``filterable_fields`` (no catalog is known).
    ``field_types`` (dotted field -> mapping type, from the catalog mapping) lets rules on
    text fields become analysed queries (:mod:`control_plane.shopper_language`).
    ``locations``, when given, receives what :func:`policy_locations` gives for the policies
    that loaded, from the same read (lint at 100,000 policies read every file twice
    otherwise). ``progress`` is told how many of the policy files are read (a terminal
    bar: reading 100,000 files takes a quarter of a minute)."""
    root = Path(directory)
    if not root.is_dir():
        raise PolicyLoadError([
            PolicyError(code="io_error", message="not a policy directory", file=str(directory))
        ])
    with paused_collection():
        reading = YamlReading(root)
        governance = reading.governance()
        vocabularies = reading.vocabularies()
        policies = reading.policies(progress)
        if locations is not None:
            for policy, source in policies:
                line, _ = _position(source.node, (*source.base, "id"))
                locations.setdefault(policy.id, f"{source.file}:{line}")
        read_policies, read_vocabularies = [p for p, _ in policies], [v for v, _ in vocabularies]
        for violation in check_policy_set(
            read_policies, read_vocabularies, governance,
            broken_vocabularies=reading.broken_vocabularies, roles=roles,
            field_types=field_types,
        ) + written_violations(read_policies, read_vocabularies):
            sources = policies if violation.subject == "policy" else vocabularies
            reading.errors.append(sources[violation.index][1].error(violation))
        if reading.errors or governance is None:
            raise PolicyLoadError(reading.errors)
        return _freeze(
            [p for p, _ in policies], [v for v, _ in vocabularies], governance, field_types
        )


def policy_locations(directory: Path | str) -> dict[str, str]:
    """Policy id -> ``"file:line"`` of its ``id`` key (file relative to the directory), for
    every policy document of the directory that has a string id, valid or not. For an id
    defined twice, the first file in load order wins. Reads the files as the loader does,
    validates nothing and raises nothing (unreadable files are simply absent)."""
    root = Path(directory)
    if not root.is_dir():
        return {}
    reading = YamlReading(root)
    found: dict[str, str] = {}
    for path in reading.policy_files():
        for source, data in reading.documents(path):
            items = list(enumerate(data)) if isinstance(data, list) else [(None, data)]
            for index, item in items:
                if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                    continue
                base: Loc = () if index is None else (index,)
                line, _ = _position(source.node, (*base, "id"))
                found.setdefault(item["id"], f"{source.file}:{line}")
    return found


def build_policy_set(
    policies: Sequence[Policy],
    vocabularies: Sequence[Vocabulary],
    governance: Governance,
    roles: FieldRoles | None = None,
    *,
    field_types: FieldTypes | None = None,
    written: Sequence[str] = (),
) -> PolicySet:
    """Freeze already validated models (e.g. from the API) after the same cross-checks as
    the loader, and :func:`written_violations` for the policies whose ids are ``written``
    (a draft's, a suggestion's: the others are a stored set's, rebuilt as they are). Errors
    name ``policy:<id>`` or ``vocabulary:<name>`` instead of a file."""
    violations = check_policy_set(
        policies, vocabularies, governance, roles=roles, field_types=field_types
    )
    if written:
        fresh = set(written)
        indices = [index for index, policy in enumerate(policies) if policy.id in fresh]
        violations += [
            replace(violation, index=indices[violation.index])
            for violation in written_violations([policies[index] for index in indices])
        ]
    if violations:
        errors = []
        for violation in violations:
            name = (
                policies[violation.index].id
                if violation.subject == "policy"
                else vocabularies[violation.index].name
            )
            where = ".".join(map(str, violation.loc))
            errors.append(PolicyError(
                code=violation.code,
                message=f"{where}: {violation.message}" if where else violation.message,
                file=f"{violation.subject}:{name}",
            ))
        raise PolicyLoadError(errors)
    return _freeze(policies, vocabularies, governance, field_types)


def canonical_json(
    policies: Sequence[Policy], vocabularies: Sequence[Vocabulary], governance: Governance
) -> str:
    """The JSON the version hashes: policies sorted by id, vocabularies by name, sorted
    keys, no whitespace, UTF-8 text as is."""
    content = {
        "policies": [_json(p) for p in sorted(policies, key=lambda p: p.id)],
        "vocabularies": [_json(v) for v in sorted(vocabularies, key=lambda v: v.name)],
        "governance": _json(governance),
    }
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _json(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True)


def _freeze(
    policies: Sequence[Policy],
    vocabularies: Sequence[Vocabulary],
    governance: Governance,
    field_types: FieldTypes | None = None,
) -> PolicySet:
    policies = resolved(policies, vocabularies, field_types)
    text = canonical_json(policies, vocabularies, governance)
    return PolicySet(
        version=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        policies=tuple(sorted(policies, key=lambda p: p.id)),
        vocabularies=tuple(sorted(vocabularies, key=lambda v: v.name)),
        governance=governance,
    )


# --- cross-checks ---------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """A cross-check failure on the ``index``-th policy or vocabulary, at ``loc`` in it
    (a path as the YAML author wrote it, e.g. ``("rules", 2, "boost", "weight")``)."""

    code: str
    message: str
    subject: Literal["policy", "vocabulary"]
    index: int
    loc: Loc


def check_policy_set(
    policies: Sequence[Policy],
    vocabularies: Sequence[Vocabulary],
    governance: Governance | None,
    *,
    broken_vocabularies: frozenset[str] = frozenset(),
    roles: FieldRoles | None = None,
    field_types: FieldTypes | None = None,
) -> list[Violation]:
    """What makes valid models an invalid set: duplicate ids and vocabulary names, rules
    naming an unknown vocabulary and, when ``governance`` is given, governance breaches.
    ``broken_vocabularies`` are names that exist but failed to load (not reported again)."""
    found: list[Violation] = []
    ids = Counter(p.id for p in policies)
    for index, policy in enumerate(policies):
        if ids[policy.id] > 1:
            found.append(Violation(
                "duplicate_id", f"policy id {policy.id!r} is defined {ids[policy.id]} times",
                "policy", index, ("id",),
            ))
    names = Counter(v.name for v in vocabularies)
    for index, vocabulary in enumerate(vocabularies):
        if names[vocabulary.name] > 1:
            found.append(Violation(
                "duplicate_id",
                f"vocabulary {vocabulary.name!r} is defined {names[vocabulary.name]} times",
                "vocabulary", index, ("name",),
            ))
    known = set(names) | broken_vocabularies
    for index, policy in enumerate(policies):
        found += _vocabulary_violations(policy, index, known)
        found += [
            Violation(code, message, "policy", index, loc)
            for code, message, loc in shopper_violations(policy, known, field_types)
        ]
        if governance is not None:
            found += _governance_violations(policy, index, governance, roles)
    return found


def written_violations(
    policies: Sequence[Policy], vocabularies: Sequence[Vocabulary] = ()
) -> list[Violation]:
    """What may not be *written*, though a set stored before the check came in still loads
    and is rebuilt as it is (the kill switch disables a policy of it, a draft or a suggestion
    adds one to it): a trigger text too long to match (``phrase_too_long``). Called on the
    files a directory holds, and on the policies a draft or a suggestion writes."""
    found: list[Violation] = []
    for index, vocabulary in enumerate(vocabularies):
        found += _long_words(vocabulary, index)
    for index, policy in enumerate(policies):
        found += _long_phrases(policy, index)
    return found


def too_long_to_match(text: str) -> str | None:
    """Why a trigger text can never match (longer than any intent once normalised), or None.
    Such a text is refused where it is written: nothing could use it, and lint's analysis
    of a trigger's word runs is cubic in its length (a draft of 8,000 words fits the API's
    body limit and took lint a quarter of an hour). Lint reads one in a set stored before
    the check came in as never matching (:func:`control_plane.lifecycle.lint_facts.overlong`)."""
    if len(text) <= MAX_INTENT and text.isascii():  # normalising never lengthens ASCII
        return None
    length = len(normalise(text))
    if length <= MAX_INTENT:
        return None
    return (
        f"{length:,} characters once normalised: an intent has at most {MAX_INTENT}, so this"
        " text could never match one"
    )


def _long_phrases(policy: Policy, index: int) -> Iterator[Violation]:
    """Trigger phrases, pattern cues and ``unless`` phrases too long to match (:func:`too_long_to_match`)."""
    trigger = policy.trigger
    texts: list[tuple[str, Loc]] = []
    if trigger.kind in ("exact", "phrase", "any"):
        texts += [(value, ("trigger", trigger.kind, n)) for n, value in enumerate(trigger.values)]
    for n, pattern in enumerate(trigger.patterns):
        texts += [(cue, ("trigger", "pattern", n)) for cue in pattern.cues]
    texts += [(phrase, ("trigger", "unless", n)) for n, phrase in enumerate(trigger.unless)]
    for text, loc in texts:
        problem = too_long_to_match(text)
        if problem is not None:
            yield Violation("phrase_too_long", problem, "policy", index, loc)


def _long_words(vocabulary: Vocabulary, index: int) -> Iterator[Violation]:
    """Vocabulary words too long to match (:func:`too_long_to_match`)."""
    for value, words in vocabulary.entries.items():
        for n, word in enumerate(words):
            problem = too_long_to_match(word)
            if problem is not None:
                yield Violation("phrase_too_long", problem, "vocabulary", index, ("entries", value, n))


def _vocabulary_violations(policy: Policy, index: int, known: set[str]) -> Iterator[Violation]:
    for number, rule in enumerate(policy.rules):
        body = rule.body
        name = body.vocabulary if isinstance(body, FilterRule | ExcludeRule) else None
        if name is not None and name not in known:
            yield Violation(
                "unknown_vocabulary",
                f"vocabulary {name!r} does not exist"
                f" (known: {', '.join(sorted(known)) or 'none'})",
                "policy", index, ("rules", number, rule.kind, "vocabulary"),
            )


def _governance_violations(
    policy: Policy, index: int, rules: Governance, roles: FieldRoles | None = None
) -> Iterator[Violation]:
    pins = sponsored = 0
    for number, rule in enumerate(policy.rules):
        at: Loc = ("rules", number, rule.kind)
        body = rule.body
        for field, loc, allowed, verb in _touched_fields(body, at, rules, roles):
            if field in rules.protected_fields and policy.kind != "guard":
                yield Violation(
                    "governance_protected",
                    f"only guards may {verb} protected field {field!r}",
                    "policy", index, loc,
                )
            elif field not in allowed:
                yield Violation(
                    "governance_field",
                    f"governance does not allow policies to {verb} field {field!r}"
                    f" (allowed: {', '.join(sorted(allowed)) or 'none'})",
                    "policy", index, loc,
                )
        if isinstance(body, BoostRule | SponsoredRule) and body.weight > rules.max_boost_weight:
            yield Violation(
                "governance_boost",
                f"{rule.kind} weight {body.weight:g} exceeds max_boost_weight"
                f" {rules.max_boost_weight:g}",
                "policy", index, (*at, "weight"),
            )
        if isinstance(body, PinRule):
            pins += len(body.ids)
            if pins > rules.max_pins:
                yield Violation(
                    "governance_pins",
                    f"the policy pins {pins} ids; max_pins is {rules.max_pins}",
                    "policy", index, (*at, "ids"),
                )
        if isinstance(body, SponsoredRule):
            sponsored += len(body.ids)
            if sponsored > rules.max_sponsored:
                yield Violation(
                    "governance_sponsored",
                    f"the policy sponsors {sponsored} ids; max_sponsored is"
                    f" {rules.max_sponsored}",
                    "policy", index, (*at, "ids"),
                )


def _touched_fields(
    body: RuleBody, at: Loc, rules: Governance, roles: FieldRoles | None
) -> Iterator[tuple[str, Loc, tuple[str, ...], str]]:
    """(field, location, the fields governance allows, verb) for each field a rule touches.
    A category rule touches the profile's category field, a price rule its price field
    (neither when no profile is given)."""
    if isinstance(body, FilterRule):
        yield body.field, (*at, "field"), rules.filterable_fields, "filter on"
    elif isinstance(body, ExcludeRule):
        yield body.field, (*at, "field"), rules.filterable_fields, "exclude on"
    elif isinstance(body, BoostRule):
        yield body.field, (*at, "field"), rules.boostable_fields, "boost"
    elif isinstance(body, BuryRule):
        yield body.field, (*at, "field"), rules.boostable_fields, "bury"
    elif isinstance(body, CategoryRule) and roles is not None:
        yield roles.category, at, rules.filterable_fields, "constrain"
    elif isinstance(body, PriceRule) and roles is not None:
        yield roles.price, at, rules.filterable_fields, "constrain"


# --- reading files --------------------------------------------------------------------


@contextmanager
def paused_collection() -> Iterator[None]:
    """Pause the cyclic garbage collector during a load: parsing and validating allocate
    millions of small acyclic objects (nodes, marks, dicts, models) that reference counting
    frees anyway, and each collection pass walks every survivor (half of a 10,000-policy
    load). Cycles made meanwhile are collected once it runs again; nested pauses are one."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()



@dataclass(frozen=True)
class Source:
    """Where a model came from: a file, the YAML node of its document and the path of the
    model inside that document (``(2,)`` for the third policy of a list)."""

    file: str
    node: yaml.Node
    base: Loc = ()

    def at(self, loc: Loc, code: str, message: str) -> PolicyError:
        line, column = _position(self.node, (*self.base, *loc))
        return PolicyError(code=code, message=message, file=self.file, line=line, column=column)

    def error(self, violation: Violation) -> PolicyError:
        return self.at(violation.loc, violation.code, violation.message)


Progress = Callable[[int, int], None]
"""``progress(done, total)``: how many of a directory's policy files are read"""
#: how many times at most a load reports its progress (a bar redrawn per file would cost
#: more than the read at 100,000 files)
PROGRESS_STEPS = 200


class YamlReading:
    """The state of one load: the directory and every error found so far."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: list[PolicyError] = []
        self._relative: dict[Path, str] = {}
        """path -> its name relative to the root, for the files listed"""
        self.broken_vocabularies: frozenset[str] = frozenset()

    def governance(self) -> Governance | None:
        path = self.root / GOVERNANCE_FILE
        if not path.is_file():
            self.errors.append(PolicyError(
                code="missing_governance",
                message=f"a policy directory needs {GOVERNANCE_FILE}",
                file=GOVERNANCE_FILE,
            ))
            return None
        documents = [d for d in self.documents(path) if d[1] is not None]
        problem = f"{GOVERNANCE_FILE} must hold exactly one mapping"
        if not documents:
            if not any(e.file == GOVERNANCE_FILE for e in self.errors):
                self.errors.append(
                    PolicyError(code="invalid_document", message=problem, file=GOVERNANCE_FILE)
                )
            return None
        for extra, _ in documents[1:]:
            self.errors.append(extra.at((), "invalid_document", problem))
        source, data = documents[0]
        if not isinstance(data, dict):
            self.errors.append(source.at((), "invalid_document", problem))
        if len(documents) > 1 or not isinstance(data, dict):
            return None
        return self.validate(Governance, data, source)

    def vocabularies(self) -> list[tuple[Vocabulary, Source]]:
        found: list[tuple[Vocabulary, Source]] = []
        broken: set[str] = set()
        folder = self.root / VOCABULARY_DIR
        paths = sorted(p for p in folder.glob("*") if p.suffix in SUFFIXES and p.is_file())
        for path in paths:
            for source, data in self.documents(path):
                if data is None:
                    continue
                if not isinstance(data, dict):
                    self.errors.append(source.at((), "invalid_document", "expected a mapping"))
                    continue
                data = {"name": path.stem, **data}
                vocabulary = self.validate(Vocabulary, data, source)
                if vocabulary is None:
                    broken.add(str(data["name"]))
                else:
                    found.append((vocabulary, source))
        self.broken_vocabularies = frozenset(broken)
        return found

    def policies(self, progress: Progress | None = None) -> list[tuple[Policy, Source]]:
        found: list[tuple[Policy, Source]] = []
        files = self.policy_files()
        step = max(1, -(-len(files) // PROGRESS_STEPS))  # rounded up: PROGRESS_STEPS reports, and the last
        for number, path in enumerate(files, 1):
            for source, data in self.documents(path):
                if data is None:
                    continue
                items = [(source, data)]
                if isinstance(data, list):
                    items = [
                        (Source(source.file, source.node, (index,)), item)
                        for index, item in enumerate(data)
                    ]
                for item_source, item in items:
                    if not isinstance(item, dict):
                        self.errors.append(item_source.at(
                            (), "invalid_document", "expected a policy mapping or a list of them"
                        ))
                        continue
                    policy = self.validate(Policy, item, item_source)
                    if policy is not None:
                        found.append((policy, item_source))
            if progress is not None and (number % step == 0 or number == len(files)):
                progress(number, len(files))
        return found

    def policy_files(self) -> list[Path]:
        files = []
        for relative, path in yaml_files(self.root):
            parts = relative.split("/")
            if TESTS_DIR in parts[:-1] or parts[0] == VOCABULARY_DIR or relative == GOVERNANCE_FILE:
                continue
            self._relative[path] = relative
            files.append(path)
        return files

    def documents(self, path: Path) -> Iterator[tuple[Source, Any]]:
        """Each YAML document of ``path`` with its source; errors are recorded.

        libyaml (``yaml.CSafeLoader``) parses a file when it can; a file it refuses is read
        again by the pure-Python loader, so a syntax error keeps PyYAML's message and mark
        whether or not libyaml is installed (both compose the same nodes, with marks)."""
        file = self._relative.get(path) or path.relative_to(self.root).as_posix()
        text = self.text(path, file)
        if text is None:
            return
        parsed = _parse_fast(text, file)
        if parsed is None:
            yield from self._documents_slowly(text, file)
            return
        for document in parsed:
            self.errors += document.errors
            if document.built:
                yield Source(file, document.node), document.data

    def text(self, path: Path, file: str) -> str | None:
        """The file as text, or None with a located error: bytes that are not UTF-8 or a
        character YAML does not allow (NUL, BEL and other control characters)."""
        try:
            raw = path.read_bytes()
        except OSError as exc:
            self.errors.append(PolicyError(code="io_error", message=str(exc), file=file))
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            before = raw[: exc.start].decode("utf-8", errors="replace")
            line, column = _line_column(before, len(before))
            self.errors.append(PolicyError(
                code="bad_encoding",
                message=f"byte 0x{raw[exc.start]:02x} is not UTF-8 ({exc.reason});"
                " save the file as UTF-8",
                file=file, line=line, column=column,
            ))
            return None
        bad = _NON_PRINTABLE.search(text)
        if bad is not None:
            line, column = _line_column(text, bad.start())
            character = ord(bad.group())
            self.errors.append(PolicyError(
                code="bad_character",
                message=f"unacceptable character #x{character:04x}: YAML allows no control"
                " characters (but tab and line breaks) and no non-characters",
                file=file, line=line, column=column,
            ))
            return None
        return text

    def _documents_slowly(self, text: str, file: str) -> Iterator[tuple[Source, Any]]:
        """The pure-Python loader, document by document: PyYAML's own messages and marks."""
        loader: yaml.SafeLoader | None = None
        try:
            loader = yaml.SafeLoader(text)
            while loader.check_node():
                node = loader.get_node()
                if node is None:
                    continue
                try:
                    yaml_aliases.measure(node)
                except yaml_aliases.AliasError as exc:  # nothing of it is walked
                    self.errors.append(_marked(exc, "yaml_aliases", file))
                    continue
                self.errors += _duplicate_keys(node, file)
                source = Source(file, node)
                try:
                    data = loader.construct_document(node)
                except (ValueError, TypeError) as exc:  # e.g. a date like 2026-02-30
                    self.errors.append(source.at((), "yaml_syntax", str(exc)))
                    continue
                yield source, data
        except yaml.MarkedYAMLError as exc:
            self.errors.append(_marked(exc, "yaml_syntax", file))
        except (yaml.YAMLError, RecursionError) as exc:
            self.errors.append(PolicyError(
                code="yaml_syntax", message=_unmarked(exc), file=file, line=1, column=1
            ))
        finally:
            if loader is not None:
                loader.dispose()

    def validate(self, model: type[M], data: Any, source: Source) -> M | None:
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            self.errors += validation_errors(exc, source)
            return None


def yaml_files(root: Path) -> list[tuple[str, Path]]:
    """Every YAML file under ``root`` outside dot folders, dot files excepted, as (path
    relative to ``root`` with ``/``, path), sorted by the relative path: what
    ``root.rglob("*")`` and ``is_file()`` find (symlinked files count, symlinked folders
    are not entered), with one ``os.scandir`` per folder instead of a ``stat`` and a
    ``relative_to`` per file (seconds at 100,000 files)."""
    found: list[tuple[str, Path]] = []
    folders = [(str(root), "")]
    while folders:
        folder, prefix = folders.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except PermissionError:
            continue
        for entry in listed:
            if entry.name.startswith("."):
                continue
            relative = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append((entry.path, relative + "/"))
                elif entry.name.endswith(SUFFIXES) and entry.is_file():
                    found.append((relative, root / relative))
            except OSError:
                continue
    found.sort(key=_first)
    return found


def _first(pair: tuple[str, Path]) -> str:
    return pair[0]


#: What YAML does not accept in a stream (YAML 1.1's printable set, as PyYAML's reader
#: checks it): C0 controls but tab, LF and CR; DEL; C1 controls but NEL; surrogates;
#: U+FFFE and U+FFFF.
_NON_PRINTABLE = re.compile(
    "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]"
)

#: The fast path's constructor-less loader class: libyaml when PyYAML was built with it.
_FAST_LOADER: type[Any] | None = getattr(yaml, "CSafeLoader", None)


@dataclass(frozen=True)
class _Parsed:
    """One document as libyaml parsed it: its node, its data when it could be built, and
    the problems found in it (repeated keys, an alias blow-up, a value that cannot be built)."""

    node: yaml.Node
    data: Any
    built: bool
    errors: list[PolicyError]


def _parse_fast(text: str, file: str) -> list[_Parsed] | None:
    """Every document of ``text`` (from ``file``), parsed by libyaml; None when libyaml is
    missing or refuses the text (the caller then reads it with the pure-Python loader, which
    locates the problem as PyYAML always has).

    Each document is measured (:mod:`control_plane.yaml_aliases`) before anything walks it,
    and its keys are checked before it is built: building a merge key (``<<``) adds the
    merged pairs to the node itself, which the duplicate-key check would then report."""
    if _FAST_LOADER is None:
        return None
    loader = _FAST_LOADER(text)
    try:
        nodes = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                nodes.append(node)
        parsed: list[_Parsed] = []
        for node in nodes:
            try:
                yaml_aliases.measure(node)
            except yaml_aliases.AliasError as exc:  # nothing of it is walked
                parsed.append(_Parsed(node, None, False, [_marked(exc, "yaml_aliases", file)]))
                continue
            errors = list(_duplicate_keys(node, file))
            try:
                parsed.append(_Parsed(node, _construct(loader, node), True, errors))
            except (ValueError, TypeError) as exc:  # e.g. a date like 2026-02-30
                errors.append(Source(file, node).at((), "yaml_syntax", str(exc)))
                parsed.append(_Parsed(node, None, False, errors))
        return parsed
    except Exception:  # whatever libyaml trips on, PyYAML reads again and reports
        return None
    finally:
        loader.dispose()


_STR, _SEQ, _MAP = (f"tag:yaml.org,2002:{name}" for name in ("str", "seq", "map"))
_MERGE = "tag:yaml.org,2002:merge"


def _construct(loader: Any, node: yaml.Node) -> Any:
    """What ``loader.construct_document(node)`` returns, without its bookkeeping for the
    plain shapes policies are made of (strings, lists, mappings without merge keys); every
    other node (numbers, dates, booleans, ``<<``, explicit tags) is the constructor's."""
    if isinstance(node, yaml.ScalarNode):
        return node.value if node.tag == _STR else loader.construct_object(node, deep=True)
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
        return [_construct(loader, item) for item in node.value]
    if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = None if key_node.tag == _MERGE else _construct(loader, key_node)
            if key is None or not isinstance(key, Hashable):
                return loader.construct_object(node, deep=True)  # merges; its own errors
            mapping[key] = _construct(loader, value_node)
        return mapping
    return loader.construct_object(node, deep=True)


def _line_column(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of the character at ``position`` in ``text``."""
    line_start = text.rfind("\n", 0, position) + 1
    return text.count("\n", 0, position) + 1, position - line_start + 1


def _marked(exc: yaml.MarkedYAMLError, code: str, file: str) -> PolicyError:
    """``exc`` located at its problem mark (else its context's)."""
    mark = exc.problem_mark or exc.context_mark
    message = " ".join(str(m) for m in (exc.context, exc.problem) if m)
    return PolicyError(
        code=code,
        message=message or "invalid YAML",
        file=file,
        line=mark.line + 1 if mark else 0,
        column=mark.column + 1 if mark else 0,
    )


def _unmarked(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "the YAML is nested too deeply"
    return str(exc).splitlines()[0] if str(exc) else "invalid YAML"


# --- locating pydantic errors ---------------------------------------------------------


def validation_errors(exc: ValidationError, source: Source) -> list[PolicyError]:
    """One located error per pydantic error. Invalid values that resolve to the same YAML
    node become one error: the branches of a union (``max`` is neither a number,
    ``{percentile: P}`` nor a capture), or items of a list the model derived."""
    details = [e for e in exc.errors() if not _spurious(e, exc.errors())]
    groups: dict[tuple[Loc, str], list[ErrorDetails]] = {}
    for detail in details:
        code = _code(detail["type"])
        resolved = _resolved(source.node, (*source.base, *detail["loc"]))[len(source.base):]
        key = (resolved if code == "invalid_value" else detail["loc"], code)
        groups.setdefault(key, []).append(detail)
    errors = []
    for (loc, code), group in groups.items():
        if len(group) == 1:
            message = _message(group[0])
        else:
            message = f"{_dotted(loc)}: " + "; ".join(
                f"{_dotted(d['loc'][len(loc):])}: {_text(d)}" if d["loc"][len(loc):]
                else _text(d)
                for d in group
            )
        errors.append(source.at(group[0]["loc"], code, message))
    return errors


def _spurious(detail: ErrorDetails, details: list[ErrorDetails]) -> bool:
    """pydantic reports a tuple with ``min_length`` as too short when its items failed."""
    loc = detail["loc"]
    return detail["type"] == "too_short" and any(
        len(other["loc"]) > len(loc) and other["loc"][: len(loc)] == loc for other in details
    )


def _code(error_type: str) -> str:
    if error_type in PYDANTIC_CODES:
        return PYDANTIC_CODES[error_type]
    return error_type if error_type in ERROR_CODES else "invalid_value"


def _text(detail: ErrorDetails) -> str:
    return detail["msg"].removeprefix("Value error, ")


def _message(detail: ErrorDetails) -> str:
    loc = detail["loc"]
    if detail["type"] == "missing":
        where = f" in {_dotted(loc[:-1])}" if loc[:-1] else ""
        return f"missing required field {loc[-1]!r}{where}"
    if detail["type"] == "extra_forbidden" and loc:
        return f"{_dotted(loc)}: unknown field {loc[-1]!r}"
    return f"{_dotted(loc)}: {_text(detail)}" if loc else _text(detail)


def _dotted(loc: Loc) -> str:
    return ".".join(map(str, loc)) or "(document)"


def _walk(node: yaml.Node, loc: Loc) -> Iterator[yaml.Node]:
    """The node reported for each part of ``loc`` that exists in the YAML: the key of a
    mapping entry, the item of a sequence. Stops where the YAML and ``loc`` part ways
    (a missing key, a union branch name, a path the model derived)."""
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            entries = [(k, v) for k, v in node.value if str(getattr(k, "value", None)) == str(part)]
            if not entries:
                return
            key, node = entries[-1]
            yield key
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return
            node = node.value[part]
            yield node
        else:
            return


def _position(node: yaml.Node, loc: Loc) -> tuple[int, int]:
    mark = node.start_mark
    for found in _walk(node, loc):
        mark = found.start_mark
    return mark.line + 1, mark.column + 1


def _resolved(node: yaml.Node, loc: Loc) -> Loc:
    return loc[: sum(1 for _ in _walk(node, loc))]


def _duplicate_keys(node: yaml.Node, file: str, walked: set[int] | None = None) -> Iterator[PolicyError]:
    """The repeated keys of every mapping under ``node``; a node that aliases share is
    looked at once."""
    walked = set() if walked is None else walked
    if id(node) in walked:
        return
    walked.add(id(node))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                if key.value in seen:
                    yield PolicyError(
                        code="duplicate_key",
                        message=f"key {key.value!r} appears twice in this mapping",
                        file=file,
                        line=key.start_mark.line + 1,
                        column=key.start_mark.column + 1,
                    )
                seen.add(key.value)
            yield from _duplicate_keys(value, file, walked)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _duplicate_keys(item, file, walked)


# --- writing YAML ---------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """Flow style for small values (``{phrase: [chocolate, chocolat]}``), block style for
    the rest, block sequences indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _depth(value: Any) -> int:
    """0 for a scalar, 1 for a list or mapping of scalars, and so on."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = _depth(data) <= 2
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


def _represent_dict(dumper: yaml.SafeDumper, data: dict[Any, Any]) -> yaml.Node:
    flow = _depth(data) <= 2
    return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(dict, _represent_dict)


def dump_policy_yaml(policy: Policy) -> str:
    """The policy as an author would write it (defaults left out, one-key rules, the
    trigger's YAML form); :func:`load_policy_set` reads it back to an equal policy."""
    data: dict[str, Any] = {}
    dumped = policy.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for name in Policy.model_fields:
        if name == "trigger":
            data[name] = _trigger_yaml(policy)
        elif name == "rules":
            data[name] = [rule.to_yaml() for rule in policy.rules]
        elif name == "active" and policy.active is not None:
            window = {"from": policy.active.start, "until": policy.active.until}
            data[name] = {k: _moment(v) for k, v in window.items() if v is not None}
        elif name == "priority":
            data[name] = policy.priority
        elif name in dumped:
            data[name] = dumped[name]
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=88)


def _trigger_yaml(policy: Policy) -> dict[str, Any]:
    trigger = policy.trigger
    out: dict[str, Any]
    if trigger.kind == "always":
        out = {"always": True}
    elif trigger.kind == "pattern":
        out = {"pattern": [p.source() for p in trigger.patterns]}
    elif trigger.kind == "vocabulary":
        out = {"vocabulary": trigger.vocabulary}
        if trigger.capture is not None:
            out["capture"] = trigger.capture
    else:
        out = {trigger.kind: list(trigger.values)}
    if trigger.consume:
        out["consume"] = True
    if trigger.unless:
        out["unless"] = list(trigger.unless)
    return out


def _moment(value: datetime) -> date | datetime:
    """A midnight-UTC instant as a plain date (``2026-12-01``), anything else as is."""
    utc = value.astimezone(UTC)
    return utc.date() if utc.time() == time(0) else utc
