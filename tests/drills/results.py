"""Drill figures: ``record(name, figures)`` writes ``bench/results/drills/<name>.json`` when
``GOVSEARCH_DRILL_RESULTS`` is set (``make drills``), so an ordinary test run leaves the
recorded results alone."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parents[2] / "bench" / "results" / "drills"


def record(name: str, figures: dict[str, Any]) -> Path | None:
    if not os.environ.get("GOVSEARCH_DRILL_RESULTS"):
        return None
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return path
