"""Percolation with this tree's matcher against an earlier one's, interleaved in one process.

``python -m bench.expansion_compare --base OLD_MATCHER.py --engine-url URL [--size N]``
(``git show COMMIT:control_plane/matcher.py > OLD_MATCHER.py``): publishes the synthetic
set of ``N`` policies (``bench/synthetic.py``), loads it, then times ``match`` of both
matchers on every intent, alternating which goes first, against the same index: the same
engine request, so the difference is the expansion in Python (wall and thread CPU time).
The earlier matcher must read this tree's index layout (ADR 0015 and later). Results are
checked equal on every call. Writes JSON to stdout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import sys
import time
from types import ModuleType
from typing import Any

from bench import synthetic
from bench.stats import summary
from control_plane import matcher, policy_store
from control_plane.config import EngineSettings
from control_plane.engine import connect
from control_plane.times import system_clock

PREFIX = "govsearch-bench-expansion"
COHORTS = ("vegan",)


def _module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("base_matcher", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="an earlier control_plane/matcher.py")
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args(argv)
    engine = connect(EngineSettings(url=args.engine_url, timeout_s=60))
    base = _module(args.base)
    vocabulary = synthetic.Vocabulary.from_catalog()
    intents = synthetic.intents(vocabulary, 50)
    policy_set = synthetic.policy_set(args.size, vocabulary)
    index = policy_store.write_index(engine, f"{PREFIX}-{args.size}", policy_set)
    try:
        live = policy_store.read_index(engine, index)
        maps = {"base": base.PolicyMap(live.policy_set.policies), "this": live.policy_set.lookups().by_id}
        modules = {"base": base, "this": matcher}
        wall: dict[str, list[int]] = {"base": [], "this": []}
        cpu: dict[str, float] = {"base": 0.0, "this": 0.0}
        heavy: dict[str, list[int]] = {"base": [], "this": []}
        load = _load()
        for round_number in range(args.rounds + 1):  # the first round warms up
            for number, intent in enumerate(intents):
                order = ("base", "this") if (round_number + number) % 2 == 0 else ("this", "base")
                results = {}
                for name in order:
                    started, thread = time.perf_counter_ns(), time.thread_time()
                    results[name] = modules[name].match(
                        engine, index, intent, maps[name], cohorts=COHORTS, now=synthetic.NOW
                    )
                    elapsed = time.perf_counter_ns() - started
                    if round_number:
                        wall[name].append(elapsed)
                        cpu[name] += time.thread_time() - thread
                        if len(results[name]) > 1000:
                            heavy[name].append(elapsed)
                if results["base"] != results["this"]:
                    raise SystemExit(f"the matchers disagree on {intent!r}")
        report: dict[str, Any] = {
            "command": shlex.join(["python", "-m", "bench.expansion_compare", *(argv or sys.argv[1:])]),
            "date": system_clock().isoformat(),
            "load_average_start": load,
            "load_average_end": _load(),
            "policies": args.size,
            "intents": len(intents),
            "rounds": args.rounds,
            "latency": {name: summary(samples) for name, samples in wall.items()},
            "over_1000_matches": {name: summary(samples) for name, samples in heavy.items()},
            "thread_cpu_s": {name: round(value, 2) for name, value in cpu.items()},
        }
        print(json.dumps(report, indent=2))
    finally:
        engine.delete_index(index)
    return 0


def _load() -> list[float]:
    with open("/proc/loadavg") as handle:
        return [float(part) for part in handle.read().split()[:3]]


if __name__ == "__main__":
    raise SystemExit(main())
