"""``python -m bench.lifecycle [--rounds N] [--out FILE] [--engine-url URL]``

What the workflow costs, on the demo set and a real engine: applying a directory to
staging, running its test suite, promoting, rolling back and disabling (each an alias move
plus its history event); and what a promotion costs the searches running meanwhile:
governed search latency with no promotion, and while a thread promotes and rolls back in a
loop. Writes one JSON result file (default ``bench/results/<UTC date>-lifecycle.json``) and
prints Markdown.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench import environment
from bench.stats import summary, timed
from control_plane.bootstrap import prepare, profile_of, publish_policies
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine
from control_plane.lifecycle.keys import Principal
from control_plane.lifecycle.workflow import Workflow
from control_plane.service import SearchRequest, SearchService
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent
INTENTS = ["cheap chocolate", "chocolat sans arachide", "oranges", "orange juice", "soda", "creamer"]
CREAMERS = """id: coffee-creamers
title: creamers
owner: bench
trigger: {phrase: [creamer]}
rules:
  - category: {values: [Coffee creamers]}
"""
AUTHOR = Principal("bench-author", frozenset({"author"}))
APPROVER = Principal("bench-approver", frozenset({"approver"}))


def candidate_directory(root: Path) -> Path:
    directory = root / "policies"
    shutil.copytree(ROOT / "policies", directory)
    (directory / "creamers.yaml").write_text(CREAMERS, encoding="utf-8")
    return directory


def search_latencies(service: SearchService, stop: threading.Event, out: list[int]) -> None:
    i = 0
    while not stop.is_set():
        request = SearchRequest(intent=INTENTS[i % len(INTENTS)])
        started = time.perf_counter_ns()
        service.search(request, system_clock())
        out.append(time.perf_counter_ns() - started)
        i += 1


def searches_for(service: SearchService, seconds: float, churn: Any = None) -> dict[str, Any]:
    """Search in a loop for ``seconds`` (``churn`` running in another thread meanwhile)."""
    stop, samples = threading.Event(), list[int]()
    worker = threading.Thread(target=search_latencies, args=(service, stop, samples))
    worker.start()
    moves = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if churn is not None:
            churn()
            moves += 1
        time.sleep(0.05)
    stop.set()
    worker.join()
    return {"latency": summary(samples), "alias_moves": moves}


def run(engine: Engine, url: str, rounds: int, seconds: float) -> dict[str, Any]:
    base = Settings(engine=EngineSettings(url=url, timeout_s=30))
    prepare(engine, base, clock=system_clock)  # the catalog and the demo set
    prefix = f"bench-lifecycle-{uuid.uuid4().hex[:8]}"
    settings = base.model_copy(update={"policies": base.policies.model_copy(update={"index_prefix": prefix})})
    profile = profile_of(settings)
    workflow = Workflow(settings, engine, profile, clock=system_clock)
    timings: dict[str, list[int]] = {
        "apply": [], "test": [], "approve": [], "promote": [], "rollback": [], "disable": []
    }
    try:
        publish_policies(engine, settings, ROOT / "policies", "live", clock=system_clock)
        original = workflow.environment("live").version
        with tempfile.TemporaryDirectory() as scratch:
            directory = candidate_directory(Path(scratch))
            elapsed, state = timed(lambda: workflow.apply_directory(AUTHOR, directory, "bench"))
            timings["apply"].append(elapsed)
            version = state.version
            for _ in range(rounds):
                elapsed, report = timed(lambda: workflow.test(AUTHOR, version))
                timings["test"].append(elapsed)
            cases = report.total
            timings["approve"].append(timed(lambda: workflow.approve(APPROVER, version, None))[0])
        for _ in range(rounds):
            timings["promote"].append(timed(lambda: workflow.promote(APPROVER, version, None))[0])
            timings["rollback"].append(timed(lambda: workflow.rollback(APPROVER, original, None))[0])
        timings["disable"].append(timed(lambda: workflow.disable(APPROVER, "cheap", "bench"))[0])
        workflow.rollback(APPROVER, original, None)

        service = SearchService(settings, engine, profile)
        toggle = {"live": original}

        def churn() -> None:
            if toggle["live"] == original:
                workflow.promote(APPROVER, version, None)
                toggle["live"] = version
            else:
                workflow.rollback(APPROVER, original, None)
                toggle["live"] = original

        try:
            steady = searches_for(service, seconds)
            during = searches_for(service, seconds, churn)
        finally:
            service.close()
        return {
            "policies": len(workflow.policy_set(original).policies) + 1,
            "test_cases": cases,
            "rounds": rounds,
            "workflow_ms": {name: summary(samples) for name, samples in timings.items()},
            "search_steady": steady,
            "search_during_promotions": during,
            "search_seconds": seconds,
        }
    finally:
        for name in engine.list_indices(prefix + "*"):
            engine.delete_index(name)


def markdown(result: dict[str, Any]) -> str:
    bench = result["lifecycle"]
    lines = [
        f"Command: `{result['command']}` ({result['duration_s']} s); commit {result['machine']['commit']},"
        f" load average {', '.join(f'{v:.2f}' for v in result['load_average_at_start'])} at start",
        "",
        f"Workflow calls on the demo set plus one policy ({bench['policies']} policies,"
        f" {bench['test_cases']} test cases), {bench['rounds']} rounds:",
        "",
        "| call | n | p50 ms | p95 ms | max ms |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, lat in bench["workflow_ms"].items():
        lines.append(f"| {name} | {lat['n']} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['max_ms']} |")
    lines += [
        "",
        f"Governed search latency, one thread, {bench['search_seconds']} s each:",
        "",
        "| while | n | p50 ms | p95 ms | p99 ms | max ms | alias moves |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    labels = (("nothing moves", "search_steady"), ("promote/rollback loop", "search_during_promotions"))
    for label, key in labels:
        lat = bench[key]["latency"]
        lines.append(
            f"| {label} | {lat['n']} | {lat['p50_ms']} | {lat['p95_ms']} | {lat['p99_ms']} | {lat['max_ms']}"
            f" | {bench[key]['alias_moves']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lifecycle", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="repetitions of each call (default 10)")
    parser.add_argument("--seconds", type=float, default=15.0, help="search loop duration, each (default 15)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>-lifecycle.json)")
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="512m")
    args = parser.parse_args(argv)
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-lifecycle.json"
    command = "python -m bench.lifecycle " + shlex.join(sys.argv[1:] if argv is None else argv)

    def measure(engine: Engine, url: str) -> dict[str, Any]:
        return {"lifecycle": run(engine, url, args.rounds, args.seconds)}

    result = environment.recorded_run(command, args.engine_url, args.heap, out, measure)
    print(markdown(result))
    print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
