"""``python -m bench.run [--quick] [--sizes 1000,10000,100000] [--parts ...] [--out FILE] [--engine-url URL]``

The product's figure sheet (issue 14): in one run against one engine, the pure compose +
render; governed search in process against the same DSL sent directly; governed search over
HTTP (``govsearch serve``) against the raw engine, single client warm and cold, throughput
at concurrency 1/4/16 (``bench.http``); percolation and compile by policy-set size, with
publish, first load and the engine's memory at each size; ``govsearch policy check`` and
``policy publish`` at 10,000 and 100,000 policies (``bench.tooling``). Writes one JSON
result file (default ``bench/results/<UTC date>.json``) with the command, the machine and the
load average at start and end, and a plot of latency against policy count next to it
(``.png``), then prints the sheet as Markdown, starting with issue 14's targets, measured
(``bench.targets``). Without ``--engine-url`` it starts a local engine of its own on a free
port and stops it after. ``--sheet RESULT.json`` prints the sheet of an earlier run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import compose, environment, governed, http, percolation, plot, targets, tooling
from bench.stats import paired_text
from control_plane.engine import Engine
from control_plane.times import system_clock

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Plan:
    """Policy-set sizes; then (intents, warm-up rounds, rounds) for each benchmark; compose:
    matched-policy counts, warm-up rounds, rounds; http: seconds of each throughput phase,
    single-client rounds; tooling: policy-set sizes, ``policy check`` rounds."""

    sizes: list[int]
    percolation: tuple[int, int, int]
    governed: tuple[int, int, int]
    compose: tuple[list[int], int, int]
    http: tuple[float, int]
    tooling: tuple[list[int], int]


FULL = Plan(
    sizes=[1000, 10000, 100000], percolation=(50, 2, 10), governed=(20, 3, 30),
    compose=([1, 10, 50], 50, 500), http=(10.0, 20), tooling=([10000, 100000], 3),
)
QUICK = Plan(
    sizes=[100, 1000], percolation=(20, 1, 3), governed=(10, 1, 5), compose=([1, 10, 50], 5, 30),
    http=(1.0, 3), tooling=([1000], 1),
)


#: in the order they run: the pure part, then the demo set (in process, over HTTP), then the
#: synthetic sets (percolation, then the tooling on the same sets)
PARTS = ("compose", "governed", "http", "percolation", "tooling")


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be comma-separated integers, not {text!r}") from None
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError("give at least one size, each >= 1")
    return sizes


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few rounds (< 2 minutes)")
    parser.add_argument("--out", type=Path, help="result file (default bench/results/<date>.json)")
    parser.add_argument("--engine-url", help="engine to measure against (default: start a local one)")
    parser.add_argument("--heap", default="1g", help="heap of the local engine it starts (default 1g)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic policy indices")
    parser.add_argument(
        "--sizes", type=_sizes,
        help="policy-set sizes of percolation and tooling, e.g. 1000,10000 (default 1000,10000,100000"
        " and 10000,100000)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                        help="govsearch serve --workers of the http part (default: the number of CPUs)")
    parser.add_argument("--sheet", type=Path, metavar="RESULT",
                        help="print the figure sheet of an earlier result file and exit (no measuring)")
    parser.add_argument(
        "--parts", default=",".join(PARTS), help=f"what to measure, of {','.join(PARTS)} (default all)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.sheet:
        print(markdown(json.loads(args.sheet.read_text(encoding="utf-8"))))
        return 0
    plan = QUICK if args.quick else FULL
    sizes = args.sizes or plan.sizes
    tooling_sizes = args.sizes or plan.tooling[0]
    parts = {part.strip() for part in args.parts.split(",")}
    if not parts <= set(PARTS):
        raise SystemExit(f"unknown part(s): {', '.join(sorted(parts - set(PARTS)))}")
    stamp = system_clock().date().isoformat() + ("-quick" if args.quick else "")
    out = args.out or RESULTS / f"{stamp}.json"
    command = "python -m bench.run " + shlex.join(sys.argv[1:] if argv is None else argv)

    def measure(engine: Engine, url: str) -> dict[str, Any]:
        measured: dict[str, Any] = {"mode": "quick" if args.quick else "full", "part_s": {}}

        def part(name: str, call: Callable[[], Any]) -> None:
            started = time.perf_counter()
            try:
                measured[name] = call()
            finally:
                measured["part_s"][name] = round(time.perf_counter() - started, 1)

        def percolation_part() -> dict[str, Any]:
            try:
                return percolation.run(engine, url, sizes, *plan.percolation)
            finally:
                if not args.keep:
                    percolation.clean_up(engine, sizes)

        if "compose" in parts:
            part("compose", lambda: compose.run(*plan.compose))
        if "governed" in parts:
            part("governed", lambda: governed.run(engine, url, *plan.governed))
        if "http" in parts:
            part("http", lambda: http.run(engine, url, args.workers, *plan.http)["http"])
        if "percolation" in parts:
            part("percolation", percolation_part)
        if "tooling" in parts:
            part("tooling", lambda: tooling.run(engine, url, tooling_sizes, plan.tooling[1]))
        measured["targets"] = [verdict.as_json() for verdict in targets.evaluate(measured)]
        return measured

    result = environment.recorded_run(command, args.engine_url, args.heap, out, measure)
    if "percolation" in result:
        plot.latency_by_size(result, out.with_suffix(".png"))
    print(markdown(result))
    print(f"\nwritten to {out} in {result['duration_s']} s", file=sys.stderr)
    return 0


def _load(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _throughput_heading(served: dict[str, Any]) -> str:
    if "throughput_slices" in served:
        return (f"Throughput, {served['seconds']} s per variant and level in {served['throughput_slices']}"
                f" slices (every variant in every slice, the order reversed from one to the next), after"
                f" {served['engine_warmup_s']} s warming the engine; each client thread with its own"
                " connection:")
    if "throughput_halves" not in served:  # a result from before the halves
        return f"Throughput, {served['seconds']} s per phase, each client thread with its own connection:"
    return (f"Throughput, {served['seconds']} s per variant and level in two halves (the second in the"
            f" reverse order), after {served['engine_warmup_s']} s warming the engine; each client thread"
            " with its own connection:")


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def markdown(result: dict[str, Any]) -> str:
    machine, engine = result["machine"], result["engine"]
    lines = [
        f"Command: `{result['command']}` ({result['mode']}, {result['duration_s']} s)",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu_model']}), {machine['ram_gib']} GiB RAM,"
        f" {machine['os']}, Python {machine['python']}, commit {machine['commit']};"
        f" load average (1, 5, 15 min) {_load(result['load_average_at_start'])} at start,"
        f" {_load(result['load_average_at_end'])} at end",
        f"Engine: {engine['distribution']} {engine['version']} (Lucene {engine['lucene']}),"
        f" heap {engine['heap_max_mib']} MiB, JVM {', '.join(engine['jvm'])}",
        *_durations(result.get("part_s")),
        "",
        *targets.table(targets.evaluate(result)),
    ]
    if "http" in result:
        lines += _http_lines(result["http"])
    if "compose" in result:
        lines += _compose_lines(result["compose"])
    if "percolation" in result:
        lines += _percolation_lines(result["percolation"])
    if "tooling" in result:
        lines += _tooling_lines(result["tooling"])
    if "governed" in result:
        lines += _governed_lines(result["governed"])
    return "\n".join(lines)


def _durations(part_s: dict[str, float] | None) -> list[str]:
    if not part_s:
        return []
    return ["Time per part (s): " + ", ".join(f"{name} {seconds}" for name, seconds in part_s.items())]


def _ratio(value: float, raw: float) -> str:
    return f"{value / raw:.2f}x" if raw else "-"


LATENCY_LABELS = (
    ("governed", "warm"), ("governed_new_user", "new user"), ("governed_cold", "cold"),
    ("governed_written", "warm, written"), ("pipeline", "pipeline"), ("floor", "floor"), ("raw", "raw"),
)
"""the single-client variants, as the sheet names them, in its order"""


def _latency_table(heading: str, latency: dict[str, Any], labels: tuple[tuple[str, str], ...]) -> list[str]:
    """The single-client table: each variant measured (a result from before a variant
    existed lacks it) with its percentiles and their ratios to raw."""
    raw = latency["raw"]
    lines = [
        _row([heading, "p50 ms", "p95 ms", "p99 ms", "p50 / raw", "p95 / raw", "p99 / raw"]),
        _row(["---"] * 7),
    ]
    for variant, label in labels:
        if variant not in latency:
            continue
        lat = latency[variant]
        lines.append(_row([
            label, lat["p50_ms"], lat["p95_ms"], lat["p99_ms"],
            *(_ratio(lat[stat], raw[stat]) for stat in ("p50_ms", "p95_ms", "p99_ms")),
        ]))
    return lines


def _http_lines(served: dict[str, Any]) -> list[str]:
    single = served["single_client_warm"]["latency"]
    lines = [
        "",
        f"Over HTTP (`govsearch serve --workers {served['workers']}`, tier batching"
        f" {served['tier_batching']}) against the same final DSL sent raw to the engine:"
        f" {len(served['intents'])} intents x {served['rounds']} single-client rounds, variants"
        " alternating; new user = a new `user_id` on every request (the plan shared by every user,"
        " the purchases lookup); cold = a second server with the plan cache off (every request"
        " percolates, composes and renders); written = a third server with `audit.commit: written`"
        " (ADR 0034); pipeline = `bench.floor --pipeline`, govsearch's pipeline and record without"
        " its HTTP stack; floor = `bench.floor`, the least a Python front end costs: the request"
        " read, the intent's warm `_msearch` sent through govsearch's engine client, the engine's"
        " bytes returned, no governing",
        "",
        *_latency_table("single client", single, LATENCY_LABELS),
    ]
    lines += _lean_lines(served.get("single_client_lean"))
    lines += [
        "",
        _throughput_heading(served),
        "",
        _row(["concurrency (connections)", "req/s: governed, written, pipeline, floor, raw",
              "ratio to raw: governed, written, pipeline, floor",
              "governed / raw slice by slice: median (lowest-highest)",
              "written / raw slice by slice",
              "CPU ms per governed request (service, engine)", "per written request",
              "per pipeline request", "per floor request", "engine CPU ms per raw request"]),
        _row(["---"] * 10),
    ]
    kinds = tuple(variant for variant, _ in http.RATIOS)
    for threads, figures in served["throughput_req_s"].items():
        lines.append(_row([
            threads, ", ".join(str(figures.get(k, "-")) for k in (*kinds, "raw")),
            ", ".join(str(figures.get(key, "-")) for _, key in http.RATIOS),
            paired_text(figures.get("governed_paired")),
            paired_text(figures.get("governed_written_paired")),
            *(f"{figures.get(f'{k}_service_cpu_ms', '-')}, {figures.get(f'{k}_engine_cpu_ms', '-')}"
              for k in kinds),
            figures.get("raw_engine_cpu_ms", "-"),
        ]))
    trips = served["engine_round_trips"]
    lines.append(f"\nEngine round trips per search: {trips['warm_mean']} warm,"
                 f" {trips.get('new_user_mean', '-')} new user, {trips['cold_mean']} cold.")
    return lines


def _lean_lines(lean: dict[str, Any] | None) -> list[str]:
    """The same single client through ``http.client`` (:func:`bench.http._lean_single_client`):
    none in a result from before it was measured."""
    if not lean:
        return []
    return [
        "",
        "The same rounds through the standard library's `http.client` (a lean client: httpx costs"
        " about 0.6 ms a request on both sides, which dilutes every ratio above; informational, the"
        " targets keep the httpx figures):",
        "",
        *_latency_table("lean single client", lean["latency"], LATENCY_LABELS),
    ]


def _tooling_lines(tools: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "Policy tooling, each command in a fresh process on the exported synthetic set"
        " (wall s, CPU s = user + system of the command; `check`: median of its rounds):",
        "",
        _row(["policies", "files", "`policy check` wall", "CPU", "`policy publish` wall", "CPU"]),
        _row(["---"] * 6),
    ]
    for entry in tools["sizes"]:
        cells = [f"{entry['policies']:,}", entry["files"]]
        for step in (entry["check"], entry["publish"]):
            failed = [f"failed (exit {step.get('exit_code')})", "-"]
            cells += [step["wall_s"], step["cpu_s"]] if step["ok"] else failed
        lines.append(_row(cells))
    return lines


def _compose_lines(composed: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Compose + render (pure, {composed['policy_set_size']:,}-policy set):"
        f" {composed['rounds']} rounds after {composed['warmup_rounds']} warm-up rounds",
        "",
        _row(["matched", "applied", "p50 ms", "p95 ms", "p99 ms", "mean ms", "body bytes"]),
        _row(["---"] * 7),
    ]
    for entry in composed["sizes"]:
        lat = entry["latency"]
        lines.append(_row([
            entry["matched"], entry["applied"], lat["p50_ms"], lat["p95_ms"], lat["p99_ms"], lat["mean_ms"],
            entry["body_bytes"],
        ]))
    return lines


def _percolation_lines(perc: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Percolation (`matcher.match`) and compile (`SearchService.compile`, cache off):"
        f" {len(perc['intents'])} intents x {perc['rounds']} rounds per size after"
        f" {perc['warmup_rounds']} warm-up rounds, sizes interleaved",
        "",
        _row(["policies", "percolate p50", "p95", "p99", "compile p50", "p95", "p99",
              "matches/intent (mean, max)", "publish s", "first load s (read, validate, lookups)",
              "engine RSS MiB (heap)"]),
        _row(["---"] * 11),
    ]
    for size in perc["sizes"]:
        lat, comp, m = size["latency"], size["compile_latency"], size["matches_per_intent"]
        memory = size["engine_memory_after_publish"]
        lines.append(_row([
            f"{size['policies']:,}", lat["p50_ms"], lat["p95_ms"], lat["p99_ms"],
            comp["p50_ms"], comp["p95_ms"], comp["p99_ms"], f"{m['mean']}, {m['max']}", size["publish_s"],
            f"{size['first_load_s']} ({_parts(size.get('load_parts_s'))})",
            f"{memory['rss_mib']} ({memory['heap_used_mib']})",
        ]))
    growth = perc["growth_p50"]
    lines.append(
        f"\np50 growth from {growth['from']:,} to {growth['to']:,} policies:"
        f" percolate x{growth['percolate']}, compile x{growth['compile']}"
    )
    return lines


def _parts(parts: dict[str, float] | None) -> str:
    return ", ".join(str(parts[k]) for k in ("read", "validate", "lookups")) if parts else "-"


def _governed_lines(gov: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Governed search vs direct DSL: {len(gov['intents'])} intents x {gov['rounds']} rounds"
        f" after {gov['warmup_rounds']} warm-up rounds, variants interleaved",
        "",
        _row(["variant", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms",
              "p50 / direct p50", "p50 overhead ms"]),
        _row(["---"] * 8),
    ]
    for variant in governed.VARIANTS:
        if variant not in gov["latency"]:  # a result file of an earlier bench
            continue
        lat = gov["latency"][variant]
        ratio = gov["ratio_of_medians"].get(f"{variant}/direct", 1.0)
        overhead = gov["overhead_p50_ms"].get(variant, 0.0)
        lines.append(_row([
            variant, lat["n"], lat["p50_ms"], lat["p95_ms"], lat["p99_ms"], lat["mean_ms"], ratio, overhead,
        ]))
    stages = gov["governed_stage_p50_ms"]
    multi = [i["intent"] for i in gov["per_intent"] if i["tiers_run"] > 1]
    lines += [
        "",
        f"Governed (cache off) stage medians: compile {stages['compile']} ms, execute {stages['execute']} ms."
        f" Intents that ran more than one tier: {', '.join(multi) or 'none'}.",
    ]
    for variant, parts in gov.get("cold_parts", {}).items():
        named = ", ".join(f"{name} {ms}" for name, ms in parts["stage_p50_ms"].items())
        lines.append(f"- {variant} (cache off) stage p50 ms: {named}; engine requests"
                     f" {parts['engine_requests_mean']} per search; process CPU"
                     f" {gov['cpu_p50_ms'][variant]} ms p50.")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
