"""Percolation and compile of two checkouts, interleaved request by request, by set size.

``python -m bench.percolation_compare --base DIR --engine-url URL [--sizes 1000,100000]``
(``DIR``: an earlier checkout, ``git archive COMMIT | tar -x -C DIR``): publishes the
synthetic set of each size (``bench/synthetic.py``) once, with this tree's code, then
starts one worker process per checkout (``PYTHONPATH`` its root, so it runs that
checkout's ``control_plane``), each loading every set into a ``SearchService`` with the
plan cache off, as ``bench/percolation.py`` does. Every round visits the sizes (rotating
which goes first) and, per intent, asks both workers in turn (alternating which goes
first) to time ``matcher.match`` end to end and then ``SearchService.compile``: the same
engine, the same index, the same moment, so the machine's load falls on both alike. Each
worker times its own calls (wall: ``perf_counter_ns``; CPU: ``thread_time_ns``), so the
pipe between the processes is outside every timed span. The first round of each pair of
workers is also compared: the matches (policy, spans, captures) and the compiled
composition (``model_dump_json``) must be identical, or the run stops. Writes JSON (the
command, the load average at start and end, per variant and size the latency summaries,
the CPU per call and the p50 growth from the first to the last size) to ``--out`` or
stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "govsearch-bench-compare"
COHORTS = ("vegan",)


# --- the worker: one checkout's code, driven over stdin/stdout -------------------------


def _worker() -> None:  # pragma: no cover - run in a subprocess
    import control_plane
    from bench import synthetic
    from control_plane import matcher
    from control_plane.bootstrap import profile_of
    from control_plane.config import EngineSettings, SearchSettings, Settings
    from control_plane.engine import connect
    from control_plane.service import SearchRequest, SearchService

    services: dict[str, Any] = {}
    for line in sys.stdin:
        ask = json.loads(line)
        if ask["op"] == "setup":
            settings = Settings(
                engine=EngineSettings(url=ask["url"], timeout_s=60), search=SearchSettings(plan_cache_size=0)
            )
            engine = connect(settings.engine)
            for size, index in ask["indices"].items():
                service = SearchService(settings, engine, profile_of(settings), index=index)
                service.snapshot()  # the load, once, outside the timed calls
                services[size] = service
            _answer({"code": str(Path(control_plane.__file__).parent)})
            continue
        service = services[ask["size"]]
        intent = ask["intent"]
        live, by_id = service.snapshot()
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        if ask["op"] == "match":
            found = matcher.match(
                service.engine, live.index, intent, by_id, cohorts=COHORTS, now=synthetic.NOW
            )
        else:
            compiled = service.compile(SearchRequest(intent=intent, cohorts=COHORTS), synthetic.NOW)
        wall, cpu = time.perf_counter_ns() - wall, time.thread_time_ns() - cpu
        answer: dict[str, Any] = {"wall_ns": wall, "cpu_ns": cpu}
        if ask.get("digest"):
            if ask["op"] == "match":
                text = json.dumps([m.model_dump(mode="json") for m in found])
                answer["count"] = len(found)
            else:
                text = compiled.composition.model_dump_json()
            answer["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        _answer(answer)


def _answer(data: dict[str, Any]) -> None:  # pragma: no cover - run in a subprocess
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


class _Worker:
    def __init__(self, name: str, root: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(root)}
        self.name = name
        # run as a file with this name, not as a script: its directory (``bench``, which has
        # an ``http`` module) must not come first on ``sys.path``
        run = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__worker__')"
        self.process = subprocess.Popen(
            [sys.executable, "-c", run],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=root,
        )

    def ask(self, **data: Any) -> dict[str, Any]:
        stdin: IO[str] = self.process.stdin  # type: ignore[assignment]
        stdout: IO[str] = self.process.stdout  # type: ignore[assignment]
        stdin.write(json.dumps(data) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise SystemExit(f"worker {self.name} ended (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    from bench import synthetic
    from bench.stats import summary
    from control_plane import policy_store
    from control_plane.bootstrap import profile_of
    from control_plane.catalog_loader import load_catalog
    from control_plane.config import EngineSettings, Settings, project_path
    from control_plane.engine import connect
    from control_plane.times import system_clock

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="root of an earlier checkout")
    parser.add_argument("--engine-url", required=True)
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--intents", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    args = parser.parse_args(args_list)
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = Settings(engine=EngineSettings(url=args.engine_url, timeout_s=120))
    engine = connect(settings.engine)
    load_catalog(engine, profile_of(settings), project_path(settings.catalog.file))  # compile's statistics
    vocabulary = synthetic.Vocabulary.from_catalog()
    intents = synthetic.intents(vocabulary, args.intents)
    indices: dict[str, str] = {}
    workers: list[_Worker] = []
    load = _load()
    started = time.perf_counter()
    try:
        for size in sizes:
            policy_set = synthetic.policy_set(size, vocabulary)
            indices[str(size)] = policy_store.publish(engine, f"{PREFIX}-{size}", policy_set, "live")
            print(f"published {size} policies to {indices[str(size)]}", file=sys.stderr)
            del policy_set
        workers = [_Worker("base", Path(args.base).resolve()), _Worker("this", ROOT)]
        code = {w.name: w.ask(op="setup", url=args.engine_url, indices=indices)["code"] for w in workers}
        print(f"workers ready: {code}", file=sys.stderr)
        samples: dict[str, dict[str, dict[int, list[tuple[int, int]]]]] = {
            w.name: {op: {s: [] for s in sizes} for op in ("match", "compile")} for w in workers
        }
        compared = 0
        for round_number in range(args.warmup + args.rounds):
            order = sizes[round_number % len(sizes):] + sizes[: round_number % len(sizes)]
            for size in order:
                for number, intent in enumerate(intents):
                    pair = workers if (round_number + number) % 2 == 0 else workers[::-1]
                    for op in ("match", "compile"):
                        digest = round_number == 0
                        answers = {
                            w.name: w.ask(op=op, size=str(size), intent=intent, digest=digest) for w in pair
                        }
                        if digest:
                            if answers["base"]["digest"] != answers["this"]["digest"]:
                                raise SystemExit(f"{op} differs between the checkouts: {intent!r} at {size}")
                            compared += 1
                        if round_number >= args.warmup:
                            for name, answer in answers.items():
                                samples[name][op][size].append((answer["wall_ns"], answer["cpu_ns"]))
        report: dict[str, Any] = {
            "command": shlex.join(["python", "-m", "bench.percolation_compare", *args_list]),
            "date": system_clock().isoformat(),
            "load_average_start": load,
            "load_average_end": _load(),
            "duration_s": round(time.perf_counter() - started, 1),
            "code": code,
            "sizes": sizes,
            "intents": len(intents),
            "cohorts": list(COHORTS),
            "warmup_rounds": args.warmup,
            "rounds": args.rounds,
            "identical_answers_checked": compared,
            "variants": {},
        }
        first, last = sizes[0], sizes[-1]
        for name, ops in samples.items():
            variant: dict[str, Any] = {}
            for op, by_size in ops.items():
                variant[op] = {
                    str(size): {
                        "latency": summary([wall for wall, _ in pairs]),
                        "cpu": summary([cpu for _, cpu in pairs]),
                    }
                    for size, pairs in by_size.items()
                }
                p50 = {size: variant[op][str(size)]["latency"]["p50_ms"] for size in (first, last)}
                variant[op]["growth_p50"] = round(p50[last] / p50[first], 2)
            report["variants"][name] = variant
        text = json.dumps(report, indent=2)
        if args.out:
            Path(args.out).write_text(text + "\n", encoding="utf-8")
        print(text)
    finally:
        for worker in workers:
            worker.close()
        for label in indices:
            for name in engine.list_indices(f"{PREFIX}-{label}-*"):
                engine.delete_index(name)
    return 0


def _load() -> list[float]:
    with open("/proc/loadavg") as handle:
        return [float(part) for part in handle.read().split()[:3]]


if __name__ == "__main__":
    raise SystemExit(main())
if __name__ == "__worker__":  # pragma: no cover - the workers (:class:`_Worker`)
    _worker()
