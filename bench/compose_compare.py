"""``bench.compose`` on an earlier tree and on this one, alternating, under the same load.

``python -m bench.compose_compare --before DIR --out PREFIX [--rounds N]``: ``DIR`` is an
earlier checkout (``git archive COMMIT | tar -x -C DIR``). Each round runs ``python -m
bench.compose`` once from ``DIR`` and once from this tree (each in its own process, so
neither inherits the other's caches or heap), writing ``PREFIX-before-K.json`` and
``PREFIX-after-K.json``, and then ``PREFIX-summary.json``: per matched count, the median
over the rounds of each run's p50 / p95 / p99 (wall and thread CPU time), each run's own
CPU time (user + system, from ``getrusage`` of the child) and the load average around it.
The bench script itself is the one of each tree: to compare the code alone, copy this
tree's ``bench/compose.py`` into ``DIR`` first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent


def _run(tree: Path, out: Path) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, "-m", "bench.compose", str(out)],
        cwd="/", env=env, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"file": out.name, "process_cpu_s": round(cpu, 2), "load": [load, os.getloadavg()[0]]}


def _summary(files: list[Path]) -> dict[str, Any]:
    sizes: dict[int, dict[str, list[float]]] = {}
    for path in files:
        for size in json.loads(path.read_text(encoding="utf-8"))["compose"]["sizes"]:
            figures = sizes.setdefault(size["matched"], {})
            for what in ("latency", "cpu"):
                for q in ("p50_ms", "p95_ms", "p99_ms"):
                    figures.setdefault(f"{what}_{q}", []).append(size[what][q])
    return {
        str(matched): {name: round(statistics.median(values), 3) for name, values in figures.items()}
        for matched, figures in sorted(sizes.items())
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="an earlier checkout")
    parser.add_argument("--out", required=True, help="path prefix of the JSON files")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": HERE}
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for round_ in range(1, args.rounds + 1):
        for name, tree in trees.items():
            runs[name].append(_run(tree, Path(f"{args.out}-{name}-{round_}.json").resolve()))
    result = {
        "command": "python -m bench.compose_compare " + " ".join(argv if argv is not None else sys.argv[1:]),
        "runs": runs,
        "median_of_runs": {
            name: _summary([Path(f"{args.out}-{name}-{k}.json") for k in range(1, args.rounds + 1)])
            for name in trees
        },
    }
    text = json.dumps(result, indent=2) + "\n"
    Path(f"{args.out}-summary.json").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
