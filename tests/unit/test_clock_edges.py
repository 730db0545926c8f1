"""Time is an input: nothing outside the edges reads the wall clock.

Every read of the wall clock in the product is ``control_plane.times.system_clock``; the
edges (the CLI, the MCP server's entry point, the benchmarks) hand it down as a ``Clock``.
A test reads it only when it is about the real now, and says so here.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from control_plane.times import parse_time, system_clock

ROOT = Path(__file__).resolve().parents[2]

WALL_CLOCK = re.compile(
    r"datetime\.(?:now|utcnow|today)\(|date\.today\(|\btime\.time(?:_ns)?\b|\butcnow\b|\blocaltime\(|\bgmtime\("
)

ALLOWED = {
    "control_plane/times.py": "system_clock: the one read of the wall clock",
    "control_plane/audit/telemetry.py": "span end time for the exporter (observability, not a decision)",
    "control_plane/lifecycle/store.py": "history events' nanosecond sequence (their order, not their time)",
    "control_plane/lifecycle/intents.py": "move intents' leases: real time shared by processes (when a dead"
    " process's move may be completed, ADR 0053), not the time a decision is made at",
}
"""file -> why it reads the wall clock itself (a call, or the function handed on: ``= time.time_ns``)"""


def _sources() -> list[Path]:
    found = []
    for folder in ("control_plane", "agent_gateway", "bench", "tests"):
        found += sorted((ROOT / folder).rglob("*.py"))
    return found


def test_only_the_edges_read_the_wall_clock() -> None:
    offenders = []
    for path in _sources():
        name = path.relative_to(ROOT).as_posix()
        if name in ALLOWED or name == "tests/unit/test_clock_edges.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if WALL_CLOCK.search(line):
                offenders.append(f"{name}:{number}: {line.strip()}")
    hint = "read the time from a Clock passed in (control_plane.times):\n"
    assert offenders == [], hint + "\n".join(offenders)


def test_the_allowed_places_still_read_it() -> None:
    """An allowance that is no longer needed goes, so the list stays the truth."""
    for name in ALLOWED:
        assert WALL_CLOCK.search((ROOT / name).read_text(encoding="utf-8")), name


def test_the_pure_core_takes_no_clock() -> None:
    """The pipeline's stages and the service take the instant as an argument."""
    for name in ("service.py", "matcher.py", "composer.py", "renderer.py", "executor.py", "plan_cache.py"):
        source = (ROOT / "control_plane" / name).read_text(encoding="utf-8")
        assert "system_clock" not in source and "Clock" not in source, name


def test_a_travelling_session_moves_the_wall_clock() -> None:
    """About now: ``GOVSEARCH_TEST_TRAVEL`` (``make test-clocks``) really moves what
    ``system_clock`` reads, so the moved runs prove something."""
    from tests.conftest import TRAVEL

    now = system_clock()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    if TRAVEL:
        assert abs(now - parse_time(TRAVEL)) < timedelta(hours=1)
