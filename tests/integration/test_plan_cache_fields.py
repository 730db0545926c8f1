"""A cached plan serves what an uncached compile serves, whatever the request and the state:
seeded-random sequences of requests, each sent to a service with its caches on (plan cache,
purchases cache, percolation cache, speculation, the event-loop path) and to one with them
off (``plan_cache_size=0``, no speculation), compared field by field: the normalised intent,
the DSL byte for byte (key order included), the hits (ids, scores, policies, sponsors), the
tier, the total, the facets, the explanation (applied and skipped policies, tier, DSL,
personalization) and the API's answer bytes.

The sequences vary every request field that reaches the plan or its execution: intent
(spellings that normalise alike and not), user, cohorts, market, page, size, explain, the
catalog name and the instant (the preview ``now``). Half the requests are a recent request
with exactly one field changed, so a cached entry is offered to a request that differs from
it in that field alone. The instants cluster on active-window edges (a microsecond and a
second before, at, a microsecond after), and each edge is also crossed deliberately, both
ways, with the same key. A second drill moves the state under the same kind of traffic: the
live policies alias between two versions, a catalog reload (prices tripled) and back, and a
write into the served catalog index.

Time is an input: every instant is derived from :data:`~tests.clocks.FIXED_NOW`; nothing
here reads the wall clock."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from control_plane import policy_store
from control_plane.api.answer import explanation_of, search_answer
from control_plane.api.models import SearchBody
from control_plane.bootstrap import Ready, profile_of
from control_plane.catalog.profile import CatalogProfile
from control_plane.catalog_loader import load_catalog
from control_plane.config import Settings
from control_plane.engine import Engine
from control_plane.engine.aio import AsyncEngine
from control_plane.loader import load_policy_set
from control_plane.service import Outcome, SearchService
from control_plane.shopper_language import field_types_of
from tests.clocks import FIXED_NOW
from tests.e2e.conftest import ready, settings  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
CATALOG = ROOT / "data" / "catalog.ndjson"

# --- the policies: the demo's, and windows around FIXED_NOW (Sunday 15 November, noon) ---------

CHEESE_UNTIL = FIXED_NOW  # a window that ends exactly at FIXED_NOW
FLASH_FROM, FLASH_UNTIL = FIXED_NOW + timedelta(hours=1), FIXED_NOW + timedelta(hours=3)
EVENING_FROM = FIXED_NOW + timedelta(hours=6)
XMAS_FROM, XMAS_UNTIL = datetime(2026, 12, 1, tzinfo=UTC), datetime(2026, 12, 26, tzinfo=UTC)
EDGES = (CHEESE_UNTIL, FLASH_FROM, FLASH_UNTIL, EVENING_FROM, XMAS_FROM, XMAS_UNTIL)


def _stamp(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


EXTRA_POLICIES = {
    "drill/noon-cheese.yaml": f"""
id: noon-cheese
title: Cheese on offer until Sunday noon
owner: drill
priority: 55
active: {{until: "{_stamp(CHEESE_UNTIL)}"}}
trigger:
  phrase: [cheese, fromage]
rules:
  - price: {{max: 9, strategy: override}}
  - boost: {{field: labels, values: [organic], weight: 2.0}}
explain: The cheese offer, until noon.
""",
    "drill/flash-juice.yaml": f"""
id: flash-juice
title: Members' flash sale on juice, 13:00 to 15:00
owner: drill
priority: 75
cohorts: [members]
active: {{from: "{_stamp(FLASH_FROM)}", until: "{_stamp(FLASH_UNTIL)}"}}
trigger:
  phrase: [juice, jus]
rules:
  - price: {{max: 3, strategy: override}}
explain: Two hours, members only.
""",
    "drill/evening-chocolate.yaml": f"""
id: evening-chocolate
title: From Sunday evening, chocolate in neutral order
owner: drill
priority: 95
active: {{from: "{_stamp(EVENING_FROM)}"}}
trigger:
  phrase: [chocolate, chocolat]
rules:
  - economics: {{margin_weight: 0, popularity_weight: 0}}
explain: Contests the margin weighting of the chocolate policy from 18:00.
""",
}
SECOND_VERSION = {
    "drill/clearance-cheese.yaml": """
id: clearance-cheese
title: Cheese shows what is on clearance first
owner: drill
priority: 45
trigger:
  phrase: [cheese, fromage, chocolate]
rules:
  - boost: {field: on_clearance, values: [true], weight: 3.0}
