"""The JSON Schema of a policy file, as its author writes it, generated from the models.

``python -m control_plane.schema > policies/policy.schema.json`` regenerates the committed
file (a test fails when it is stale). Editors use it to complete and check policy YAML
(``# yaml-language-server: $schema=../policy.schema.json``).

The models validate the author's YAML through ``before`` validators, so their own schema
describes the normalised shape (``{kind, values}``, ``{kind, body}``). This module keeps
every generated rule body schema and rewrites the parts where YAML and model differ: the
trigger (``{phrase: [...], consume: true}``), rules (one-key mappings), the active window
(dates or date-times), price bounds (a number, ``{percentile: P}`` or ``"{capture}"``).
"""

from __future__ import annotations

import inspect
import json
import sys
from typing import Any

from control_plane.policy import (
    CAPTURE,
    CAPTURE_NAME,
    RULE_MODELS,
    SPECIFICITY,
    Policy,
    Trigger,
)

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def policy_file_schema() -> dict[str, Any]:
    """A policy file: one policy mapping or a list of them (each ``---`` document alike)."""
    generated = Policy.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = generated.pop("$defs")
    defs.pop("Pattern")
    defs["Trigger"] = _trigger()
    defs["Rule"] = _rule()
    for end in ("from", "until"):
        defs["ActiveWindow"]["properties"][end]["anyOf"] = [
            {"type": "string", "format": "date"},
            {"type": "string", "format": "date-time"},
            {"type": "null"},
        ]
    _price_bounds(defs["PriceRule"])
    defs["PriceRule"]["anyOf"] = [{"required": ["min"]}, {"required": ["max"]}]
    defs["EconomicsRule"]["anyOf"] = [
        {"required": ["margin_weight"]},
        {"required": ["popularity_weight"]},
    ]
    generated["if"] = {"properties": {"kind": {"const": "guard"}}, "required": ["kind"]}
    generated["then"] = {
        "properties": {"trigger": {"required": ["always"]}, "cohorts": {"maxItems": 0}}
    }
    defs["Policy"] = generated
    return {
        "$schema": DIALECT,
        "title": "govsearch policy file",
        "description": "One policy, or a list of policies (see control_plane/policy.py).",
        "anyOf": [
            {"$ref": "#/$defs/Policy"},
            {"type": "array", "items": {"$ref": "#/$defs/Policy"}},
        ],
        "$defs": defs,
    }


def _trigger() -> dict[str, Any]:
    phrases = {
        "anyOf": [
            {"type": "string", "minLength": 1},
            {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        ]
    }
    pattern = {"type": "string", "pattern": _pattern_regex()}
    kinds: dict[str, Any] = {
        "exact": phrases,
        "phrase": phrases,
        "any": phrases,
        "pattern": {
            "anyOf": [pattern, {"type": "array", "minItems": 1, "items": pattern}],
            "examples": ["(without|sans) {item}", "{item} (free|-free)", "(between) {low} (and) {high}"],
        },
        "vocabulary": {"type": "string", "minLength": 1, "description": "a vocabulary's name:"
                       " fires on any of its words, anywhere in the intent"},
        "always": {"const": True},
    }
    one_of: list[dict[str, Any]] = [{"required": [kind]} for kind in SPECIFICITY]
    one_of[list(SPECIFICITY).index("always")]["not"] = {
        "properties": {"consume": {"const": True}},
        "required": ["consume"],
    }
    return {
        "title": "Trigger",
        "description": inspect.cleandoc(Trigger.__doc__ or ""),
        "type": "object",
        "additionalProperties": False,
        "properties": {
            **{kind: kinds[kind] for kind in SPECIFICITY},
            "consume": {"type": "boolean", "default": False},
            "unless": {
                **phrases,
                "description": "phrases inside which a cue does not fire (titles, brands)",
            },
            "capture": {
                "type": "string",
                "pattern": "^" + CAPTURE_NAME.pattern + "$",
                "description": "a vocabulary trigger's capture name (default: the vocabulary's)",
            },
        },
        "oneOf": one_of,
    }


def _rule() -> dict[str, Any]:
    return {
        "title": "Rule",
        "description": "A mapping with exactly one key, the rule kind, whose value is the"
        " rule's body.",
        "oneOf": [
            {
                "type": "object",
                "additionalProperties": False,
                "required": [kind],
                "properties": {kind: {"$ref": f"#/$defs/{model.__name__}"}},
            }
            for kind, model in sorted(RULE_MODELS.items())
        ],
    }


def _price_bounds(price: dict[str, Any]) -> None:
    capture = "^" + CAPTURE.pattern + "$"
    for end in ("min", "max"):
        price["properties"][end]["anyOf"] = [
            {"type": "number", "minimum": 0},
            {"$ref": "#/$defs/RelativeBound"},
            {"type": "string", "pattern": capture.replace("(", "").replace(")", "")},
            {"type": "null"},
        ]


def _pattern_regex() -> str:
    """Cue groups ``(a|b)`` and captures ``{name}`` / ``{name:N}`` separated by blanks
    (:meth:`control_plane.policy.Pattern.parse` checks that they alternate)."""
    part = r"(?:\([^()]+\)|\{[a-z_][a-z0-9_]*(?::(?:[1-9]|10))?\})"
    return r"^\s*" + part + r"(?:\s+" + part + r")+\s*$"


def render() -> str:
    """The committed file's exact text: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(policy_file_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
