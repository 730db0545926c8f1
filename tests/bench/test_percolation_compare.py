"""``python -m bench.percolation_compare`` end to end, this checkout against itself.

A smoke check of the comparison, not a measurement: nothing here reads a figure. On an
engine of its own (the comparison loads the demo catalog), with the smallest sizes: both
workers run the code of the checkout they were given, every first-round answer was
compared (matches and compositions), each variant has a summary per operation and size
with its growth, and no index of the comparison is left behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import environment
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


def test_the_comparison_runs_both_checkouts_and_checks_their_answers(own_engine: str, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    args = ["--base", str(ROOT), "--engine-url", own_engine, "--sizes", "50,200", "--intents", "3",
            "--warmup", "0", "--rounds", "2", "--out", str(out)]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "bench.percolation_compare", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["command"] == "python -m bench.percolation_compare " + " ".join(args)
    assert result["code"] == {"base": str(ROOT / "control_plane"), "this": str(ROOT / "control_plane")}
    assert result["identical_answers_checked"] == 2 * 3 * 2  # sizes x intents x (match, compile)
    assert len(result["load_average_start"]) == len(result["load_average_end"]) == 3
    for variant in result["variants"].values():
        for op in ("match", "compile"):
            counts = {size: e["latency"]["n"] for size, e in variant[op].items() if size != "growth_p50"}
            assert counts == {"50": 6, "200": 6}
            assert variant[op]["200"]["cpu"]["p50_ms"] > 0
            assert variant[op]["growth_p50"] > 0

    engine = connect(EngineSettings(url=own_engine))
    try:
        assert engine.list_indices("govsearch-bench-compare-*") == []
    finally:
        engine.close()
