"""Issue 14's targets table: which targets a result meets, by how much the others miss, and
which were not measured. The results are built here in the shape ``bench.run`` writes."""

from __future__ import annotations

from typing import Any

import pytest

from bench import targets
from bench.run import main


def _latency(p50: float, p95: float | None = None, p99: float | None = None, n: int = 100) -> dict[str, Any]:
    return {"n": n, "p50_ms": p50, "p95_ms": p95 if p95 is not None else p50 * 2,
            "p99_ms": p99 if p99 is not None else p50 * 3}


def _http(warm: float, cold: float, raw: float, throughput: dict[int, tuple[float, float]]) -> dict[str, Any]:
    return {
        "single_client_warm": {"latency": {
            "governed": _latency(warm), "governed_cold": _latency(cold), "raw": _latency(raw),
        }},
        "throughput_req_s": {
            str(c): {"governed": g, "raw": r, "ratio": round(g / r, 2)} for c, (g, r) in throughput.items()
        },
    }


def _percolation(p50_by_size: dict[int, tuple[float, float]]) -> dict[str, Any]:
    return {"sizes": [
        {"policies": size, "latency": _latency(p50, p95), "compile_latency": _latency(p50 * 2),
         "publish_s": size / 2000}
        for size, (p50, p95) in p50_by_size.items()
    ]}


def _tooling(check_s: dict[int, float], publish_ok: bool = True) -> dict[str, Any]:
    return {"sizes": [
        {"policies": size, "check": {"wall_s": wall, "cpu_s": wall * 0.9, "ok": True},
         "publish": {"wall_s": 1.0, "cpu_s": 0.5, "ok": publish_ok}}
        for size, wall in check_s.items()
    ]}


def _compose(p99_at_50: float) -> dict[str, Any]:
    return {"sizes": [{"matched": m, "latency": _latency(0.1 * m, p99=p99_at_50 if m == 50 else 0.1)}
                      for m in (1, 10, 50)]}


def meeting_every_target() -> dict[str, Any]:
    return {
        "http": _http(
            warm=8.8, cold=12.0, raw=8.0, throughput={1: (80, 100), 4: (300, 400), 16: (700, 1000)}
        ),
        "percolation": _percolation({1000: (3.0, 9.0), 10000: (4.0, 12.0), 100000: (8.0, 25.0)}),
        "compose": _compose(p99_at_50=0.8),
        "tooling": _tooling({10000: 2.5, 100000: 40.0}),
    }


def _by_target(result: dict[str, Any]) -> dict[str, targets.Verdict]:
    return {verdict.target: verdict for verdict in targets.evaluate(result)}


def test_a_result_within_every_target_meets_all_twelve() -> None:
    verdicts = targets.evaluate(meeting_every_target())
    assert len(verdicts) == 12
    assert [v.met for v in verdicts] == [True] * 12
    assert all(v.off_by is None for v in verdicts)
    assert targets.table(verdicts)[-1] == "\n12 of 12 measured targets met (0 not measured)."


def test_misses_say_by_how_much_from_the_measured_figures() -> None:
    result = meeting_every_target()
    result["http"] = _http(
        warm=14.0, cold=60.0, raw=8.0, throughput={1: (17.5, 350), 4: (300, 400), 16: (0, 800)}
    )
    result["compose"] = _compose(p99_at_50=2.22)
    result["tooling"] = _tooling({10000: 5.5, 100000: 60.0})
    verdicts = _by_target(result)
    warm = verdicts["warm single-client p50 <= 1.15x raw"]
    assert (warm.met, warm.off_by, warm.measured) == (False, 1.52, "1.75x (14 ms / raw 8 ms)")
    cold = verdicts["cold single-client p50 <= 1.5x raw"]
    assert (cold.met, cold.off_by) == (False, 5.0)  # 7.5x
    one = verdicts["throughput >= 0.7x raw at concurrency 1"]
    assert (one.met, one.off_by, one.answer) == (False, 14.0, "no (14.0x off)")
    assert verdicts["throughput >= 0.7x raw at concurrency 4"].met is True  # 0.75
    starved = verdicts["throughput >= 0.7x raw at concurrency 16"]
    assert (starved.met, starved.off_by, starved.answer) == (False, None, "no")  # 0 req/s: no factor
    assert verdicts["compose + render p99 <= 1 ms at 50 matched policies"].off_by == 2.22
    assert verdicts["`policy check` on 10,000 policies <= 5 s"].off_by == 1.1
    assert verdicts["`policy check` on 100,000 policies <= 60 s"].met is True  # the limit itself is met


