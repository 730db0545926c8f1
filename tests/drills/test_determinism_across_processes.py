"""Byte-identical DSL across processes: the same inputs give the same bytes in another
interpreter, whatever its string-hash seed (``PYTHONHASHSEED``: set and dict-of-str iteration
orders change with it, so a composer or renderer that iterated a set where order shows would
give another DSL, another explanation, in the next worker or after a restart).

Each case of ``tests/renderer/cases.yaml`` is rendered for both engines, and each composer
case of ``tests/composer/cases`` composed, in child processes with different seeds; the DSL
is serialised as it goes to the engine (``msearch_lines``: insertion order, not sorted) and
the composition as ``model_dump_json``. Every child's digest of every case must be the same.
Pure code, no engine; the in-process checks (``test_rendering_is_deterministic``, the
composer's reversed-match cases) cannot see a hash-seed dependence, since one process has one
seed.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.checkout import ROOT, checkout_env

pytestmark = pytest.mark.drill

SEEDS = ("0", "1", "4242", "random")

CHILD = """
import hashlib, json, sys
from control_plane.composer import compose
from control_plane.engine.base import msearch_lines
from control_plane.renderer import render
from tests.composer.casefile import all_cases
from tests.renderer.cases import CASES, PROFILE

digests = {}
for name, (plan, args) in sorted(CASES.items()):
    for engine in ("opensearch", "elasticsearch"):
        body = render(plan, PROFILE, **{**args, "engine": engine})
        wire = msearch_lines([("catalog", body)])
        digests[f"render/{name}/{engine}"] = hashlib.sha256(wire.encode("utf-8")).hexdigest()
for case in all_cases():
    if "error" in case.expect:
        continue
    composition = compose(case.policy_set, case.intent, case.matches, case.context)
    digests[f"compose/{case.id}"] = hashlib.sha256(composition.model_dump_json().encode()).hexdigest()
json.dump(digests, sys.stdout, sort_keys=True)
"""


def _digests(seed: str) -> dict[str, str]:
    env = checkout_env(PYTHONHASHSEED=seed)
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    digests: dict[str, str] = json.loads(done.stdout)
    return digests


def test_the_same_cases_give_the_same_bytes_under_every_hash_seed() -> None:
    first, *others = [_digests(seed) for seed in SEEDS]
    assert len([k for k in first if k.startswith("render/")]) >= 20, sorted(first)
    assert len([k for k in first if k.startswith("compose/")]) >= 50, sorted(first)
    for seed, digests in zip(SEEDS[1:], others, strict=True):
        differing = sorted(k for k in first if digests.get(k) != first[k])
        assert digests.keys() == first.keys() and differing == [], (seed, differing)
