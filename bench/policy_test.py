"""``python -m bench.policy_test [--size N] [--cases C] [--engine-url URL] [--out FILE] [--profile]``

What ``govsearch policy test DIR`` costs on a large policy directory: a synthetic set of
``--size`` policies (``bench/synthetic.py``, fixed seed) exported one file per policy, with
``--cases`` test cases in ``tests/cases.yaml`` (each the first trigger text of a plain,
always-on ``phrase`` or ``exact`` policy as its intent, expecting that policy matched, ``now``
pinned), against one real engine holding the demo catalog (compile reads its price
statistics). Measured:

- ``cli_first``: the command in a fresh process, the set's version index not yet written
  (read the directory, publish it in bulk batches, load it back, run every case);
- ``cli_again``: the same command again (the version index exists: no publish);
- ``cli_baseline`` (with ``--baseline CHECKOUT``): the command of another checkout (e.g.
  ``git worktree add /tmp/base e183150``), then ``cli_again_after_baseline``, this one's
  again, so the two compare back to back;
- in process, by stage: ``load`` (:func:`control_plane.lifecycle.suite.load_directory`),
  ``service`` (:func:`control_plane.bootstrap.directory_service`: the load the command does
  and the index, already written), ``first_snapshot`` (the service reads the set back and
  builds its lookups), ``run_suite`` (every case; ``per_case_ms`` its share per case).

Wall and CPU time (user + system; the engine's own CPU is not counted) of each. With
``--profile`` the in-process ``run_suite`` runs under cProfile and the top functions by
cumulative time are recorded. Without ``--engine-url`` a local engine is started on a free
port and stopped after.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench import environment, synthetic
from control_plane.bootstrap import directory_service, profile_of
from control_plane.catalog_loader import load_catalog
from control_plane.config import EngineSettings, PolicySettings, Settings, project_path
from control_plane.engine import Engine
from control_plane.lifecycle.export import export_policy_set
from control_plane.lifecycle.runner import run_suite
from control_plane.lifecycle.suite import load_directory
from control_plane.policy import PolicySet
from control_plane.times import iso, system_clock

RESULTS = Path(__file__).resolve().parent / "results"
PREFIX = "govsearch-bench-policy-test"


def cases(policy_set: PolicySet, count: int) -> list[dict[str, Any]]:
    """``count`` cases, each a plain always-on policy's first text expecting it matched."""
    found: list[dict[str, Any]] = []
    for policy in policy_set.policies:
        if len(found) == count:
            break
        plain = policy.enabled and not policy.cohorts and policy.active is None
        if plain and policy.trigger.kind in ("phrase", "exact"):
            found.append({
                "name": f"{policy.id} matches its first text", "intent": policy.trigger.values[0],
                "now": iso(synthetic.NOW), "expect": {"matched": [policy.id]},
            })
    return found


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cli(directory: Path, url: str, checkout: Path | None = None) -> dict[str, Any]:
    """The command in a fresh process: this project's, or (``checkout``) another checkout's
    run from its own directory with this interpreter."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_")},
           "GOVSEARCH_ENGINE_URL": url, "GOVSEARCH_POLICIES_INDEX_PREFIX": PREFIX}
    command = [sys.executable, "-m", "control_plane.cli"] if checkout else [str(environment.GOVSEARCH)]
    wall, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run(
        [*command, "policy", "test", str(directory), "--json"],
        env=env, capture_output=True, text=True, check=False, cwd=checkout,
    )
    timing = {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(_children_cpu() - cpu, 2)}
    if done.returncode != 0:
        raise SystemExit(f"policy test failed ({done.returncode}): {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    return timing | {"total": report["total"], "failed": report["failed"]}


def _timed(stages: dict[str, Any], name: str, step: Any) -> Any:
    wall, cpu = time.perf_counter(), time.process_time()
    value = step()
    stages[name] = {
        "wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
    }
    return value


def measure(
    engine: Engine, url: str, size: int, count: int, profile: bool, baseline: Path | None = None
) -> dict[str, Any]:
    settings = Settings(
        engine=EngineSettings(url=url, timeout_s=120), policies=PolicySettings(index_prefix=PREFIX)
    )
    load_catalog(engine, profile_of(settings), project_path(settings.catalog.file))
    result: dict[str, Any] = {"size": size}
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-test-") as scratch:
        directory = Path(scratch) / "policies"
        policy_set = synthetic.policy_set(size, synthetic.Vocabulary.from_catalog())
        export_policy_set(policy_set, directory)
        written = cases(policy_set, count)
        (directory / "tests").mkdir(exist_ok=True)
        cases_file = directory / "tests" / "cases.yaml"
        cases_file.write_text(yaml.safe_dump(written, sort_keys=False), encoding="utf-8")
        result["cases"] = len(written)
        result["cli_first"] = _cli(directory, url)
        result["cli_again"] = _cli(directory, url)
        if baseline is not None:
            result["cli_baseline"] = _cli(directory, url, baseline) | {"checkout": str(baseline)}
            result["cli_again_after_baseline"] = _cli(directory, url)
        stages: dict[str, Any] = {}
        _, suite = _timed(stages, "load", lambda: load_directory(directory))
        service = _timed(stages, "service", lambda: directory_service(engine, settings, directory))
        try:
            _timed(stages, "first_snapshot", service.snapshot)
            profiler = cProfile.Profile() if profile else None
            if profiler is not None:
                profiler.enable()
            report = _timed(stages, "run_suite", lambda: run_suite(service, suite, now=synthetic.NOW))
            if profiler is not None:
                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
                result["profile_run_suite"] = text.getvalue().splitlines()[:60]
        finally:
            service.close()
        per_case = 1000 * stages["run_suite"]["cpu_s"] / max(1, len(written))
        stages["run_suite"]["per_case_cpu_ms"] = round(per_case, 2)
        result["in_process"] = stages
        result["passed"] = f"{report.total - report.failed}/{report.total}"
    for name in engine.list_indices(f"{PREFIX}*"):
        engine.delete_index(name)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.policy_test")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--engine-url", help="engine to use (default: start a local one)")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process run")
    parser.add_argument(
        "--baseline", type=Path, help="also time the command of this checkout (e.g. a git worktree of"
        " the commit before), after the index is written, then this one's again",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    command = "python -m bench.policy_test " + " ".join(argv if argv is not None else sys.argv[1:])
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-policy-test-{args.size}.json"
    result = environment.recorded_run(
        command, args.engine_url, args.heap, out,
        lambda engine, url: measure(engine, url, args.size, args.cases, args.profile, args.baseline),
    )
    print(json.dumps({k: v for k, v in result.items() if k != "profile_run_suite"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
