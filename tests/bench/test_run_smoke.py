"""``python -m bench.run --quick`` end to end, every part, on an engine of its own.

The smoke check of the figure sheet, not a measurement: nothing here reads a figure. It
starts a local engine on a free port (a data directory of the test's own: the bench loads
the demo catalog and publishes policy sets, which the session's shared engine must not
see), runs the bench in a subprocess with the smallest size, and checks what it writes:
one JSON with every part, the command, the machine and the load average at both ends; the
targets stored as the targets module computes them from the stored data; the plot; the
sheet printed again from the file alone; and no synthetic index left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import environment, targets
from bench.run import PARTS
from control_plane import local_engine
from control_plane.config import EngineSettings
from control_plane.engine import connect

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture()
def own_engine(starts_local_engine: None, tmp_path: Path) -> Iterator[str]:
    data = tmp_path / "engine"
    state = local_engine.start(port=environment.free_port(), data_dir=data, heap="512m")
    try:
        yield state.url
    finally:
        local_engine.stop(data)


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bench.run", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, check=False)


def test_quick_run_writes_every_part_and_the_targets_from_its_data(own_engine: str, tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    done = _bench(
        "--quick", "--sizes", "100", "--workers", "1", "--engine-url", own_engine, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr[-3000:]

    result = json.loads(out.read_text(encoding="utf-8"))
    assert set(PARTS) <= set(result)
    assert result["command"].startswith("python -m bench.run --quick --sizes 100")
    assert result["mode"] == "quick"
    assert len(result["load_average_at_start"]) == len(result["load_average_at_end"]) == 3
    assert {"nproc", "cpu_model", "commit"} <= set(result["machine"])
    assert [entry["policies"] for entry in result["percolation"]["sizes"]] == [100]
    assert result["percolation"]["sizes"][0]["engine_memory_after_publish"]["heap_used_mib"] > 0
    assert [entry["policies"] for entry in result["tooling"]["sizes"]] == [100]
    tools = result["tooling"]["sizes"][0]
    assert tools["check"]["ok"] and tools["publish"]["ok"], tools
    assert set(result["http"]["throughput_req_s"]) == {"1", "4", "16"}
    # beside govsearch and the raw engine: the written commit level, the pipeline without the
    # HTTP stack and the floor (bench.floor)
    single = result["http"]["single_client_warm"]
    assert {"governed", "governed_written", "pipeline", "floor", "raw"} <= set(single["latency"])
    assert {"written_ratio_p50", "pipeline_ratio_p50", "floor_ratio_p50"} <= set(single)
    lean = result["http"]["single_client_lean"]  # the same rounds through http.client
    assert set(lean["latency"]) == {"governed", "governed_cold", "governed_written", "floor", "raw"}
    assert all(lean["latency"][v]["n"] == single["latency"][v]["n"] for v in lean["latency"])
    assert "| lean single client | p50 ms |" in done.stdout
    assert all(figures["floor"] > 0 and figures["pipeline"] > 0 and figures["governed_written"] > 0
               and "governed_written_paired" in figures
               for figures in result["http"]["throughput_req_s"].values())

    stored = result.pop("targets")
    assert stored == [verdict.as_json() for verdict in targets.evaluate(result)]
    measured = {verdict["target"] for verdict in stored if verdict["met"] is not None}
    # quick: the HTTP and compose targets are measured, those at 10,000 and 100,000 are not
    assert measured == {
        "warm single-client p50 <= 1.15x raw", "cold single-client p50 <= 1.5x raw",
        "throughput >= 0.7x raw at concurrency 1", "throughput >= 0.7x raw at concurrency 4",
        "throughput >= 0.7x raw at concurrency 16", "compose + render p99 <= 1 ms at 50 matched policies",
    }

    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| target (issue 14) | measured | met? |" in done.stdout
    again = _bench("--sheet", str(out))
    assert again.returncode == 0, again.stderr
    assert again.stdout == done.stdout  # the file alone gives the same sheet

    engine = connect(EngineSettings(url=own_engine))
    try:
        assert engine.list_indices("govsearch-bench-*") == []
    finally:
        engine.close()


def test_the_warm_path_pieces_bench_runs_and_compares_like_with_like() -> None:
    """``bench.warm_path`` (ADR 0033): each pair runs and yields a CPU figure per variant."""
    from bench.warm_path import PAIRS, measure

    figures = measure(rounds=2, calls=3)
    assert set(figures) == set(PAIRS)
    for pair in figures.values():
        assert pair["after_cpu_us"] > 0 and pair["before_cpu_us"] > 0 and pair["ratio"] > 0
