"""The figure of a run: percolation and compile latency (p50, p95) against policy count.

``python -m bench.plot RESULT.json [OUT.png]`` redraws it from a result file; ``bench.run``
draws it after every run, next to the JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt


def latency_by_size(result: dict[str, Any], out: Path) -> Path:
    sizes = result["percolation"]["sizes"]
    counts = [entry["policies"] for entry in sizes]
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=120)
    lines = (("latency", "percolate", "tab:blue"), ("compile_latency", "compile", "tab:orange"))
    for key, label, colour in lines:
        for stat, style in (("p50_ms", "-o"), ("p95_ms", "--s")):
            values = [entry[key][stat] for entry in sizes]
            axes.plot(counts, values, style, color=colour, label=f"{label} {stat.removesuffix('_ms')}")
    # issue 14's percolation targets at 100,000 policies
    axes.axhline(10, color="tab:blue", linewidth=0.8, linestyle=":", label="target percolate p50 (10 ms)")
    axes.axhline(30, color="tab:blue", linewidth=0.8, linestyle="-.", label="target percolate p95 (30 ms)")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks(counts, [f"{c:,}" for c in counts])
    axes.set_xlabel("policies in the set")
    axes.set_ylabel("latency, ms (log)")
    machine = result["machine"]
    load = ", ".join(f"{v:.1f}" for v in result["load_average_at_start"])
    axes.set_title(
        f"{result['started_at'][:10]}, commit {machine['commit']}, {machine['nproc']} CPUs, load {load}",
        fontsize=9,
    )
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)
    return out


if __name__ == "__main__":
    source = Path(sys.argv[1])
    target = Path(sys.argv[2]) if len(sys.argv) > 2 else source.with_suffix(".png")
    print(latency_by_size(json.loads(source.read_text(encoding="utf-8")), target))