explain: The second version's policy.
""",
}

# --- the requests ---------------------------------------------------------------------------

INTENTS = (
    "chocolate", "Chocolate", "CHOCOLATE", "chocolate ", "dark chocolate", "Dark  Chocolate",
    "cheap chocolate", "chocolate under 5", "chocolate under 12", "chocolat sans arachide",
    "chocolate without peanuts", "straße chocolate", "strasse chocolate", "vegan chocolate",
    "orange juice", "juice", "Juice", "jus d'orange", "cheese", "cheap cheese", "fromage",
    "christmas", "noël", "clearance", "lentils", "zzqx plorf",
)
USERS = (None, "alice", "bruno", "chloe", "nobody-here")
COHORTS: tuple[tuple[str, ...], ...] = ((), ("vegan",), ("members",), ("members", "vegan"), ("staff",))
MARKETS = (None, "us", "fr", "de")
PAGES = (1, 2, 3, 100)
SIZES = (1, 3, 10, 50)
CATALOG_NAMES = (None, "default")


def _around(edge: datetime) -> tuple[datetime, ...]:
    return (
        edge - timedelta(seconds=1), edge - timedelta(microseconds=1), edge, edge + timedelta(microseconds=1)
    )


INSTANTS = (
    FIXED_NOW - timedelta(days=1), FIXED_NOW + timedelta(hours=2), datetime(2026, 12, 10, 12, tzinfo=UTC),
    *(instant for edge in EDGES for instant in _around(edge)),
)
FIELDS: dict[str, tuple[Any, ...]] = {
    "intent": INTENTS, "user_id": USERS, "cohorts": COHORTS, "market": MARKETS, "page": PAGES,
    "size": SIZES, "explain": (False, True), "catalog": CATALOG_NAMES, "now": INSTANTS,
}


def _body(**fields: Any) -> SearchBody:
    """A request as the API validates it (``now``: the preview instant, the search's instant)."""
    return SearchBody.model_validate({**fields, "now": _stamp(fields["now"])})


def _fields(body: SearchBody) -> dict[str, Any]:
    return {name: getattr(body, name) for name in FIELDS}


def _random_body(rng: random.Random) -> SearchBody:
    return _body(**{name: rng.choice(values) for name, values in FIELDS.items()})


def _one_field_changed(rng: random.Random, body: SearchBody) -> SearchBody:
    """``body`` with exactly one field changed: the instant, half the time, to the other
    side of the window edge nearest to it."""
    fields = _fields(body)
    name = rng.choice(list(FIELDS))
    now = body.now
    assert now is not None
    if name == "now" and rng.random() < 0.5:
        nearest = min(EDGES, key=lambda edge: abs(edge - now))
        fields["now"] = nearest if now < nearest else nearest - timedelta(microseconds=1)
    if fields["now"] == now or name != "now":
        fields[name] = rng.choice([value for value in FIELDS[name] if value != fields[name]])
    changed = _body(**fields)
    assert sum(getattr(changed, n) != getattr(body, n) for n in FIELDS) == 1, (body, changed)
    return changed


def sequence(seed: int, length: int) -> list[SearchBody]:
    """``length`` requests: fresh ones, and recent ones with one field changed."""
    rng = random.Random(seed)
    bodies: list[SearchBody] = []
    while len(bodies) < length:
        if bodies and rng.random() < 0.5:
            bodies.append(_one_field_changed(rng, rng.choice(bodies[-8:])))
        else:
            bodies.append(_random_body(rng))
    return bodies


def edge_crossings() -> list[SearchBody]:
    """For each window edge, a request its policy applies to, just before and just after the
    edge at the same key, in both orders (and a second before, then back)."""
    bases: dict[datetime, dict[str, Any]] = {
        CHEESE_UNTIL: {"intent": "cheese"},
        FLASH_FROM: {"intent": "orange juice", "cohorts": ("members",)},
        FLASH_UNTIL: {"intent": "juice", "cohorts": ("members",), "user_id": "alice"},
        EVENING_FROM: {"intent": "chocolate", "market": "us"},
        XMAS_FROM: {"intent": "dark chocolate", "user_id": "chloe", "explain": True},
        XMAS_UNTIL: {"intent": "chocolate", "cohorts": ("vegan",)},
    }
    bodies = []
    for edge, base in bases.items():
        before, at, after = edge - timedelta(microseconds=1), edge, edge + timedelta(microseconds=1)
        for instant in (before, at, before, after, edge - timedelta(seconds=1), at):
            bodies.append(_body(**{**base, "now": instant}))
    return bodies


# --- what is served ---------------------------------------------------------------------------


def observed(outcome: Outcome, body: SearchBody, profile: CatalogProfile) -> dict[str, Any]:
    execution, compiled = outcome.execution, outcome.compiled
    explanation = explanation_of(outcome, execution.tier, execution.dsl)
    return {
        "intent": compiled.intent,
        "version": compiled.policy_set_version,
        "dsl": json.dumps(execution.dsl, ensure_ascii=False),  # byte for byte, in its key order
        "hits": [(h.id, h.score, h.policies, h.sponsored_by) for h in execution.hits],
        "tier": execution.tier,
        "status": execution.status,
        "total": execution.total,
        "reason": execution.reason,
        "facets": json.dumps(execution.facets, ensure_ascii=False),
        "applied": explanation.get("applied"),
        "skipped": explanation.get("skipped"),
        "explanation": json.dumps(explanation, ensure_ascii=False),
        "answer": search_answer("drill", body, outcome, profile).decode(),
    }


def compiled_view(service: SearchService, body: SearchBody) -> dict[str, Any]:
    """What ``POST /v1/compile`` answers (the plan, the strict DSL, the explanation)."""
    assert body.now is not None
    compiled = service.compile(body, body.now)
    dsl = service.render(compiled, body, "strict")
    return {
        "intent": compiled.intent,
        "plan": json.dumps(compiled.plan_data(), ensure_ascii=False),
        "dsl": json.dumps(dsl, ensure_ascii=False),
        "explanation": json.dumps(explanation_of(compiled, "strict", dsl), ensure_ascii=False),
    }


def _differences(served: dict[str, Any], expected: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    return {name: (served[name], expected[name]) for name in expected if served[name] != expected[name]}


@dataclass
class Drill:
    cached: SearchService
    plain: SearchService
    profile: CatalogProfile
    loop: asyncio.AbstractEventLoop | None = None
    loop_engine: AsyncEngine | None = None
    found: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, int] = field(default_factory=dict)
    seen: list[tuple[SearchBody, dict[str, Any]]] = field(default_factory=list)

    def check(self, body: SearchBody, step: int, rng: random.Random) -> None:
        """``body`` through both services; any difference noted (with the step and the path)."""
        assert body.now is not None
        path = rng.choice(("search", "loop", "compile")) if self.loop is not None else "search"
        expected = observed(self.plain.search(body, body.now), body, self.profile)
        if path == "compile":
            served_plan, expected_plan = compiled_view(self.cached, body), compiled_view(self.plain, body)
            self._note(step, "compile", body, _differences(served_plan, expected_plan))
        outcome = None
        if path == "loop":
            assert self.loop is not None and self.loop_engine is not None
            loop_search = self.cached.search_cached(body, body.now, self.loop_engine)
            outcome = self.loop.run_until_complete(loop_search)
            path = "loop" if outcome is not None else "loop->search"
        if outcome is None:
            outcome = self.cached.search(body, body.now)
        self.paths[path] = self.paths.get(path, 0) + 1
        self._note(step, path, body, _differences(observed(outcome, body, self.profile), expected))
        self.seen.append((body, expected))

    def _note(self, step: int, path: str, body: SearchBody, differences: dict[str, Any]) -> None:
        if differences:
            self.found.append({"step": step, "path": path, "request": body.model_dump(mode="json"),
                               "differences": differences})

    def report(self) -> str:
        shown = []
        for finding in self.found[:5]:
            lines = [f"step {finding['step']} ({finding['path']}): {json.dumps(finding['request'])}"]
            for name, (served, expected) in finding["differences"].items():
                served, expected = str(served), str(expected)
                at = next((i for i, (a, b) in enumerate(zip(served, expected, strict=False)) if a != b), 0)
                start = max(at - 150, 0)
                lines.append(
                    f"  {name} (from character {at}):\n    cached: ...{served[start:at + 250]}"
                    f"\n    plain:  ...{expected[start:at + 250]}"
                )
            shown.append("\n".join(lines))
        return f"{len(self.found)} requests differ; the first:\n" + "\n".join(shown)


# --- fixtures ---------------------------------------------------------------------------------


def _tuned(settings: Settings, **search: Any) -> Settings:  # noqa: F811
    return settings.model_copy(update={"search": settings.search.model_copy(update=search)})


def _policy_dir(tmp_path: Path, name: str, *extras: dict[str, str]) -> Path:
    directory = tmp_path / name
    shutil.copytree(ROOT / "policies", directory)
    for files in extras:
        for relative, text in files.items():
            (directory / relative).parent.mkdir(parents=True, exist_ok=True)
            (directory / relative).write_text(text.lstrip(), encoding="utf-8")
    return directory


def _write(engine: Engine, prefix: str, profile: CatalogProfile, directory: Path) -> tuple[str, str]:
    policy_set = load_policy_set(directory, profile, field_types=field_types_of(profile))
    index = policy_store.write_index(engine, prefix, policy_set, analysis=profile.policy_analysis())
    return index, policy_set.version


@pytest.fixture()
def world(
    engine: Engine, settings: Settings, ready: Ready, index_prefix: str, tmp_path: Path  # noqa: F811
) -> Iterator[dict[str, Any]]:
    """Two policy versions (the demo's with the windows above; the same and one more policy)
    under this test's prefix, and this test's catalog alias, loaded with the demo catalog."""
    profile = profile_of(settings).model_copy(update={"alias": f"{index_prefix}-catalog"})
    first = _write(engine, index_prefix, profile, _policy_dir(tmp_path, "first", EXTRA_POLICIES))
    second_dir = _policy_dir(tmp_path, "second", EXTRA_POLICIES, SECOND_VERSION)
    second = _write(engine, index_prefix, profile, second_dir)
    assert first[1] != second[1]
    load_catalog(engine, profile, CATALOG)
    yield {"profile": profile, "first": first, "second": second, "prefix": index_prefix}


def _pair(
    engine: Engine, settings: Settings, profile: CatalogProfile, *, index: str | None, **search: Any  # noqa: F811
) -> tuple[SearchService, SearchService]:
    cached = _tuned(settings, **search)
    plain = _tuned(settings, **search, plan_cache_size=0, speculation=False)
    return (
        SearchService(cached, engine, profile, index=index),
        SearchService(plain, engine, profile, index=index),
    )


# --- the drills -------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "batching"), [(20261115, "serial"), (51, "together")])
def test_every_request_field_and_instant_is_served_as_uncached(
    engine: Engine, settings: Settings, world: dict[str, Any], seed: int, batching: str  # noqa: F811
) -> None:
    """One policy version and one catalog (watched values never due: the loop path serves
    what it can); random requests, one-field neighbours, and the window edges crossed."""
    profile: CatalogProfile = world["profile"]
    cached, plain = _pair(
        engine, settings, profile, index=world["first"][0],
        alias_watch_interval_s=3600.0, tier_batching=batching,
    )
    loop = asyncio.new_event_loop()
    loop_engine = AsyncEngine(settings.engine.url, settings.engine.timeout_s)
    drill = Drill(cached, plain, profile, loop, loop_engine)
    rng = random.Random(seed + 1)
    try:
        bodies = sequence(seed, 260)
        crossings = edge_crossings()
        for step, body in enumerate(bodies[:130] + crossings + bodies[130:]):
            drill.check(body, step, rng)
    finally:
        loop_engine.close()
        loop.run_until_complete(asyncio.sleep(0))  # the closed transports' callbacks close their sockets
        loop.close()
        cached.close()
        plain.close()
    assert drill.found == [], drill.report()
    # the drill exercised what it claims to: hits on cached plans, the loop path, and edges
    # across which the uncached plan changes
    assert cached.cache.hits > 50 and cached.cache.misses > 50, (cached.cache.hits, cached.cache.misses)
    assert drill.paths.get("loop", 0) >= 10 and drill.paths.get("compile", 0) > 20, drill.paths
    # each crossed edge changes what the uncached service serves (the edges are not vacuous)
    served_at = {
        (body.now, body.intent): seen["explanation"] for body, seen in drill.seen if body in crossings
    }
    unchanged = [
        edge for edge, body in zip(EDGES, crossings[::6], strict=True)
        if served_at[(edge - timedelta(microseconds=1), body.intent)] == served_at[(edge, body.intent)]
    ]
    assert unchanged == [], unchanged


def _move_policies(engine: Engine, prefix: str, index: str) -> None:
    alias = policy_store.alias_name(prefix, "live")
    policy_store.point_alias(engine, alias, index, expected=policy_store.single_target(engine, alias))


def test_state_moves_under_traffic_are_served_as_uncached(
    engine: Engine, settings: Settings, world: dict[str, Any], tmp_path: Path  # noqa: F811
) -> None:
    """Both services follow the live alias and re-read the catalog on every request
    (watch interval 0); between random requests the live version moves (first, second,
    first), the catalog is reloaded dearer and back, and a product is written into the
    served catalog index."""
    profile: CatalogProfile = world["profile"]
    prefix: str = world["prefix"]
    rows = [json.loads(line) for line in CATALOG.read_text(encoding="utf-8").splitlines() if line.strip()]
    dearer = tmp_path / "dearer.ndjson"
    dearer.write_text("".join(
        json.dumps({**row, "price": round(row["price"] * 3, 2)} if isinstance(row.get("price"), int | float)
                   else row) + "\n"
        for row in rows
    ), encoding="utf-8")
    policies = policy_store.alias_name(prefix, "live")
    policy_store.point_alias(engine, policies, world["first"][0], expected=None)
    search_settings = settings.model_copy(
        update={"policies": settings.policies.model_copy(update={"index_prefix": prefix})}
    )
    cached, plain = _pair(engine, search_settings, profile, index=None, alias_watch_interval_s=0.0)
    drill = Drill(cached, plain, profile)
    rng = random.Random(7)
    flipped = _body(intent="strasse chocolate", now=FIXED_NOW)  # falls back: strict 0, relaxed 23
    moves: list[Callable[[], Any]] = [
        lambda: _move_policies(engine, prefix, world["second"][0]),
        lambda: load_catalog(engine, profile, dearer),
        lambda: _move_policies(engine, prefix, world["first"][0]),
        lambda: load_catalog(engine, profile, CATALOG),
        lambda: _write_products(engine, profile, rows),
        lambda: _strict_reaches_min_hits(engine, plain, profile, flipped),
    ]
    try:
        bodies = sequence(99, 240)
        step = 0
        for number, body in enumerate(bodies):
            if number and number % 40 == 0:
                before = [flipped, flipped, *bodies[number - 20:number]]
                for again in before:  # the keys just cached: reused only if still right
                    drill.check(again, step := step + 1, rng)
                moves[number // 40 - 1]()
                for again in before:  # the same requests once the state moved
                    drill.check(again, step := step + 1, rng)
            drill.check(body, step := step + 1, rng)
        drill.check(flipped, step + 1, rng)  # the last move: once more, after every other request
        moves[-1]()
        for again in (flipped, flipped, flipped.model_copy(update={"size": 3})):
            drill.check(again, step := step + 1, rng)
    finally:
        cached.close()
        plain.close()
    assert drill.found == [], drill.report()
    assert cached.cache.hits > 30, (cached.cache.hits, cached.cache.misses)
    versions = {seen["version"] for _, seen in drill.seen}
    assert versions == {world["first"][1], world["second"][1]}, versions
    tiers = [seen["tier"] for body, seen in drill.seen if body == flipped]
    assert tiers[-3] == "relaxed" and tiers[-2:] == ["strict", "strict"], tiers  # the flip happened


def _write_products(engine: Engine, profile: CatalogProfile, rows: list[dict[str, Any]]) -> None:
    """A new chocolate (and a new cheese) in the index the catalog alias serves, made visible."""
    (index,) = engine.alias_targets(profile.alias)
    for source in (
        next(row for row in rows if row.get("category") == "Chocolates"),
        next(row for row in rows if "cheese" in json.dumps(row).casefold()),
    ):
        engine.index_document(index, f"drill-{source['id']}", {**source, "id": f"drill-{source['id']}"})
    engine.refresh(index)


def _strict_reaches_min_hits(
    engine: Engine, plain: SearchService, profile: CatalogProfile, body: SearchBody
) -> None:
    """Rewrite products ``body`` finds at relaxed only so that exactly enough of them match at
    strict: its strict tier reaches ``min_hits`` while its relaxed total stays what it was (a
    fallback replayed by that total alone would still serve relaxed)."""
    assert body.now is not None
    (index,) = engine.alias_targets(profile.alias)
    wide = body.model_copy(update={"size": 50, "page": 1})
    compiled = plain.compile(wide, body.now)

    def found(tier: Any) -> tuple[int, list[str]]:
        answer = engine.search(profile.alias, plain.render(compiled, wide, tier))
        return int(answer["hits"]["total"]["value"]), [hit["_id"] for hit in answer["hits"]["hits"]]

    (strict, strict_ids), (relaxed, relaxed_ids) = found("strict"), found("relaxed")
    wanted = plain.settings.search.min_hits - strict
    assert 0 < wanted < relaxed - strict, (strict, relaxed)
    residual = compiled.plan_data()["residual"]
    for product in [i for i in relaxed_ids if i not in strict_ids][:wanted]:
        source = engine.request("GET", f"/{index}/_doc/{product}")["_source"]
        engine.index_document(index, product, {**source, "title": f"{source['title']} {residual}"})
    engine.refresh(index)
    assert found("strict")[0] == plain.settings.search.min_hits and found("relaxed")[0] == relaxed