def test_percolation_targets_read_the_100k_entry_and_growth_from_1k() -> None:
    result = meeting_every_target()
    # a fast 100-policy size first: growth is still measured from 1,000, not from the smallest
    result["percolation"] = _percolation({100: (0.5, 1.0), 1000: (4.0, 9.0), 100000: (14.0, 31.0)})
    verdicts = _by_target(result)
    assert verdicts["100,000 policies: percolation p50 <= 10 ms"].off_by == 1.4
    assert verdicts["100,000 policies: percolation p95 <= 30 ms"].off_by == 1.03
    growth = verdicts["percolation p50 growth 1,000 -> 100,000 policies <= 3x"]
    assert (growth.met, growth.off_by, growth.measured) == (False, 1.17, "3.5x (4 ms -> 14 ms)")


def test_a_failed_publish_or_check_at_100k_is_a_miss_not_a_figure() -> None:
    result = meeting_every_target()
    result["tooling"] = _tooling({10000: 2.0, 100000: 30.0}, publish_ok=False)
    result["tooling"]["sizes"][1]["check"] = {"wall_s": 3.0, "cpu_s": 2.0, "ok": False, "exit_code": 2}
    verdicts = _by_target(result)
    works = verdicts["100,000 policies: publish and compile work"]
    assert works.met is False and "`policy publish` failed" in works.measured
    check = verdicts["`policy check` on 100,000 policies <= 60 s"]
    assert (check.met, check.measured) == (False, "failed (exit 2)")
    assert verdicts["`policy check` on 10,000 policies <= 5 s"].met is True


def test_parts_or_sizes_left_out_are_not_measured_rather_than_met() -> None:
    quick = {  # what --quick --parts compose,percolation,tooling gives: no http, nothing at 100k
        "percolation": _percolation({100: (1.0, 2.0), 1000: (2.0, 5.0)}),
        "compose": _compose(p99_at_50=0.5),
        "tooling": _tooling({1000: 0.4}),
    }
    verdicts = targets.evaluate(quick)
    assert [v.met for v in verdicts] == [None] * 9 + [True] + [None] * 2
    assert {v.answer for v in verdicts if v.met is None} == {"not measured"}
    by_target = _by_target(quick)
    assert by_target["warm single-client p50 <= 1.15x raw"].measured == "part http not run"
    assert by_target["100,000 policies: percolation p50 <= 10 ms"].measured == "sizes run: 100, 1,000"
    assert by_target["`policy check` on 10,000 policies <= 5 s"].measured == "sizes run: 1,000"
    assert targets.table(verdicts)[-1] == "\n1 of 1 measured targets met (11 not measured)."
    assert [v.met for v in targets.evaluate({})] == [None] * 12


def test_the_table_has_one_row_per_target_in_the_issues_order() -> None:
    lines = targets.table(targets.evaluate(meeting_every_target()))
    assert lines[:2] == ["| target (issue 14) | measured | met? |", "| --- | --- | --- |"]
    rows = lines[2:-1]
    assert rows[0] == "| warm single-client p50 <= 1.15x raw | 1.1x (8.8 ms / raw 8 ms) | yes |"
    assert rows[-1] == "| `policy check` on 100,000 policies <= 60 s | 40.0 s (CPU 36.0 s) | yes |"
    assert len(rows) == 12


def test_an_unknown_part_is_refused_before_anything_runs() -> None:
    with pytest.raises(SystemExit, match="unknown part"):
        main(["--parts", "compose,speed"])


def test_a_throughput_verdict_shows_the_slice_by_slice_spread_when_measured() -> None:
    result = meeting_every_target()
    result["http"]["throughput_req_s"]["4"]["governed_paired"] = {"median": 0.74, "low": 0.66, "high": 0.8}
    verdicts = _by_target(result)
    sliced = verdicts["throughput >= 0.7x raw at concurrency 4"]
    assert sliced.measured == "0.75 (300 / raw 400 req/s; slice by slice 0.74, 0.66-0.8)"
    assert verdicts["throughput >= 0.7x raw at concurrency 16"].measured == "0.7 (700 / raw 1000 req/s)"
