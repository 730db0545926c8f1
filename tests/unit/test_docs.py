"""Docs cannot drift from the code: every rule kind, strategy, trigger kind, error code and
API route is documented, and the committed OpenAPI schema is the generated one."""

from __future__ import annotations

import json
import typing
from pathlib import Path

from control_plane.errors import ERROR_CODES
from control_plane.policy import RULE_MODELS, SPECIFICITY

DOCS = Path(__file__).resolve().parents[2] / "docs"


def strategies() -> set[str]:
    found: set[str] = set()
    for model in RULE_MODELS.values():
        field = model.model_fields.get("strategy")
        if field is not None:
            found |= set(typing.get_args(field.annotation))
    return found


def test_policy_reference_lists_every_kind_strategy_and_code() -> None:
    text = (DOCS / "policies.md").read_text()
    for kind in RULE_MODELS:
        assert f"| `{kind}` |" in text, kind
    for trigger in SPECIFICITY:
        assert f"`{trigger}" in text, trigger
    for strategy in strategies():
        assert f"`{strategy}`" in text, strategy
    for code in ERROR_CODES:
        assert f"| `{code}` |" in text, code


def test_openapi_schema_is_current_and_every_route_documented() -> None:
    from control_plane.api.openapi import openapi_schema

    committed = json.loads((DOCS / "openapi.json").read_text())
    assert committed == openapi_schema(), "run: python -m control_plane.api.openapi > docs/openapi.json"
    api_doc = (DOCS / "api.md").read_text()
    for path, methods in committed["paths"].items():
        for method in methods:
            assert f"`{method.upper()} {path}`" in api_doc, (method, path)
