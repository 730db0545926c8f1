"""Demo results of many intents under one code tree's analysis, as JSON, to compare two trees.

Used for ADR 0020 (language analysis as configuration): run it from the tree before a
change of analysis and from the tree after, against the same engine, each with its own
policies prefix (the catalog alias is moved by each run's load), then compare the files::

    git archive <old-commit> | tar -x -C /tmp/old
    (cd /tmp/old && PYTHONPATH=. python -m bench.analysis_compare URL old-policies /tmp/old.json)
    python -m bench.analysis_compare URL new-policies /tmp/new.json
    python -m bench.analysis_compare --diff /tmp/old.json /tmp/new.json

Intents: the regression intents, the first word and the first three words of 150 titles
drawn with a fixed seed, and stop-word and accent probes. The instant is fixed.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

NOW = datetime(2026, 11, 15, 12, tzinfo=UTC)
PROBES = [
    "thé vert bio", "thé", "the french", "a la vanille", "à la vanille", "de", "été", "lait d'été",
    "pain de mie", "the", "what the", "café", "jus d'orange bio", "fromage de chèvre",
    "crème fraîche", "no sugar", "sans sucre", "free of milk", "pas de sucre", "chocolat pas cher",
    "son", "pour",
]


def intents() -> list[str]:
    lines = Path("policies/regression/queries.txt").read_text(encoding="utf-8").splitlines()
    found = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    catalog = Path("data/catalog.ndjson").read_text(encoding="utf-8").splitlines()
    titles = [json.loads(line)["title"] for line in catalog if line.strip()]
    for title in random.Random(7).sample(titles, 150):
        words = title.split()
        found += [" ".join(words[:3]), words[0]]
    return found + PROBES


def run(url: str, prefix: str, out: str) -> None:
    from control_plane.bootstrap import prepare, profile_of
    from control_plane.config import AuditSettings, EngineSettings, PolicySettings, Settings
    from control_plane.engine import connect
    from control_plane.service import SearchRequest, SearchService
    from control_plane.times import fixed_clock

    audit = Path(tempfile.mkdtemp())
    settings = Settings(
        engine=EngineSettings(url=url, timeout_s=60),
        policies=PolicySettings(index_prefix=prefix),
        audit=AuditSettings(path=str(audit / "decisions.jsonl"), key_file=str(audit / "audit.key")),
    )
    engine = connect(settings.engine)
    prepare(engine, settings, clock=fixed_clock(NOW))
    service = SearchService(settings, engine, profile_of(settings))
    result: dict[str, Any] = {}
    for intent in intents():
        outcome = service.search(SearchRequest(intent=intent, size=20), NOW)
        result[intent] = {
            "applied": list(outcome.compiled.composition.plan.applied),
            "total": outcome.execution.total,
            "ids": [hit.id for hit in outcome.execution.hits],
        }
    Path(out).write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    service.close()


def diff(old_path: str, new_path: str) -> None:
    old = json.loads(Path(old_path).read_text(encoding="utf-8"))
    new = json.loads(Path(new_path).read_text(encoding="utf-8"))
    same_applied = sum(old[k]["applied"] == new[k]["applied"] for k in old)
    same_hits = sum(set(old[k]["ids"]) == set(new[k]["ids"]) for k in old)
    print(f"{len(old)} intents: applied policies identical on {same_applied}, hit sets on {same_hits}")
    for key in old:
        if old[key]["applied"] != new[key]["applied"] or set(old[key]["ids"]) != set(new[key]["ids"]):
            applied = "same" if old[key]["applied"] == new[key]["applied"] else (
                f"{old[key]['applied']} -> {new[key]['applied']}"
            )
            common = len(set(old[key]["ids"]) & set(new[key]["ids"]))
            print(f"  {key!r}: applied {applied}; total {old[key]['total']} -> {new[key]['total']};"
                  f" top {len(old[key]['ids'])}/{len(new[key]['ids'])}, {common} in common")


if __name__ == "__main__":
    if sys.argv[1] == "--diff":
        diff(sys.argv[2], sys.argv[3])
    else:
        run(sys.argv[1], sys.argv[2], sys.argv[3])
