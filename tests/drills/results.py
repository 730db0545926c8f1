"""Where drills put their figures: ``bench/results/drills/<name>.json``, only when
``GOVSEARCH_DRILL_RESULTS`` is set (``make drills`` sets it), so a plain test run leaves the
repository clean."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "drills"


def record(name: str, figures: dict[str, Any]) -> Path | None:
    """Write ``figures`` as ``<name>.json`` when recording is on; the path written, or None."""
    if not os.environ.get("GOVSEARCH_DRILL_RESULTS"):
        return None
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path
