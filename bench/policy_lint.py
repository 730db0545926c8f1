"""``python -m bench.policy_lint [--size N | --dir DIR] [--now ISO] [--out FILE]``

What ``govsearch policy lint`` costs on a large policy directory, in process and by stage:
``load_directory`` (the policies, their ``file:line`` and the tests, one read), then
:func:`control_plane.lifecycle.lint.lint` with the demo catalog mapping (every check, the
analyses between policies through the trigger index). The directory is ``--dir`` or a
synthetic set of ``--size`` policies (``bench/synthetic.py``, fixed seed) exported one file
per policy. Wall and CPU seconds of each stage and the findings by code are printed as
JSON (and written to ``--out``); needs no engine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import environment, synthetic
from control_plane.lifecycle import lint
from control_plane.lifecycle.export import export_policy_set
from control_plane.lifecycle.suite import load_directory
from control_plane.times import parse_time

ROOT = Path(__file__).resolve().parent.parent


def measure(directory: Path, now: str) -> dict[str, Any]:
    mapping = json.loads((ROOT / "mappings" / "catalog.json").read_text(encoding="utf-8"))
    stages: dict[str, dict[str, float]] = {}
    wall, cpu = time.perf_counter(), time.process_time()
    locations: dict[str, str] = {}
    policy_set, suite = load_directory(directory, locations=locations)
    stages["load"] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    wall, cpu = time.perf_counter(), time.process_time()
    findings = lint.lint(
        policy_set, mapping_fields=lint.mapping_fields_of(mapping), now=parse_time(now),
        locations=locations, tested_policy_ids=suite.policy_ids(), cases=suite.cases,
    )
    stages["lint"] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    return {
        "policies": len(policy_set.policies),
        "stages": {name: {k: round(v, 3) for k, v in values.items()} for name, values in stages.items()},
        "findings": len(findings),
        "by_code": dict(sorted(Counter(f.code for f in findings).items())),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_lint")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, help="lint this directory instead of a synthetic set")
    parser.add_argument("--now", default="2026-12-10T12:00:00Z")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "command": "python -m bench.policy_lint " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": environment.machine(),
        "load_average_at_start": list(os.getloadavg()),
    }
    if args.dir is not None:
        result["lint"] = measure(args.dir, args.now)
    else:
        with tempfile.TemporaryDirectory(prefix="govsearch-bench-lint-") as scratch:
            directory = Path(scratch) / "policies"
            export_policy_set(synthetic.policy_set(args.size, synthetic.Vocabulary.from_catalog()), directory)
            result["lint"] = measure(directory, args.now)
    result["load_average_at_end"] = list(os.getloadavg())
    text = json.dumps(result, indent=2) + "\n"
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
