"""The decision record's CPU per request: building it from a served search, sealing it into
the chain and writing it (a real JSONL sink with fsync, a key ring, checkpoints), against a
real engine (the searches are run once, warm, before the timed part; only the record is timed).

``python -m bench.audit_record --engine-url URL [--records N] [--rounds R] [--threads 1,4]
[--commit group] [--variant NAME=VAR=VALUE,...]`` runs every variant in a subprocess of its own
(e.g. ``base=PYTHONPATH=/path/to/an/older/checkout`` for the code before a change), the
variants alternating round by round, and writes ``bench/results/<UTC date>-audit-record.json``
with the command, the machine and the load average. Per record, it reports:

- ``request_cpu_us``: the CPU time of the request's thread in ``Recorder.decision`` (building
  the record, the metrics, handing it to the writer, waiting for it), ``time.thread_time_ns``
  around each call, median;
- ``process_cpu_us``: the whole process's CPU (user + sys: the request threads, the writer
  thread's sealing, serialising and fsync) over all records, the recorder closed (drained,
  checkpointed) inside the span, divided by the records;
- ``wall_us``: the wall time of ``Recorder.decision`` per call, median (with ``commit: group``
  this includes the wait for the batch's fsync).

The engine must hold the demo catalog and policies (``bench.audit_record`` prepares them
with ``control_plane.bootstrap.prepare`` first, like the governed part: a local engine only).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def measure_here(url: str, threads: int, records: int, commit: str) -> dict[str, Any]:
    """One measurement in this process (the code on ``sys.path``)."""
    from bench.governed import INTENTS, NOW
    from control_plane.audit.checkpoints import FileCheckpoints
    from control_plane.audit.keys import read_key_file
    from control_plane.audit.recorder import Recorder
    from control_plane.audit.sinks import JsonlSink
    from control_plane.bootstrap import profile_of
    from control_plane.config import EngineSettings, Settings
    from control_plane.engine import connect
    from control_plane.service import SearchRequest, SearchService
    from control_plane.times import fixed_clock

    settings = Settings(engine=EngineSettings(url=url, timeout_s=60))
    engine = connect(settings.engine)
    service = SearchService(settings, engine, profile_of(settings))
    served = []
    for intent in INTENTS:
        request = SearchRequest(intent=intent, user_id="shopper-1", market="fr")
        service.search(request, NOW)  # the plan cached: the record of a warm hit is measured
        served.append((request, service.search(request, NOW)))
    with tempfile.TemporaryDirectory(prefix="govsearch-bench-record-") as name:
        directory = Path(name)
        (directory / "audit.key").write_text("bench-1:" + "k" * 48 + "\n")
        recorder = Recorder(
            JsonlSink(directory / "decisions.jsonl"),
            JsonlSink(directory / "events.jsonl"),
            instance_id="bench-writer",
            keys=read_key_file(directory / "audit.key"),
            checkpoints=FileCheckpoints(directory / "checkpoints.jsonl"),
            commit=commit,  # type: ignore[arg-type]
            clock=fixed_clock(NOW),
        )
        each = max(1, records // threads)
        cpu: list[int] = []
        wall: list[int] = []
        lock = threading.Lock()

        def write(thread: int) -> None:
            my_cpu, my_wall = [], []
            for n in range(each):
                request, outcome = served[n % len(served)]
                started, started_cpu = time.perf_counter_ns(), time.thread_time_ns()
                recorder.decision(f"req-{thread}-{n}", request, outcome, client="bench", time=NOW, now=NOW)
                my_cpu.append(time.thread_time_ns() - started_cpu)
                my_wall.append(time.perf_counter_ns() - started)
            with lock:
                cpu.extend(my_cpu)
                wall.extend(my_wall)

        workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
        times = os.times()
        started = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        recorder.close()
        elapsed = time.perf_counter() - started
        after = os.times()
        lines = (directory / "decisions.jsonl").read_text(encoding="utf-8").splitlines()
    service.close()
    engine.close()
    written = len(lines)
    process_cpu = (after.user - times.user) + (after.system - times.system)
    return {
        "records": written,
        "bytes_per_record": round(sum(len(line) + 1 for line in lines) / max(1, written)),
        "request_cpu_us": round(statistics.median(cpu) / 1e3, 1),
        "request_cpu_mean_us": round(statistics.fmean(cpu) / 1e3, 1),
        "process_cpu_us": round(process_cpu / max(1, written) * 1e6, 1),
        "process_sys_us": round((after.system - times.system) / max(1, written) * 1e6, 1),
        "wall_us": round(statistics.median(wall) / 1e3, 1),
        "records_per_s": round(written / elapsed, 1),
    }


def run(url: str, variants: dict[str, dict[str, str]], threads: list[int], records: int, rounds: int,
        commit: str) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in variants}
    names = list(variants)
    for number in range(rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            env = {**os.environ, "PYTHONPATH": str(ROOT), **variants[name]}
            # this file run by path, from a neutral directory: the variant's packages are imported
            here = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
            for count in threads:
                output = subprocess.run(
                    [sys.executable, "-c", here, "--here", url, str(count), str(records), commit],
                    env=env, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                ).stdout
                results[name].setdefault(str(count), []).append(json.loads(output.splitlines()[-1]))
    figures = ("request_cpu_us", "process_cpu_us", "process_sys_us", "wall_us", "records_per_s")
    table: dict[str, dict[str, Any]] = {}
    for name, by_count in results.items():
        table[name] = {
            count: {f"{f}_median": round(statistics.median(run[f] for run in runs), 1) for f in figures}
            | {"bytes_per_record": runs[0]["bytes_per_record"], "runs": runs}
            for count, runs in by_count.items()
        }
    return {"audit_record": {"variants": variants, "threads": threads, "records": records, "rounds": rounds,
                             "commit": commit, "results": table}}


def report(result: dict[str, Any]) -> str:
    bench = result["audit_record"]
    lines = [
        f"Command: `{result['command']}` ({result['duration_s']} s); load average"
        f" {result['load_average_at_start']} at start, {result['load_average_at_end']} at end",
        "",
        "| variant | threads | request thread CPU us (p50) | process CPU us / record (sys) | wall us (p50)"
        " | records/s | bytes / record |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, per_threads in bench["results"].items():
        for count in bench["threads"]:
            f = per_threads[str(count)]
            lines.append(
                f"| {name} | {count} | {f['request_cpu_us_median']} | {f['process_cpu_us_median']}"
                f" ({f['process_sys_us_median']}) | {f['wall_us_median']} | {f['records_per_s_median']}"
                f" | {f['bytes_per_record']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--here"]:
        url, threads, records, commit = args_list[1:5]
        print(json.dumps(measure_here(url, int(threads), int(records), commit)))
        return 0
    from bench import environment
    from bench.governed import NOW
    from bench.http_layer import parse_variant
    from control_plane.bootstrap import prepare
    from control_plane.config import EngineSettings, Settings
    from control_plane.engine import connect
    from control_plane.times import fixed_clock, system_clock

    parser = argparse.ArgumentParser(prog="python -m bench.audit_record", description=__doc__.splitlines()[0])
    parser.add_argument("--engine-url", required=True, help="a local engine (demo data loaded)")
    parser.add_argument("--threads", default="1,4", help="request threads (default 1,4)")
    parser.add_argument("--records", type=int, default=2000, help="records per measurement (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, variants alternating (default 5)")
    parser.add_argument("--commit", default="group", choices=("group", "queued"), help="audit.commit")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME[=VAR=VALUE,...]")
    parser.add_argument("--out", type=Path, help="default: bench/results/<date>-audit-record.json")
    args = parser.parse_args(args_list)
    variants = dict(parse_variant(text) for text in args.variant or ["default"])
    thread_counts = [int(t) for t in args.threads.split(",")]
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-audit-record.json"
    command = "python -m bench.audit_record " + shlex.join(args_list)
    settings = Settings(engine=EngineSettings(url=args.engine_url, timeout_s=60))
    engine = connect(settings.engine)
    try:
        prepare(engine, settings, clock=fixed_clock(NOW))
    finally:
        engine.close()
    result = environment.recorded(command, out, lambda: run(
        args.engine_url, variants, thread_counts, args.records, args.rounds, args.commit
    ))
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
