"""Compose + render counted in instructions (valgrind), an earlier tree against this one.

``python -m bench.compose_instructions --before DIR [--matched 50,10,1] [--calls 200]``:
on a machine shared with other work, times move with the load (ADR 0040 was measured at
load 7-11 on two cores), but the instructions a call executes do not. For each tree (DIR,
an earlier checkout as for ``bench.compose_compare``, and this one) and each matched count,
a child process composes and renders ``bench.compose``'s scenario (the same policies,
intent, matches and context) under ``valgrind --tool=callgrind`` twice, 5 and 5 + CALLS
times, and the difference divided by CALLS is the instructions per compose + render (the
set, the imports and the warm-up cancel out). The 10,000-policy set is built once, here,
natively, and handed to the children as its first 300 policies (the scenario's 50 are among
them, in the same order; valgrind runs Python about 50 times slower). Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
PREFIX = 300

CHILD = """
import gc, pickle, sys
from bench import compose as bench_compose
from control_plane.catalog.profile import load_profile
from control_plane.composer import ComposeContext, compose
from control_plane.loader import build_policy_set
from control_plane.renderer import render
with open(sys.argv[1], "rb") as handle:
    given = pickle.load(handle)
policy_set = build_policy_set(given["policies"], given["vocabularies"], given["governance"])
policy_set.lookups()
gc.freeze()
profile = load_profile(bench_compose.PROFILE, check=False)
context = ComposeContext(cohorts=("vegan",), category_field=profile.category, price_stats=given["stats"])
intent, matches = bench_compose.scenario(policy_set, int(sys.argv[2]))
for _ in range(5 + int(sys.argv[3])):
    composition = compose(policy_set, intent, matches, context)
    render(composition.plan, profile, engine="opensearch", tier="strict")
"""


def _prefix(path: Path) -> None:
    """The bench's set (its first policies), vocabularies, governance and statistics."""
    from bench import compose as bench_compose
    from bench import synthetic
    from control_plane.catalog.profile import load_profile
    from control_plane.catalog.stats import category_price_stats

    policy_set = synthetic.policy_set(bench_compose.SET_SIZE, synthetic.Vocabulary.from_catalog())
    profile = load_profile(bench_compose.PROFILE, check=False)
    products = [json.loads(line) for line in synthetic.CATALOG.read_text(encoding="utf-8").splitlines()]
    given = {
        "policies": list(policy_set.policies[:PREFIX]),
        "vocabularies": policy_set.vocabularies,
        "governance": policy_set.governance,
        "stats": category_price_stats(products, profile),
    }
    path.write_bytes(pickle.dumps(given))


def _instructions(tree: Path, given: Path, matched: int, calls: int, scratch: Path) -> int:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={scratch / 'callgrind.out'}",
            sys.executable, "-c", CHILD, str(given), str(matched), str(calls),
        ],
        cwd=tree, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count from valgrind: {done.stderr[-500:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="an earlier checkout")
    parser.add_argument("--matched", default="50,10,1", help="matched counts (default 50,10,1)")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": HERE}
    given_args = argv if argv is not None else sys.argv[1:]
    result: dict[str, Any] = {
        "command": "python -m bench.compose_instructions " + " ".join(given_args),
        "calls": args.calls,
        "instructions_per_call": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        given = Path(scratch) / "given.pickle"
        _prefix(given)
        for matched in [int(m) for m in args.matched.split(",")]:
            per_call = {}
            for name, tree in trees.items():
                base = _instructions(tree, given, matched, 0, Path(scratch))
                full = _instructions(tree, given, matched, args.calls, Path(scratch))
                per_call[name] = round((full - base) / args.calls)
            per_call["after / before"] = round(per_call["after"] / per_call["before"], 3)
            result["instructions_per_call"][str(matched)] = per_call
    text = json.dumps(result, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
