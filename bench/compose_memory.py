"""What the composer's and the renderer's kept tables hold once many policies were composed.

``python -m bench.compose_memory``: the 10,000-policy synthetic set of ``bench.compose``;
every plain policy composed and rendered once (the set in chunks of 60, each giving a
50-matched request as ``bench.compose.scenario`` builds it), under ``tracemalloc``: the
memory still allocated afterwards (the tables kept per policy, body, pair and fragment; no
composition is kept) and per distinct policy composed, as JSON. Run it from two trees
(``cd DIR && python -m bench.compose_memory``) to compare what a change keeps.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
import types
from typing import Any

from bench import synthetic
from bench.compose import PROFILE, SET_SIZE, scenario
from control_plane.catalog.profile import load_profile
from control_plane.catalog.stats import category_price_stats
from control_plane.composer import ComposeContext, compose
from control_plane.renderer import render

CHUNK = 60


def run() -> dict[str, Any]:
    vocabulary = synthetic.Vocabulary.from_catalog()
    policy_set = synthetic.policy_set(SET_SIZE, vocabulary)
    policy_set.lookups()
    profile = load_profile(PROFILE, check=False)
    products = [json.loads(line) for line in synthetic.CATALOG.read_text(encoding="utf-8").splitlines()]
    stats = category_price_stats(products, profile)
    del products
    context = ComposeContext(cohorts=("vegan",), category_field=profile.category, price_stats=stats)
    policies = list(policy_set.policies)
    requests = [
        scenario(types.SimpleNamespace(policies=policies[start : start + CHUNK]), 50)  # type: ignore[arg-type]
        for start in range(0, len(policies), CHUNK)
    ]
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    composed: set[str] = set()
    for intent, matches in requests:
        composition = compose(policy_set, intent, matches, context)
        render(composition.plan, profile, engine="opensearch", tier="strict")
        composed.update(match.policy_id for match in matches)
    del composition
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return {
        "command": "python -m bench.compose_memory",
        "requests": len(requests),
        "distinct_policies_composed": len(composed),
        "kept_bytes": kept,
        "bytes_per_policy": round(kept / len(composed)),
    }


def main() -> int:
    print(json.dumps(run(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
