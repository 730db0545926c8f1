"""The audit writer's sealing alone: the CPU of turning a record into its sealed form and its
line (sequence, ``prev_hash``, hash, HMAC, the canonical JSON written), per record, on the
records of a real decision log (ADR 0042).

``python -m bench.audit_seal LOG [--rounds R] [--variant NAME=VAR=VALUE,...]`` reads the
records of ``LOG`` (a ``decisions.jsonl``; their chain fields are dropped and sealed again
under a bench key), and runs every variant in a subprocess of its own (e.g.
``before=PYTHONPATH=/path/to/an/older/checkout``), the variants alternating round by round.
Each round is the thread CPU (``thread_time``) of sealing every record five times; the report
gives the minimum and the median over the rounds, in microseconds per record. Code without
``Chain.seal_line`` (before ADR 0042) is measured as it worked: ``seal``, then the sink's
``canonical_bytes`` of the sealed record.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHAIN_FIELDS = ("writer", "sequence", "prev_hash", "hash", "mac", "key_id")


def measure_here(log: Path, rounds: int) -> dict[str, Any]:
    from control_plane.audit.chain import Chain, Head
    from control_plane.audit.keys import KeyRing
    from control_plane.audit.record import canonical_bytes

    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for field in CHAIN_FIELDS:
            record.pop(field, None)
        records.append(record)
    chain = Chain(Head("bench-writer"), KeyRing({"bench-1": b"k" * 48}, "bench-1"))
    one_serialisation = hasattr(chain, "seal_line")

    def seal_all() -> None:
        for record in records:
            if one_serialisation:
                sealed, _ = chain.seal_line(record)
            else:
                sealed = chain.seal(record)
                canonical_bytes(sealed)
            chain.advance(sealed)

    per_record: list[float] = []
    for _ in range(rounds):
        started = time.thread_time_ns()
        for _ in range(5):
            seal_all()
        per_record.append((time.thread_time_ns() - started) / 5 / len(records) / 1000)
    per_record.sort()
    return {"records": len(records), "seal_line": one_serialisation,
            "cpu_us_per_record_min": round(per_record[0], 2),
            "cpu_us_per_record_median": round(per_record[len(per_record) // 2], 2)}


def main(argv: list[str] | None = None) -> int:
    args_list = sys.argv[1:] if argv is None else argv
    if args_list[:1] == ["--here"]:
        print(json.dumps(measure_here(Path(args_list[1]), int(args_list[2]))))
        return 0
    from bench.http_layer import parse_variant

    parser = argparse.ArgumentParser(prog="python -m bench.audit_seal", description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="a decisions.jsonl whose records are sealed again")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, variants alternating (default 3)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME[=VAR=VALUE,...]")
    args = parser.parse_args(args_list)
    variants = dict(parse_variant(text) for text in args.variant or ["default"])
    here = f"import runpy; runpy.run_path({str(Path(__file__).resolve())!r}, run_name='__main__')"
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    names = list(variants)
    for number in range(args.rounds):
        for name in names if number % 2 == 0 else names[::-1]:
            env = {**os.environ, "PYTHONPATH": str(ROOT), **variants[name]}
            output = subprocess.run(
                [sys.executable, "-c", here, "--here", str(args.log.resolve()), "15"],
                env=env, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
            ).stdout
            results[name].append(json.loads(output))
    print(f"load average {os.getloadavg()[0]:.2f}; CPU us per record (min / median of 15), per round:")
    for name, runs in results.items():
        cells = ", ".join(
            f"{run['cpu_us_per_record_min']} / {run['cpu_us_per_record_median']}" for run in runs
        )
        print(f"  {name} ({runs[0]['records']} records, seal_line: {runs[0]['seal_line']}): {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
