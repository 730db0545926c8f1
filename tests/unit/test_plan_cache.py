"""The plan cache holds an entry only between the window boundaries around the time it
was compiled for."""

from __future__ import annotations

from datetime import UTC, datetime

from control_plane.loader import load_policy_set
from control_plane.plan_cache import PlanCache, next_boundary, previous_boundary

SET = load_policy_set("policies")  # christmas-chocolate: [2026-12-01, 2026-12-26)
NOV_30 = datetime(2026, 11, 30, 12, tzinfo=UTC)
DEC_10 = datetime(2026, 12, 10, 12, tzinfo=UTC)
DEC_20 = datetime(2026, 12, 20, 12, tzinfo=UTC)
DEC_27 = datetime(2026, 12, 27, 12, tzinfo=UTC)


def cached_at(moment: datetime) -> PlanCache[str]:
    cache: PlanCache[str] = PlanCache(10)
    cache.put("v", "k", "plan", next_boundary(SET, moment), previous_boundary(SET, moment))
    return cache


def test_boundaries_around_a_moment() -> None:
    assert previous_boundary(SET, DEC_10) == datetime(2026, 12, 1, tzinfo=UTC)
    assert next_boundary(SET, DEC_10) == datetime(2026, 12, 26, tzinfo=UTC)
    assert previous_boundary(SET, datetime(2026, 12, 1, tzinfo=UTC)) == datetime(2026, 12, 1, tzinfo=UTC)


def test_an_entry_serves_its_own_window_only() -> None:
    cache = cached_at(DEC_10)
    assert cache.get("v", "k", DEC_20) == "plan"
    assert cache.get("v", "k", NOV_30) is None  # before the window it was compiled in
    assert cache.get("v", "k", DEC_27) is None  # after it


def test_an_entry_before_every_window_expires_at_the_first() -> None:
    cache = cached_at(NOV_30)
    assert cache.get("v", "k", datetime(2026, 11, 1, tzinfo=UTC)) == "plan"
    assert cache.get("v", "k", DEC_10) is None


# --- what a cached plan rendered to -------------------------------------------------------


def test_a_rendering_is_made_once_per_key_and_kept_as_sent() -> None:
    from control_plane.plan_cache import Renderings

    renderings = Renderings(limit=2)
    calls: list[str] = []

    def render(name: str) -> dict[str, object]:
        calls.append(name)
        return {"query": {"match": {"title": "chocolat noir"}}, "name": name}

    first = renderings.body("a", lambda: render("a"))
    assert renderings.body("a", lambda: render("again")) is first and calls == ["a"]
    assert first.text == '{"query": {"match": {"title": "chocolat noir"}}, "name": "a"}'
    renderings.body("b", lambda: render("b"))
    renderings.body("c", lambda: render("c"))  # over the limit: the least recently used goes
    assert len(renderings) == 2
    renderings.body("a", lambda: render("a"))
    assert calls == ["a", "b", "c", "a"]
    assert renderings.memo("x", lambda: [1]) is renderings.memo("x", lambda: [2])


def test_tier_batches() -> None:
    from control_plane.executor import tier_batches
    from control_plane.renderer import TIERS

    assert tier_batches(TIERS, "serial") == (("strict",), ("relaxed",), ("broad",))
    assert tier_batches(TIERS, "serial", "broad") == (TIERS,)
    assert tier_batches(TIERS, "serial", "strict") == (("strict",), ("relaxed",), ("broad",))
    assert tier_batches(TIERS, "serial", "relaxed") == (("strict", "relaxed"), ("broad",))
    assert tier_batches(TIERS, "together") == (TIERS,)
    assert tier_batches(TIERS, "strict_first") == (("strict",), ("relaxed", "broad"))
    # where the plan stopped last time: up to it in one request, the rest after
    assert tier_batches(TIERS, "together", "strict") == (("strict",), ("relaxed", "broad"))
    assert tier_batches(TIERS, "strict_first", "relaxed") == (("strict", "relaxed"), ("broad",))
    assert tier_batches(TIERS, "strict_first", "broad") == (TIERS,)
    assert tier_batches(("strict",), "together", "broad") == (("strict",),)
    # the cheap tiers together, broad (fuzzy, the expensive one) alone and only if needed
    assert tier_batches(TIERS, "cheap_first") == (("strict", "relaxed"), ("broad",))
    assert tier_batches(TIERS, "cheap_first", "strict") == (("strict",), ("relaxed",), ("broad",))
    assert tier_batches(TIERS, "cheap_first", "broad") == (TIERS,)
    assert tier_batches(("strict",), "cheap_first") == (("strict",),)
