"""Rendered DSL for the cases in cases.yaml, compared with golden/<case>.json.

``GOVSEARCH_UPDATE_GOLDEN=1 pytest tests/renderer`` rewrites the goldens; review the diff
like code.
"""

from __future__ import annotations

import json
import os

import pytest

from control_plane.renderer import render
from tests.renderer.cases import CASES, GOLDEN, PROFILE

UPDATE = os.environ.get("GOVSEARCH_UPDATE_GOLDEN") == "1"


def dumped(body: object) -> str:
    return json.dumps(body, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_golden(name: str) -> None:
    plan, args = CASES[name]
    text = dumped(render(plan, PROFILE, **args))
    golden = GOLDEN / f"{name}.json"
    if UPDATE:
        golden.write_text(text, encoding="utf-8")
    assert golden.is_file(), f"no golden for {name}: run GOVSEARCH_UPDATE_GOLDEN=1 pytest"
    assert text == golden.read_text(encoding="utf-8"), f"{golden} differs from the rendering"


def test_every_golden_has_a_case() -> None:
    stale = sorted(p.stem for p in GOLDEN.glob("*.json")) if GOLDEN.is_dir() else []
    assert [s for s in stale if s not in CASES] == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendering_is_deterministic(name: str) -> None:
    plan, args = CASES[name]
    first, second = render(plan, PROFILE, **args), render(plan.model_copy(), PROFILE, **args)
    assert first == second
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
