"""The policy tooling at scale: ``govsearch policy check`` and ``govsearch policy publish``.

Per size, the synthetic set (``bench/synthetic.py``, fixed seed, the same set the
percolation part measures) is exported one file per policy
(``control_plane.lifecycle.export``), then the two commands run as an operator runs them,
each in a fresh process from the checkout (its ``govsearch.yaml``):

- ``check``: ``govsearch policy check DIR`` (imports, the policies and the tests through
  libyaml, validation, the version hash); ``rounds`` times, the median kept (one round above
  10,000 policies: a round is most of a minute there);
- ``publish``: ``govsearch policy publish DIR`` once, against the bench's engine under a
  policies prefix of its own (``govsearch-bench-tooling-<size>``, deleted afterwards): the
  same load, then the bulk writes in batches, the alias and the history record.

Wall time and CPU time (user + system of the child: what the command cost without waiting
for a core; the engine's own work is not in it) are recorded for both. A command that
fails is recorded with its exit code and the end of its output, not raised, so the figure
sheet says what failed at which size.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import synthetic
from bench.stats import summary
from control_plane.engine import Engine
from control_plane.lifecycle.export import export_policy_set

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "govsearch-bench-tooling"
#: above this many policies, ``check`` runs once whatever ``rounds`` says
ONE_ROUND_ABOVE = 10_000


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``python -m control_plane.cli ARGV`` from the checkout: wall and CPU seconds,
    and whether it succeeded (else its exit code and the end of its output)."""
    started, cpu = time.perf_counter(), _children_cpu_s()
    done = subprocess.run(
        [sys.executable, "-m", "control_plane.cli", *argv],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False,
    )
    timing: dict[str, Any] = {
        "wall_s": round(time.perf_counter() - started, 3),
        "cpu_s": round(_children_cpu_s() - cpu, 3),
        "ok": done.returncode == 0,
    }
    if done.returncode != 0:
        timing |= {"exit_code": done.returncode, "error": (done.stderr or done.stdout)[-2000:]}
    return timing


def _environment(url: str, prefix: str) -> dict[str, str]:
    """This process's environment without any ``GOVSEARCH_*`` of ours, pointed at ``url``
    and a policies prefix of the bench's own."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("GOVSEARCH_")},
        "GOVSEARCH_ENGINE_URL": url,
        "GOVSEARCH_POLICIES_INDEX_PREFIX": prefix,
    }


def _median(timings: list[dict[str, Any]]) -> dict[str, Any]:
    """The median wall and CPU time of successful runs (all of them when one failed: the
    first failure is what is reported)."""
    failed = [t for t in timings if not t["ok"]]
    if failed:
        return failed[0] | {"rounds": len(timings)}
    wall = summary([int(t["wall_s"] * 1e9) for t in timings])["p50_ms"] / 1000
    cpu = summary([int(t["cpu_s"] * 1e9) for t in timings])["p50_ms"] / 1000
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "ok": True, "rounds": len(timings),
            "wall_s_each": [t["wall_s"] for t in timings]}


def run(engine: Engine, url: str, sizes: list[int], rounds: int) -> dict[str, Any]:
    vocabulary = synthetic.Vocabulary.from_catalog()
    report = []
    for size in sizes:
        prefix = f"{PREFIX}-{size}"
        env = _environment(url, prefix)
        policy_set = synthetic.policy_set(size, vocabulary)
        with tempfile.TemporaryDirectory(prefix="govsearch-bench-tooling-") as scratch:
            directory = Path(scratch) / "policies"
            started = time.perf_counter()
            files = len(export_policy_set(policy_set, directory))
            export_s = time.perf_counter() - started
            checks = [command(["policy", "check", str(directory)], env)
                      for _ in range(1 if size > ONE_ROUND_ABOVE else rounds)]
            try:
                publish = command(["policy", "publish", str(directory)], env)
            finally:
                clean_up(engine, prefix)
        check = _median(checks)
        print(f"tooling at {size}: check {check.get('wall_s')} s, publish {publish['wall_s']} s"
              f" ({'ok' if publish['ok'] else 'failed'})", file=sys.stderr)
        report.append({"policies": size, "version": policy_set.version, "files": files,
                       "export_s": round(export_s, 2), "check": check, "publish": publish})
    return {"sizes": report}


def clean_up(engine: Engine, prefix: str) -> None:
    for name in engine.list_indices(f"{prefix}-*"):
        engine.delete_index(name)
