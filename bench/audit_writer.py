"""The decision log's write path alone: records per second and the latency of one record,
``T`` threads writing at once through a real JSONL sink with fsync (no engine, no HTTP).

``python -m bench.audit_writer [--threads 1,4,16] [--records N] [--rounds R] [--loop] [--pause-ms P]
[--variant NAME=VAR=VALUE,...]`` runs every variant in a subprocess of its own (e.g.
``base=PYTHONPATH=/path/to/an/older/checkout`` for the code before the background writer;
``GOVSEARCH_AUDIT_COMMIT=queued`` for the queued commit), the variants alternating round by
round, and writes ``bench/results/<UTC date>-audit-writer.json`` with the command, the machine
and the load average. Each record is a failure record (``Recorder.failure``: the record
built, sealed with a key, written); the recorder is closed (drained, checkpointed) inside the
timed span, so ``queued`` cannot report records it has not written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.stats import summary

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def measure_here(
    threads: int, records: int, commit: str, mode: str = "threads", pause_ms: float = 0.0
) -> dict[str, Any]:
    """One measurement in this process (the code on ``sys.path``): ``threads`` threads each
    calling ``Recorder.failure`` (the thread pool's path), or with ``mode="loop"`` as many
    tasks on one event loop each awaiting ``ChainedLog.append_async`` (the path of a search
    a cached plan serves, ADR 0030). The process CPU (user + system, every thread: the
    writer's included) is reported per record. ``pause_ms``: each writer pauses that long after
    each record (a client's round trip between requests; outside the timed wait)."""
    from control_plane.audit.checkpoints import FileCheckpoints
    from control_plane.audit.keys import read_key_file
    from control_plane.audit.record import ErrorOut
    from control_plane.audit.recorder import Recorder
    from control_plane.audit.sinks import JsonlSink
    from control_plane.times import fixed_clock, parse_time

    with tempfile.TemporaryDirectory(prefix="govsearch-bench-audit-") as name:
        directory = Path(name)
        (directory / "audit.key").write_text("bench-1:" + "k" * 48 + "\n")
        options: dict[str, Any] = {
            "instance_id": "bench-writer",
            "keys": read_key_file(directory / "audit.key"),
            "checkpoints": FileCheckpoints(directory / "checkpoints.jsonl"),
            "clock": fixed_clock(parse_time("2026-01-01T00:00:00Z")),
        }
        if commit != "default":
            options["commit"] = commit
        recorder = Recorder(JsonlSink(directory / "decisions.jsonl"), JsonlSink(directory / "events.jsonl"),
                            **options)
        error = ErrorOut(code="engine_unavailable", message="down", status=503)
        each = max(1, records // threads)
        latencies: list[int] = []
        lock = threading.Lock()

        def write(thread: int) -> None:
            mine = []
            for n in range(each):
                started = time.perf_counter_ns()
                recorder.failure(f"req-{thread}-{n}", error)
                mine.append(time.perf_counter_ns() - started)
                if pause_ms:
                    time.sleep(pause_ms / 1000)
            with lock:
                latencies.extend(mine)

        async def write_async(thread: int) -> None:
            for n in range(each):
                data = recorder._failure_data(f"req-{thread}-{n}", error)
                started = time.perf_counter_ns()
                await recorder.decisions.append_async(data)
                latencies.append(time.perf_counter_ns() - started)
                recorder._observe(data, ())
                if pause_ms:
                    await asyncio.sleep(pause_ms / 1000)

        async def loop_load() -> None:
            await asyncio.gather(*(write_async(t) for t in range(threads)))

        workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
        started = time.perf_counter()
        cpu_started = time.process_time()
        loop_cpu_started = time.thread_time()
        if mode == "loop":
            asyncio.run(loop_load())
        else:
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        loop_cpu = time.thread_time() - loop_cpu_started
        recorder.decisions.quiesce()
        writer_cpu = _thread_cpu(recorder.decisions._thread)  # before close ends the thread
        recorder.close()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        written = len((directory / "decisions.jsonl").read_text().splitlines())
    figures: dict[str, Any] = {"records": written, "records_per_s": round(written / elapsed, 1),
                               "latency": summary(latencies),
                               "cpu_ms_per_record": round(cpu * 1000 / written, 4)}
    if writer_cpu is not None:  # the writer thread's own CPU (its whole life: this run's records)
        figures["writer_thread_cpu_ms_per_record"] = round(writer_cpu * 1000 / written, 4)
    if mode == "loop":  # the loop thread (this one): the appends, their wake-ups, the tasks
        figures["loop_thread_cpu_ms_per_record"] = round(loop_cpu * 1000 / written, 4)
    return figures


def _thread_cpu(thread: threading.Thread | None) -> float | None:
    """CPU seconds (user + system) ``thread`` has used, where the platform tells."""
    if thread is None or thread.ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return None
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except OSError:  # the thread ended meanwhile
        return None


def run(variants: dict[str, dict[str, str]], threads: list[int], records: int, rounds: int,
        mode: str = "threads", pause_ms: float = 0.0) -> dict[str, Any]:
    results: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in variants}
    names = list(variants)
    for number in range(rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            extra = variants[name]
            env = {**os.environ, "PYTHONPATH": str(ROOT),
                   **{k: v for k, v in extra.items() if k != "GOVSEARCH_AUDIT_COMMIT"}}
            commit = extra.get("GOVSEARCH_AUDIT_COMMIT", "default")
            # this file run by path, from a neutral directory: the variant's packages are imported
            here = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
            for count in threads:
                output = subprocess.run(
                    [sys.executable, "-c", here, "--here", str(count), str(records), commit, mode,
                     str(pause_ms)],
                    env=env, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                ).stdout
                results[name].setdefault(str(count), []).append(json.loads(output))
    table: dict[str, dict[str, Any]] = {}
    for name, by_count in results.items():
        table[name] = {}
        for threads_key, runs in by_count.items():
            rates = sorted(r["records_per_s"] for r in runs)
            p50s = sorted(r["latency"]["p50_ms"] for r in runs)
            cpus = sorted(r.get("cpu_ms_per_record", 0.0) for r in runs)
            table[name][threads_key] = {"records_per_s_median": rates[len(rates) // 2],
                                  "append_p50_ms_median": p50s[len(p50s) // 2],
                                  "cpu_ms_per_record_median": cpus[len(cpus) // 2]}
            for part in ("writer_thread", "loop_thread"):
                per = sorted(r[f"{part}_cpu_ms_per_record"] for r in runs if f"{part}_cpu_ms_per_record" in r)
                if per:
                    table[name][threads_key][f"{part}_cpu_ms_per_record_median"] = per[len(per) // 2]
            table[name][threads_key]["runs"] = runs
    return {"audit_writer": {"variants": variants, "threads": threads, "records": records, "rounds": rounds,
                             "mode": mode, "pause_ms": pause_ms, "results": table}}


def report(result: dict[str, Any]) -> str:
    bench = result["audit_writer"]
    unit = "task(s) on the loop" if bench.get("mode") == "loop" else "thread(s)"
    lines = [
        f"Command: `{result['command']}` ({result['duration_s']} s); load average"
        f" {result['load_average_at_start']} at start, {result['load_average_at_end']} at end",
        "",
        "| variant | "
        + " | ".join(f"{t} {unit}: records/s, p50 ms, CPU ms/record (writer, loop thread)"
                      for t in bench["threads"])
        + " |",
        "| --- | " + " | ".join("---" for _ in bench["threads"]) + " |",
    ]
    for name, per_threads in bench["results"].items():
        cells = [f"{figures['records_per_s_median']}, {figures['append_p50_ms_median']},"
                 f" {figures.get('cpu_ms_per_record_median', '-')}"
                 f" (writer {figures.get('writer_thread_cpu_ms_per_record_median', '-')},"
                 f" loop {figures.get('loop_thread_cpu_ms_per_record_median', '-')})"
                 for figures in (per_threads[str(t)] for t in bench["threads"])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--here"]:
        mode = args_list[4] if len(args_list) > 4 else "threads"
        pause = float(args_list[5]) if len(args_list) > 5 else 0.0
        print(json.dumps(measure_here(int(args_list[1]), int(args_list[2]), args_list[3], mode, pause)))
        return 0
    from bench import environment
    from bench.http_layer import parse_variant
    from control_plane.times import system_clock

    parser = argparse.ArgumentParser(prog="python -m bench.audit_writer", description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,4,16", help="thread counts (default 1,4,16)")
    parser.add_argument("--records", type=int, default=400, help="records per measurement (default 400)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, variants alternating (default 3)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME[=VAR=VALUE,...]")
    parser.add_argument("--loop", action="store_true",
                        help="tasks on one event loop awaiting append_async (a cached search's path)"
                        " instead of threads")
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="each writer pauses this long after each record (default 0: back to back)")
    parser.add_argument("--out", type=Path, help="default: bench/results/<date>-audit-writer.json")
    args = parser.parse_args(args_list)
    variants = dict(parse_variant(text) for text in args.variant or ["default"])
    threads = [int(t) for t in args.threads.split(",")]
    suffix = ("-loop" if args.loop else "") + (f"-pause-{args.pause_ms:g}ms" if args.pause_ms else "")
    out = args.out or RESULTS / f"{system_clock().date().isoformat()}-audit-writer{suffix}.json"
    command = "python -m bench.audit_writer " + shlex.join(args_list)
    result = environment.recorded(command, out, lambda: run(
        variants, threads, args.records, args.rounds, "loop" if args.loop else "threads", args.pause_ms
    ))
    print(report(result))
    print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
