"""The percolation's answer in three more forms, interleaved: what the engine and the client
spend on it (ADR 0043; the request's own forms are :mod:`bench.percolation_forms`).

``python -m bench.percolation_answer --engine-url URL [--rounds 25] [--out FILE]`` on the
index the live demo alias points to (prepare the demo first). Per round, the order
rotating, each of ``bench.governed.INTENTS`` is percolated as the service sends it
(``now``: offsets, the layout known), with ``filter_path`` keeping only what the matcher
and the fail-closed checks read (``filter_path``), without the highlight (``no_highlight``:
not a form the service may send, the spans come from it; for scale), and ``floor``
(``match_all``, ``size: 0``). Before timing, ``filter_path``'s hits and highlights are
checked equal to ``now``'s. Reported per form: client wall p50, the engine's ``took``
mean, the engine's CPU per request (``bench.environment.engine_cpu_s`` over each batch of
intents), and the answer's size; the load average at start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.environment import engine_cpu_s, machine
from bench.governed import INTENTS
from control_plane import matcher, policy_store
from control_plane.config import EngineSettings, Settings
from control_plane.engine import Engine, connect
from control_plane.intent_text import normalise_intent

FILTER_PATH = ",".join((
    "took", "_shards.total", "_shards.failed", "_shards.failures",
    "hits.hits._id", "hits.hits.sort", "hits.hits.highlight",
))  # fmt: skip


def _forms(engine: Engine, index: str) -> dict[str, Callable[[str], dict[str, Any]]]:
    def body(intent: str, highlight: bool = True) -> dict[str, Any]:
        sent = matcher.percolation(index, intent, "triggers")[1]
        return sent if highlight else {k: v for k, v in sent.items() if k != "highlight"}

    path = f"/{index}/_search"
    kept = {"filter_path": FILTER_PATH}
    return {
        "now": lambda i: engine.request("POST", path, body=body(i)),
        "filter_path": lambda i: engine.request("POST", path, body=body(i), params=kept),
        "no_highlight": lambda i: engine.request("POST", path, body=body(i, False)),
        "floor": lambda i: engine.request("POST", path, body={"size": 0, "query": {"match_all": {}}}),
    }


def _seen(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(h["_id"], h["sort"], h.get("highlight")) for h in answer.get("hits", {}).get("hits", [])]


def measure(url: str, rounds: int) -> dict[str, Any]:
    settings = Settings(engine=EngineSettings(url=url, timeout_s=30))
    engine = connect(settings.engine)
    alias = policy_store.alias_name(settings.policies.index_prefix, "live")
    index = policy_store.single_target(engine, alias)
    if index is None:
        raise SystemExit("no live demo policy set: prepare the demo first (govsearch demo)")
    intents = [normalise_intent(i).text for i in INTENTS]
    forms = _forms(engine, index)
    differing = sum(_seen(forms["now"](i)) != _seen(forms["filter_path"](i)) for i in intents)
    names = tuple(forms)
    wall: dict[str, list[float]] = {n: [] for n in names}
    took: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, float] = {n: 0.0 for n in names}
    size: dict[str, list[int]] = {n: [] for n in names}
    load = [round(os.getloadavg()[0], 2)]
    for number in range(rounds + 1):  # the first round warms up
        order = names[number % len(names):] + names[: number % len(names)]
        for name in order:
            spent = engine_cpu_s(engine)
            for intent in intents:
                started = time.perf_counter_ns()
                answer = forms[name](intent)
                if number:
                    wall[name].append((time.perf_counter_ns() - started) / 1e6)
                    took[name].append(answer.get("took", 0))
                    size[name].append(len(json.dumps(answer)))
            if number:
                cpu[name] += engine_cpu_s(engine) - spent
    engine.close()
    load.append(round(os.getloadavg()[0], 2))
    return {
        "index": index,
        "differing_intents": differing,
        "load_average": load,
        "forms": {
            name: {
                "wall_p50_ms": round(statistics.median(wall[name]), 3),
                "took_mean_ms": round(statistics.fmean(took[name]), 3),
                "engine_cpu_per_request_ms": round(cpu[name] * 1000 / len(wall[name]), 3),
                "answer_bytes_p50": statistics.median(size[name]),
            }
            for name in names
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.percolation_answer", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--engine-url", required=True, help="a local engine the demo was prepared on")
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--out", type=Path, help="result file (JSON)")
    args = parser.parse_args(argv)
    result = {
        "command": "python -m bench.percolation_answer " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine(),
    } | measure(args.engine_url, args.rounds)
    print(json.dumps(result["forms"], indent=2), f"\nload {result['load_average']}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
