"""What an author types in the console, read by the loader itself: a policy's YAML and a
test file's YAML, each with every problem at its line and column (the same codes and
messages as ``govsearch policy check``). The text is written to a scratch directory and
read there by :class:`~control_plane.loader.YamlReading` and
:func:`~control_plane.lifecycle.suite.load_suite`, so the console never parses policies its
own way."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from control_plane import yaml_aliases
from control_plane.errors import PolicyError
from control_plane.lifecycle.suite import SuiteLoadError, load_suite
from control_plane.loader import YamlReading

DRAFT_FILE = "draft.yaml"


@dataclass(frozen=True)
class ReadDraft:
    """A policy as written (``data``: the mapping the workflow stages), or the problems."""

    data: dict[str, Any] | None
    errors: list[PolicyError] = field(default_factory=list)


@dataclass(frozen=True)
class ReadTests:
    cases: list[dict[str, Any]]
    errors: list[PolicyError] = field(default_factory=list)


def read_policy(text: str) -> ReadDraft:
    """One policy mapping from ``text``, validated by the loader, or every problem found."""
    with tempfile.TemporaryDirectory(prefix="govsearch-draft-") as scratch:
        root = Path(scratch)
        (root / DRAFT_FILE).write_text(text, encoding="utf-8")
        reading = YamlReading(root)
        policies = reading.policies()
        errors = sorted(set(reading.errors), key=lambda e: e.sort_key)
    if errors:
        return ReadDraft(None, errors)
    if len(policies) != 1:
        return ReadDraft(None, [PolicyError(
            code="invalid_document",
            message=f"write exactly one policy mapping here (found {len(policies)})",
            file=DRAFT_FILE, line=1, column=1,
        )])
    # the one document the loader found it in (others are empty: a text may end with ---)
    documents = [d for d in yaml_aliases.safe_load_all(text) if d is not None]
    return ReadDraft(_plain(documents[0]))


def read_tests(name: str, text: str) -> ReadTests:
    """The cases of test file ``name`` (e.g. ``food/tests/oranges.yaml``) from ``text``,
    validated by the suite loader at their lines, or every problem found. An empty text
    gives no cases (the workflow then removes the file)."""
    with tempfile.TemporaryDirectory(prefix="govsearch-tests-") as scratch:
        root = Path(scratch)
        path = root / name
        if not path.resolve().is_relative_to(root.resolve()):
            return ReadTests([], [PolicyError(
                code="invalid_value", message="the test file must stay inside the policy directory",
                file=name,
            )])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        try:
            load_suite(root)
        except SuiteLoadError as error:
            return ReadTests([], error.errors)
    cases: list[dict[str, Any]] = []
    for data in yaml_aliases.safe_load_all(text):  # one or more documents, as the suite reads them
        if data is None:
            continue
        if isinstance(data, dict):  # {now: ..., cases: [...]}: the document's now on each case without one
            moment = _plain(data.get("now"))
            found = _plain(data.get("cases") or [])
            if moment is not None:
                found = [case if "now" in case else {**case, "now": moment} for case in found]
            cases += found
        else:
            cases += _plain(data)
    return ReadTests(cases)


def _plain(value: Any) -> Any:
    """YAML's dates and times as ISO strings, as the JSON API would receive them."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def tests_yaml(cases: list[dict[str, Any]]) -> str:
    """A test file's cases as the YAML an author would write."""
    if not cases:
        return ""
    return yaml.safe_dump(cases, sort_keys=False, allow_unicode=True, width=100)
