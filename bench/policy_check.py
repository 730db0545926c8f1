"""``python -m bench.policy_check [--size N] [--rounds R] [--out FILE]``

What ``govsearch policy check`` costs on a large policy directory: a synthetic set of
``--size`` policies (``bench/synthetic.py``, fixed seed; default 10,000) exported one file
per policy, then, interleaved in each round:

- ``cli``: the command itself, ``govsearch policy check DIR``, in a fresh process (imports,
  loading the policies and the tests, validation, the version hash);
- ``load_libyaml``: :func:`control_plane.loader.load_policy_set` in this process, YAML
  parsed by libyaml (``yaml.CSafeLoader``), as the command does;
- ``load_pure_python``: the same with libyaml switched off (the pure-Python PyYAML parser
  the loader used before), for the before/after ratio;
- ``cli_baseline`` (with ``--baseline CHECKOUT``): ``policy check`` of another checkout of
  the project (e.g. ``git worktree add /tmp/base c7eaf99``, the commit before libyaml), run
  from that checkout with this interpreter, on the same directory.

``--no-pure-python`` skips the pure-Python load (minutes per round at 100,000). Wall and
CPU time (user + system: what a step cost without waiting for a core on a shared machine)
are both recorded. Writes one JSON file (default
``bench/results/<UTC date>-policy-check.json``) with the command, the machine, the load
average and the medians; needs no engine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import environment, synthetic
from bench.stats import summary
from control_plane import loader
from control_plane.lifecycle.export import export_policy_set
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent


#: CPU time (user + system) of each timed step, ns: on a shared machine, what the step cost
#: without the time it waited for a core
CPU: dict[str, list[int]] = {}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(directory: Path, checkout: Path = ROOT, name: str = "cli") -> int:
    started, cpu = time.perf_counter_ns(), _children_cpu()
    done = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", "policy", "check", str(directory)],
        capture_output=True, text=True, cwd=checkout, check=False,
    )
    elapsed = time.perf_counter_ns() - started
    CPU.setdefault(name, []).append(int((_children_cpu() - cpu) * 1e9))
    if done.returncode != 0:
        raise SystemExit(f"policy check failed ({done.returncode}): {done.stderr[-2000:]}")
    return elapsed


def _load(directory: Path, fast: bool) -> int:
    saved = loader._FAST_LOADER
    if not fast:
        loader._FAST_LOADER = None
    try:
        started, cpu = time.perf_counter_ns(), time.process_time_ns()
        loader.load_policy_set(directory)
        name = "load_libyaml" if fast else "load_pure_python"
        CPU.setdefault(name, []).append(time.process_time_ns() - cpu)
        return time.perf_counter_ns() - started
    finally:
        loader._FAST_LOADER = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_check")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--baseline", type=Path, help="another checkout to time policy check of")
    parser.add_argument(
        "--no-pure-python", action="store_true",
        help="skip load_pure_python (minutes per round at 100,000 policies)",
    )
    args = parser.parse_args(argv)

    vocabulary = synthetic.Vocabulary.from_catalog()
    policy_set = synthetic.policy_set(args.size, vocabulary)
    samples: dict[str, list[int]] = {"cli": [], "load_libyaml": []}
    if not args.no_pure_python:
        samples["load_pure_python"] = []
    if args.baseline:
        samples["cli_baseline"] = []
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-check-") as scratch:
        directory = Path(scratch) / "policies"
        export_policy_set(policy_set, directory)
        files = sum(1 for _ in directory.rglob("*.yaml"))
        for _ in range(args.rounds):
            samples["cli"].append(_cli(directory))
            samples["load_libyaml"].append(_load(directory, fast=True))
            if not args.no_pure_python:
                samples["load_pure_python"].append(_load(directory, fast=False))
            if args.baseline:
                samples["cli_baseline"].append(_cli(directory, args.baseline.resolve(), "cli_baseline"))
    medians = {name: summary(values) for name, values in samples.items()}
    result: dict[str, Any] = {
        "command": shlex.join(["python", "-m", "bench.policy_check", *(argv or sys.argv[1:])]),
        "measured_at": system_clock().isoformat(),
        "machine": environment.machine(),
        "load_average": os.getloadavg(),
        "baseline": str(args.baseline) if args.baseline else None,
        "policies": args.size,
        "files": files,
        "rounds": args.rounds,
        "target_s": 5.0 if args.size <= 10_000 else 60.0,
        "seconds": {name: round(values["p50_ms"] / 1000, 3) for name, values in medians.items()},
        "cpu_seconds": {name: round(summary(values)["p50_ms"] / 1000, 3) for name, values in CPU.items()},
        "summary_ms": medians,
        "speedup_pure_python_over_libyaml": round(
            medians["load_pure_python"]["p50_ms"] / medians["load_libyaml"]["p50_ms"], 2
        ) if "load_pure_python" in medians else None,
    }
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-policy-check.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"| what | {args.size} policies, p50 s |\n|---|---|")
    for name, seconds in result["seconds"].items():
        print(f"| {name} | {seconds} (CPU {result['cpu_seconds'].get(name)}) |")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
