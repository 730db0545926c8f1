"""Issue 14's Done-when lines, checked against a run's measured data.

:func:`evaluate` reads a result (what ``bench.run`` writes) and gives one :class:`Verdict`
per target: what was measured, whether the target is met, and by how much it is missed.
A target whose part or size was not in the run is *not measured* (``met`` is None), never
met. Nothing here is asserted by a test of speed: the verdicts are recorded, and the figure
sheet prints them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

Result = dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """One target of one run. ``off_by``: how many times too slow (or too little) a missed
    target is, e.g. 1.5 for a 1.5 ms p99 against 1 ms; None when met or not measured."""

    target: str
    measured: str
    met: bool | None
    off_by: float | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def answer(self) -> str:
        if self.met is None:
            return "not measured"
        if self.met:
            return "yes"
        return f"no ({self.off_by}x off)" if self.off_by is not None else "no"


def _bound(target: str, value: float, limit: float, at_most: bool, measured: str) -> Verdict:
    met = value <= limit if at_most else value >= limit
    if met:
        return Verdict(target, measured, True)
    if not at_most and value <= 0:
        return Verdict(target, measured, False)  # nothing at all: no finite factor
    off = value / limit if at_most else limit / value
    return Verdict(target, measured, False, round(off, 2))


def _absent(target: str, why: str) -> Verdict:
    return Verdict(target, why, None)


def _sizes_run(entries: list[dict[str, Any]], key: str = "policies") -> str:
    return ", ".join(f"{entry[key]:,}" for entry in entries) or "none"


def _at(entries: list[dict[str, Any]], size: int, key: str = "policies") -> dict[str, Any] | None:
    return next((entry for entry in entries if entry[key] == size), None)


def _ms(value: float) -> str:
    return f"{value:g} ms"


# --- the targets, in the order of issue 14's Done-when list ---------------------------


def _single(result: Result, variant: str, limit: float, name: str) -> Verdict:
    target = f"{name} single-client p50 <= {limit}x raw"
    if "http" not in result:
        return _absent(target, "part http not run")
    latency = result["http"]["single_client_warm"]["latency"]
    governed, raw = latency[variant]["p50_ms"], latency["raw"]["p50_ms"]
    ratio = round(governed / raw, 2)
    return _bound(target, ratio, limit, True, f"{ratio}x ({_ms(governed)} / raw {_ms(raw)})")


def warm_p50(result: Result) -> Verdict:
    return _single(result, "governed", 1.15, "warm")


def cold_p50(result: Result) -> Verdict:
    return _single(result, "governed_cold", 1.5, "cold")


def _throughput(concurrency: int) -> Callable[[Result], Verdict]:
    def check(result: Result) -> Verdict:
        target = f"throughput >= 0.7x raw at concurrency {concurrency}"
        if "http" not in result:
            return _absent(target, "part http not run")
        figures = result["http"]["throughput_req_s"].get(str(concurrency))
        if figures is None:
            return _absent(target, f"concurrency {concurrency} not run")
        ratio = round(figures["governed"] / figures["raw"], 2) if figures["raw"] else 0.0
        paired = figures.get("governed_paired")  # slice by slice, side by side (none in older results)
        spread = f"; slice by slice {paired['median']}, {paired['low']}-{paired['high']}" if paired else ""
        return _bound(target, ratio, 0.7, False,
                      f"{ratio} ({figures['governed']} / raw {figures['raw']} req/s{spread})")
    return check


#: issue 14's largest policy set, and the smallest its growth is measured from
LARGE, SMALL = 100_000, 1_000


def publish_and_compile(result: Result) -> Verdict:
    target = f"{LARGE:,} policies: publish and compile work"
    if "percolation" not in result:
        return _absent(target, "part percolation not run")
    sizes = result["percolation"]["sizes"]
    entry = _at(sizes, LARGE)
    if entry is None:
        return _absent(target, f"sizes run: {_sizes_run(sizes)}")
    compiled = entry["compile_latency"]["n"]
    tooling = _at(result.get("tooling", {}).get("sizes", []), LARGE)
    cli_ok = tooling is None or tooling["publish"]["ok"]
    works = compiled > 0 and cli_ok
    measured = f"published in {entry['publish_s']} s, {compiled} compiles"
    if tooling is not None:
        measured += f"; `policy publish` {'ok' if cli_ok else 'failed'}"
    return Verdict(target, measured, works)


def _percolation_at_large(stat: str, limit: float) -> Callable[[Result], Verdict]:
    def check(result: Result) -> Verdict:
        target = f"{LARGE:,} policies: percolation {stat} <= {limit:g} ms"
        if "percolation" not in result:
            return _absent(target, "part percolation not run")
        sizes = result["percolation"]["sizes"]
        entry = _at(sizes, LARGE)
        if entry is None:
            return _absent(target, f"sizes run: {_sizes_run(sizes)}")
        value = entry["latency"][f"{stat}_ms"]
        return _bound(target, value, limit, True, _ms(value))
    return check


def growth(result: Result) -> Verdict:
    target = f"percolation p50 growth {SMALL:,} -> {LARGE:,} policies <= 3x"
    if "percolation" not in result:
        return _absent(target, "part percolation not run")
    sizes = result["percolation"]["sizes"]
    small, large = _at(sizes, SMALL), _at(sizes, LARGE)
    if small is None or large is None:
        return _absent(target, f"sizes run: {_sizes_run(sizes)}")
    low, high = small["latency"]["p50_ms"], large["latency"]["p50_ms"]
    ratio = round(high / low, 2)
    return _bound(target, ratio, 3.0, True, f"{ratio}x ({_ms(low)} -> {_ms(high)})")


def compose_p99(result: Result) -> Verdict:
    target = "compose + render p99 <= 1 ms at 50 matched policies"
    if "compose" not in result:
        return _absent(target, "part compose not run")
    entry = _at(result["compose"]["sizes"], 50, "matched")
    if entry is None:
        return _absent(target, f"matched counts run: {_sizes_run(result['compose']['sizes'], 'matched')}")
    value = entry["latency"]["p99_ms"]
    return _bound(target, value, 1.0, True, _ms(value))


def _check(size: int, limit: float) -> Callable[[Result], Verdict]:
    def verdict(result: Result) -> Verdict:
        target = f"`policy check` on {size:,} policies <= {limit:g} s"
        if "tooling" not in result:
            return _absent(target, "part tooling not run")
        sizes = result["tooling"]["sizes"]
        entry = _at(sizes, size)
        if entry is None:
            return _absent(target, f"sizes run: {_sizes_run(sizes)}")
        check = entry["check"]
        if not check["ok"]:
            return Verdict(target, f"failed (exit {check.get('exit_code')})", False)
        return _bound(target, check["wall_s"], limit, True, f"{check['wall_s']} s (CPU {check['cpu_s']} s)")
    return verdict


TARGETS: tuple[Callable[[Result], Verdict], ...] = (
    warm_p50,
    cold_p50,
    _throughput(1),
    _throughput(4),
    _throughput(16),
    publish_and_compile,
    _percolation_at_large("p50", 10),
    _percolation_at_large("p95", 30),
    growth,
    compose_p99,
    _check(10_000, 5),
    _check(100_000, 60),
)


def evaluate(result: Result) -> list[Verdict]:
    """Every target of issue 14 against ``result``, in the issue's order."""
    return [target(result) for target in TARGETS]


def table(verdicts: list[Verdict]) -> list[str]:
    """The Markdown "target / measured / met?" table."""
    lines = ["| target (issue 14) | measured | met? |", "| --- | --- | --- |"]
    lines += [f"| {v.target} | {v.measured} | {v.answer} |" for v in verdicts]
    met = sum(1 for v in verdicts if v.met)
    measured = sum(1 for v in verdicts if v.met is not None)
    lines.append(f"\n{met} of {measured} measured targets met ({len(verdicts) - measured} not measured).")
    return lines
