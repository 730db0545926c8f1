"""Policy loading errors: a stable code, a message and a ``file:line:column``.

The loader collects every error of a policy directory, then raises one
:class:`PolicyLoadError` holding them all, sorted and de-duplicated. Codes are stable
(tests, the CLI and the API match on them); :data:`ERROR_CODES` documents each one and the
docs list exactly these.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: Every error code the loader emits, and what it means.
ERROR_CODES: dict[str, str] = {
    "io_error": "a file or the policy directory cannot be read (missing, unreadable)",
    "bad_encoding": "a file is not UTF-8 (reported at the first byte that is not)",
    "bad_character": "a file holds a character YAML does not allow, such as NUL or BEL"
    " (reported where it occurs)",
    "missing_governance": "the policy directory has no governance.yaml",
    "yaml_syntax": "a file is not valid YAML (reported at the parser's problem mark)",
    "yaml_aliases": "a YAML document's aliases repeat more than 100,000 nodes and characters (or"
    " ten times its own), or one is inside the node it names (reported at the anchored node)",
    "duplicate_key": "a YAML mapping repeats a key (the later key is reported)",
    "invalid_document": "a YAML document is neither a mapping nor a list of mappings",
    "unknown_field": "a key the model does not define (typo or misplaced key)",
    "missing_field": "a required key is absent (reported at the mapping that lacks it)",
    "invalid_value": "a value has the wrong type or is out of range",
    "unknown_rule": "a rule's key is not a known rule kind",
    "rule_shape": "a rule is not a mapping with exactly one key, the rule kind",
    "trigger_kind": "a trigger does not have exactly one of exact, pattern, phrase, any,"
    " vocabulary, always",
    "bad_pattern": "a pattern is not cue groups and captures in turn, such as"
    " '(cue|other cue) {capture}', '{capture} (cue)' or '(cue) {low} (cue) {high}'",
    "bad_window": "an active window ends before (or when) it starts",
    "guard_trigger": "a guard's trigger is not 'always: true'",
    "guard_cohorts": "a guard names cohorts (guards apply to everyone)",
    "unknown_capture": "a rule uses '{name}' that its trigger does not capture",
    "duplicate_id": "two policies share an id, or two vocabularies a name (each is reported)",
    "unknown_vocabulary": "a rule or a vocabulary trigger names a vocabulary that does not exist",
    "phrase_too_long": "a trigger phrase, pattern cue, 'unless' phrase or vocabulary word is longer"
    " than an intent can be (512 characters once normalised): it could never match",
    "match_field_type": "a rule's match does not fit its field's mapping type (words/phrase"
    " need a text field, terms a keyword field)",
    "governance_field": "a rule filters, excludes, boosts or buries a field governance forbids",
    "governance_protected": "a policy that is not a guard touches a protected field",
    "governance_boost": "a boost or sponsored weight exceeds max_boost_weight",
    "governance_pins": "a policy pins more ids than max_pins",
    "governance_sponsored": "a policy sponsors more ids than max_sponsored",
}


@dataclass(frozen=True, kw_only=True)
class PolicyError:
    """One problem, located. ``line`` and ``column`` are 1-based; 0 means "no position"
    (a missing file, a policy built through the API)."""

    code: str
    message: str
    file: str
    line: int = 0
    column: int = 0

    def __post_init__(self) -> None:
        if self.code not in ERROR_CODES:
            raise ValueError(f"undocumented policy error code {self.code!r}")

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.code}: {self.message}"

    @property
    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.file, self.line, self.column, self.code, self.message)

    def to_dict(self) -> dict[str, str | int]:
        """The JSON error shape (CLI ``--json`` and the API)."""
        return {
            "code": self.code,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
        }


class PolicyLoadError(Exception):
    """Raised instead of returning a policy set when anything is wrong: all errors at once."""

    def __init__(self, errors: Iterable[PolicyError]) -> None:
        self.errors: tuple[PolicyError, ...] = tuple(
            sorted(set(errors), key=lambda error: error.sort_key)
        )
        count = len(self.errors)
        lines = [f"{count} policy error{'s' if count != 1 else ''}"]
        lines += [str(error) for error in self.errors]
        super().__init__("\n".join(lines))

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(error.code for error in self.errors)
