"""Compose + render alone: pure functions, no engine.

For 1, 10 and 50 matched policies of a synthetic set (``bench/synthetic.py``, 10,000
policies), an intent is made of one trigger phrase per chosen policy (patterns get their
cue and a captured word), the matches are built the way the matcher builds them (spans at
the phrase's offsets, captures after the cue), then ``compose`` and ``render`` (strict
tier, OpenSearch, facets on) are timed together, ``perf_counter_ns``, one call per sample,
and the thread's CPU time of the same call (``thread_time_ns``: on a shared machine, what
the call cost without the time it waited for a core).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench import environment, synthetic
from bench.stats import summary, timed
from control_plane import matcher
from control_plane.catalog.profile import load_profile
from control_plane.catalog.stats import category_price_stats
from control_plane.composer import ComposeContext, compose
from control_plane.plan import Match, Span
from control_plane.policy import Policy, PolicySet
from control_plane.renderer import render

PROFILE = synthetic.ROOT / "mappings" / "catalog.profile.yaml"
SET_SIZE = 10_000
CUES = {"{amount}": "under 7", "{allergen}": "without milk"}


def _phrase(policy: Policy) -> str:
    trigger = policy.trigger
    if trigger.kind == "pattern":
        return next(text for key, text in CUES.items() if key in trigger.patterns[0].source())
    return trigger.values[0]


def scenario(policy_set: PolicySet, count: int) -> tuple[str, list[Match]]:
    """An intent matching ``count`` enabled policies of the set, and their matches."""
    chosen: list[Policy] = []
    patterns = 0
    for policy in policy_set.policies:
        if len(chosen) == count:
            break
        plain = policy.enabled and not policy.cohorts and policy.active is None
        if not plain or policy.trigger.kind in ("always", "exact"):  # exact: the whole intent only
            continue
        if policy.trigger.kind == "pattern":
            if patterns >= max(1, count // 20):  # 5% patterns, as in the synthetic sets
                continue
            patterns += 1
        chosen.append(policy)
    pieces: list[str] = []
    spans: list[tuple[Policy, Span]] = []
    position = 0
    for policy in chosen:
        phrase = _phrase(policy)
        cue = phrase.rsplit(" ", 1)[0] if policy.trigger.kind == "pattern" else phrase
        spans.append((policy, Span(start=position, end=position + len(cue), text=cue)))
        pieces.append(phrase)
        position += len(phrase) + 1
    intent = " ".join(pieces)
    cues = [span for policy, span in spans if policy.trigger.kind == "pattern"]
    matches = []
    for policy, span in spans:
        if policy.trigger.kind == "exact":
            matches.append(Match(policy_id=policy.id, spans=(Span(start=0, end=len(intent), text=intent),)))
        elif policy.trigger.kind == "pattern":
            name = policy.trigger.patterns[0].capture
            capture = matcher.capture_after(intent, span, cues, name)
            matches.append(Match(policy_id=policy.id, spans=(span,), captures=(capture,) if capture else ()))
        else:
            matches.append(Match(policy_id=policy.id, spans=(span,)))
    return intent, matches


def run(counts: list[int], warmup: int, rounds: int) -> dict[str, Any]:
    vocabulary = synthetic.Vocabulary.from_catalog()
    policy_set = synthetic.policy_set(SET_SIZE, vocabulary)
    policy_set.lookups()  # the per-version index, built before the freeze as read_index builds it
    gc.freeze()  # as policy_store.read_index does for a loaded set
    profile = load_profile(PROFILE, check=False)
    products = [json.loads(line) for line in synthetic.CATALOG.read_text(encoding="utf-8").splitlines()]
    stats = category_price_stats(products, profile)
    del products  # the bench's own input: a server keeps the statistics, not the catalog's rows
    context = ComposeContext(cohorts=("vegan",), category_field=profile.category, price_stats=stats)

    def once(intent: str, matches: list[Match]) -> dict[str, Any]:
        composition = compose(policy_set, intent, matches, context)
        return render(composition.plan, profile, engine="opensearch", tier="strict")

    report = []
    for count in counts:
        intent, matches = scenario(policy_set, count)
        for _ in range(warmup):
            once(intent, matches)
        samples, cpu = [], []
        for _ in range(rounds):
            started = time.thread_time_ns()
            samples.append(timed(partial(once, intent, matches))[0])
            cpu.append(time.thread_time_ns() - started)
        body = once(intent, matches)
        composition = compose(policy_set, intent, matches, context)
        report.append({
            "matched": len(matches),
            "applied": len(composition.explanation.applied),
            "body_bytes": len(json.dumps(body)),
            "latency": summary(samples),
            "cpu": summary(cpu),
        })
    return {"policy_set_size": SET_SIZE, "warmup_rounds": warmup, "rounds": rounds, "sizes": report}


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.compose [OUT.json]``: the pure part alone, with the machine and load."""
    args = sys.argv[1:] if argv is None else argv
    result: dict[str, Any] = {
        "command": "python -m bench.compose " + " ".join(args),
        "machine": environment.machine(),
        "load_average_at_start": list(os.getloadavg()),
        "compose": run([1, 10, 50], 50, 500),
        "load_average_at_end": list(os.getloadavg()),
    }
    text = json.dumps(result, indent=2) + "\n"
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
