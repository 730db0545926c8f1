"""The governed search pipeline, wired: normalise -> match (+ purchases, in the same
``_msearch``) -> compose -> render -> execute. Pure stages in the middle, engine I/O at the
ends. A miss whose percolation is guessed in process sends its match and the first tiers
of the plan guessed in one ``_msearch``, the match deciding whether those answers are
served (ADR 0048, ADR 0049).

One request works on one snapshot: the concrete policies index the live alias pointed
to when the request started, and the policy set stored in that index. A promotion that
moves the alias mid-request is seen by the next request, never half by this one.

The alias is watched, not looked up per request: it is re-read at most every
``search.alias_watch_interval_s`` (``time.monotonic``), by the first request that finds the
check due, and at once after a move made through this process (:meth:`SearchService.
alias_moved`). Whoever notices a new index loads its set while every other request goes on
with the previous set: no request waits on a lock while a set loads (only the very first
load, when there is nothing to serve yet). An alias found on several indices is refused
(503 ``policy_set_ambiguous``) until it points to one again.

Time is an input: ``compile`` and ``search`` take the instant the policies are evaluated
at (active windows, purchase ages, plan-cache validity). The service has no clock; the edge
that received the request passes its instant (see :mod:`control_plane.times`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control_plane import deadline, matcher, personalization, policy_store
from control_plane.catalog.profile import CatalogProfile
from control_plane.catalog.stats import CategoryStats, stats_from_json
from control_plane.composer import ComposeContext, compose
from control_plane.config import Settings
from control_plane.engine import Engine, EngineError, counted_requests
from control_plane.engine.base import msearch_responses
from control_plane.executor import (
    Execution,
    Steps,
    drive,
    drive_async,
    execution_steps,
    replay_of,
    replay_steps,
    resume,
    tier_batches,
    tiers_for,
)
from control_plane.intent_text import MAX_INTENT, NormalisedIntent, refusal, search_intent
from control_plane.matches import Matches
from control_plane.percolation_guess import Guessing
from control_plane.plan import Composition
from control_plane.plan_cache import (
    PlanCache,
    RenderedTier,
    Renderings,
    next_boundary,
    previous_boundary,
)
from control_plane.plan_data import explanation_data, plan_data
from control_plane.policy import Policy
from control_plane.renderer import Tier, render
from control_plane.watch import Refused, Watched

log = logging.getLogger("govsearch.search")

PURCHASES_INDEX = "govsearch-user-purchases"
CATALOG_AMBIGUOUS = "catalog_ambiguous"
IDENTIFIER = r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$"

if TYPE_CHECKING:
    from control_plane.audit.recorder import Recorder
    from control_plane.engine.aio import AsyncEngine

class SearchRequest(BaseModel):
    """What a chatbot or site backend asks. Bounded in every dimension."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intent: str = Field(min_length=1, max_length=MAX_INTENT)
    user_id: str | None = Field(default=None, pattern=IDENTIFIER)
    cohorts: tuple[Annotated[str, Field(pattern=IDENTIFIER)], ...] = Field(default=(), max_length=10)
    market: str | None = Field(default=None, pattern=r"^[a-z]{2}$")
    page: int = Field(default=1, ge=1, le=100)
    size: int = Field(default=10, ge=1, le=50)
    explain: bool = False

    @field_validator("cohorts")
    @classmethod
    def _cohorts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted(set(value)))

    @field_validator("intent")
    @classmethod
    def _intent(cls, value: str) -> str:
        text = search_intent(value).text  # (remembered when accepted: compiling normalises it again)
        problem = refusal(text)  # the bound holds for what is searched, not only what came
        if problem is not None:
            raise ValueError(problem)
        return value


class NoLivePolicySet(EngineError):
    """No policy set is published for the environment: nothing may be served."""


Snapshot = tuple[policy_store.LivePolicySet, dict[str, Policy]]
"""a policy set as served (its index and set) and its policies by id"""


@dataclass(frozen=True)
class Compiled:
    """A request compiled against one policy-set version: the plan, not yet executed."""

    policy_set_version: str
    policies_index: str
    intent: str
    """the normalised intent (:mod:`control_plane.intent_text`)"""
    composition: Composition
    personalization: tuple[tuple[str, float], ...]
    """(product id, boost) at the request's ``now``"""
    purchases: tuple[Mapping[str, Any], ...] = ()
    """the user's purchase rows the boosts come from (a cached plan re-ages them)"""
    cached: bool = False
    normalisation: NormalisedIntent | None = None
    """what normalising this request's intent did (per request: a cached plan is shared by
    every spelling that normalises to the same text)"""
    renderings: Renderings = field(default_factory=Renderings, compare=False, repr=False)
    """the bodies this plan rendered to and what was serialised from it, shared by every
    hit on the cached plan (:class:`~control_plane.plan_cache.Renderings`)"""

    def explanation_data(self) -> dict[str, Any]:
        """The composition's explanation as JSON data, dumped once per plan (read only)."""
        return self.renderings.memo("explanation", lambda: explanation_data(self.composition.explanation))

    def plan_data(self) -> dict[str, Any]:
        """The plan as JSON data, dumped once per plan (read only)."""
        return self.renderings.memo("plan", lambda: plan_data(self.composition.plan))


@dataclass(frozen=True)
class StageTiming:
    """One stage of one request: ``perf_counter_ns`` start and end (for spans)."""

    name: str
    start_ns: int
    end_ns: int

    @property
    def ms(self) -> float:
        return round((self.end_ns - self.start_ns) / 1e6, 3)


@dataclass(frozen=True)
class Outcome:
    compiled: Compiled
    execution: Execution
    now: datetime
    """the instant the request was evaluated at"""
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    stages: tuple[StageTiming, ...] = ()
    """percolate, purchases, compose, render.<tier>, tier.<tier>, in start order"""
    engine_requests: int = 0
    """engine round trips this request made (alias and catalog watches included when due)"""


class Catalog:
    """The live catalog: its alias, the price statistics stored with its index (503
    ``catalog_ambiguous`` when the alias points to several indices), and its *generation*:
    the index with its write and refresh counters, which change whenever what a search can
    find in it may have changed (a replayed fallback holds only within one generation).

    The alias is watched like the policies alias: re-read at most every
    ``watch_interval_s`` (``time.monotonic``) by the first request that finds the check
    due, with the counters; the statistics read once per index; meanwhile every request uses
    what was last read, with no engine round trip. Only the first read (nothing known yet)
    makes requests wait."""

    def __init__(self, engine: Engine, profile: CatalogProfile, *, watch_interval_s: float = 0.0) -> None:
        self.engine = engine
        self.profile = profile
        self._watch: Watched[CatalogState] = Watched(
            self._read,
            interval_s=watch_interval_s,
            unknown=lambda: EngineError(f"catalog alias {profile.alias}: its statistics could not be read"),
        )

    def stats(self) -> dict[str, CategoryStats]:
        return self._watch.get().stats

    def state(self) -> CatalogState:
        """The index, its statistics and its generation, as one read (re-read when due)."""
        return self._watch.get()

    def known_state(self) -> CatalogState | None:
        """:meth:`state` as last read, None when a read is due (no engine call here)."""
        return self._watch.peek()

    def _read(self, previous: CatalogState | None) -> CatalogState:
        """The alias's index, its counters, and its statistics (read again only when the
        alias moved)."""
        try:
            index = policy_store.single_target(self.engine, self.profile.alias, CATALOG_AMBIGUOUS)
        except policy_store.AmbiguousAlias as ambiguous:
            raise Refused(ambiguous) from ambiguous
        if index is None:
            raise Refused(EngineError(
                f"catalog alias {self.profile.alias} points to no index: load the catalog first"
            ))
        generation = (index, *_write_counters(self.engine, index))
        if previous is not None and previous.index == index:
            return previous if previous.generation == generation else replace(previous, generation=generation)
        mapping = self.engine.request("GET", f"/{index}/_mapping")
        meta = mapping[index]["mappings"].get("_meta", {}).get("govsearch", {})
        return CatalogState(index, stats_from_json(json.dumps(meta.get("price_stats", {}))), generation)


@dataclass(frozen=True)
class CatalogState:
    index: str
    stats: dict[str, CategoryStats]
    generation: tuple[Any, ...]


def _write_counters(engine: Engine, index: str) -> tuple[Any, ...]:
    """Operations written to ``index`` and refreshes of it, over every shard copy: equal
    counters, nothing a search can see has changed (any change is a write, made visible by
    a refresh; a counter that moves for another reason only costs a replay). Credentials
    without the index monitor privilege (401/403) get a value equal to nothing: no replay,
    every fallback run in full."""
    try:
        total = engine.request("GET", f"/{index}/_stats/indexing,refresh")["_all"]["total"]
    except EngineError as error:
        if error.status in (401, 403):
            return (object(),)
        raise
    indexing, refresh = total.get("indexing", {}), total.get("refresh", {})
    return tuple(
        int(part.get(name, 0))
        for part, name in (
            (indexing, "index_total"), (indexing, "delete_total"), (refresh, "total"),
            (refresh, "external_total"),
        )
    )


class Speculations:
    """How many speculated misses guessed right (their speculated answers served) and
    wrong (ADR 0048, ADR 0049): ``govsearch_speculation_total{guess}``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.right = self.wrong = 0

    def note(self, right: bool) -> None:
        with self._lock:
            if right:
                self.right += 1
            else:
                self.wrong += 1

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return self.right, self.wrong


class SearchService:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        profile: CatalogProfile,
        *,
        env: str = "live",
        index: str | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.settings = settings
        self.recorder = recorder
        """the audit recorder requests through this service are written to (the API's)"""
        self.engine = engine
        self.profile = profile
        self.env = env
        self.index = index
        """a concrete policies index to serve instead of ``env``'s alias (tests, diffs)"""
        self.catalog = Catalog(engine, profile, watch_interval_s=settings.search.alias_watch_interval_s)
        self.cache: PlanCache[Compiled] = PlanCache(settings.search.plan_cache_size)
        """compiled plans by (intent, cohorts, market): shared by every user"""
        self.purchases: PlanCache[tuple[Mapping[str, Any], ...]] = PlanCache(settings.search.plan_cache_size)
        """each user's purchase rows, kept as long as a plan would be (same window edges)"""
        self.percolations: PlanCache[matcher.Percolated] = PlanCache(settings.search.plan_cache_size)
        """what percolating each intent found, per load of the policies index (``triggers``
        layout, ``LivePolicySet.load``): it depends on nothing else, so a plan that misses for
        other cohorts, another market or past a window edge expands it again without a
        percolation (ADR 0043)"""
        self.guessing = Guessing(engine, profile.policy_analysis) if settings.search.speculation else None
        """the in-process guesses speculation sends a miss's tiers with (ADR 0049)"""
        self.speculations = Speculations()
        # a pinned index is read once: it never moves
        self._watch: Watched[Snapshot] = Watched(
            self._read,
            interval_s=math.inf if index else settings.search.alias_watch_interval_s,
            unknown=lambda: NoLivePolicySet(f"no policy set is published to '{env}'"),
        )
        """what requests are served from (replaced whole, never changed in place)"""
        self._check = self._watch.lock
        """held by whoever re-reads the alias and loads a set; requests never wait on it while
        there is a set to serve"""

    def close(self) -> None:
        """Stop the guesses' learner (the engine client is the caller's)."""
        if self.guessing is not None:
            self.guessing.close()

    # --- snapshot -----------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The policies index the environment's alias points to (as last watched), or the
        pinned index, with its set."""
        return self._watch.get()

    def alias_moved(self, env: str) -> None:
        """A move of ``env``'s alias was made through this process: re-read it now (the
        caller waits for the new set; requests go on with the previous one meanwhile)."""
        if env != self.env or self.index:
            return
        self._watch.reread()

    def _read(self, served: Snapshot | None) -> Snapshot:
        """Read the alias (or the pinned index) and load its set if it changed."""
        if self.index:
            index: str | None = self.index
        else:
            alias = policy_store.alias_name(self.settings.policies.index_prefix, self.env)
            try:
                index = policy_store.single_target(self.engine, alias)
            except policy_store.AmbiguousAlias as ambiguous:
                raise Refused(ambiguous) from ambiguous
        if index is None:
            raise Refused(NoLivePolicySet(f"no policy set is published to '{self.env}'"))
        if served is not None and served[0].index == index:
            return served
        # unchanged policies of the served version are reused, not validated again
        live = policy_store.read_index(self.engine, index, served[0] if served is not None else None)
        return live, live.policy_set.lookups().by_id  # built by read_index

    # --- pipeline -----------------------------------------------------------------

    @deadline.enforced
    def compile(self, request: SearchRequest, now: datetime) -> Compiled:
        """The plan for ``request`` with policies evaluated at ``now`` (windows, purchase
        ages): the caller's instant, never a clock read here."""
        return self._compile(self.snapshot(), self.catalog.state(), request, now, [])

    def _compile(
        self,
        snapshot: Snapshot,
        catalog: CatalogState,
        request: SearchRequest,
        now: datetime,
        stages: list[StageTiming],
    ) -> Compiled:
        """The plan is the same for every user (nothing in it depends on who asks: the
        purchase boosts are applied when rendering), so it is cached by intent, cohorts,
        market and catalog index; the user's purchase rows are cached apart, per user, for
        as long."""
        compiled = self._compile_from(snapshot, request, now, stages, cached_only=False, catalog=catalog)
        assert compiled is not None
        return compiled

    def _compile_from(
        self,
        snapshot: Snapshot,
        request: SearchRequest,
        now: datetime,
        stages: list[StageTiming],
        *,
        cached_only: bool,
        catalog: CatalogState,
        percolated: matcher.Percolated | None = None,
    ) -> Compiled | None:
        """:meth:`_compile` on ``snapshot``; ``cached_only``: None instead of any engine call
        (the plan or the user's purchases not cached); ``percolated``: what percolating the
        intent on the snapshot's index found, when the caller did it; ``catalog``: the
        catalog's state as the caller read it (the key's index, the composition's
        statistics)."""
        live, by_id = snapshot
        normalised = search_intent(request.intent)
        intent = normalised.text
        version = live.policy_set.version
        key = _plan_key(request, intent, catalog)
        counted = not cached_only  # a look the thread path may repeat counts there
        plan = self.cache.get(version, key, now, counted=counted)
        user = request.user_id
        rows = self.purchases.get(version, user, now, counted=counted) if user else ()
        if cached_only:
            if plan is None or rows is None:
                return None
            self.cache.note_hit()
            if user:
                self.purchases.note_hit()
        if plan is None:
            started = time.perf_counter_ns()
            first = None  # the first percolation page, when sent with the purchases lookup
            # an intent percolated on this index before (other cohorts or market, an earlier
            # window): its hits again, no round trip (ADR 0043); kept per load of the index:
            # one rewritten under its name and served again is another load
            scope = _percolation_scope(live)
            known = percolated
            if known is None and live.layout == "triggers":
                known = self.percolations.get(scope, intent, now)
            # both needed: one ``_msearch`` (ADR 0032); a legacy index is matched its own way,
            # so its purchases are looked up alone below (ADR 0037), as they are when the
            # percolation is known
            if user and rows is None and live.layout != "legacy" and known is None:
                first, found = _timed(
                    stages,
                    "purchases",
                    personalization.lookup_alongside,
                    self.engine,
                    PURCHASES_INDEX,
                    user,
                    matcher.percolation(live.index, intent, live.layout),
                )
                rows = tuple(found)
                self.purchases.put(version, user, rows, *_held_between(live, now))
            if live.layout == "triggers":
                if known is None:
                    known = matcher.percolated(self.engine, live.index, intent, first=first)
                    self.percolations.put(scope, intent, known, None)
                matches = matcher.expanded(intent, known, by_id, cohorts=request.cohorts, now=now)
            else:
                matches = matcher.match(
                    self.engine, live.index, intent, by_id, cohorts=request.cohorts, now=now,
                    first=first, layout=live.layout,
                )
            if percolated is None:  # else the caller timed the percolation it did
                stages.append(StageTiming("percolate", started, time.perf_counter_ns()))
            plan = self._planned(live, request, intent, matches, stages, catalog)
            self.cache.put(version, key, plan, *_held_between(live, now))
            hit = False
        else:
            hit = True
        if user and rows is None:  # the plan cached, the purchases not: the lookup alone
            rows = tuple(_timed(
                stages, "purchases", personalization.lookup_purchases, self.engine, PURCHASES_INDEX, user
            ))
            self.purchases.put(version, user, rows, *_held_between(live, now))
        return _for_request(plan, rows or (), now, normalised, cached=hit)

    def _planned(
        self,
        live: policy_store.LivePolicySet,
        request: SearchRequest,
        intent: str,
        matches: Matches,
        stages: list[StageTiming],
        catalog: CatalogState,
    ) -> Compiled:
        """The plan-cache entry of ``matches`` of ``intent`` on ``catalog`` (composed, timed
        into ``stages``): no user's boosts in it, they are added per request."""
        composition = _timed(
            stages, "compose", compose, live.policy_set, intent, matches, self._context(request, catalog)
        )
        return Compiled(
            policy_set_version=live.policy_set.version,
            policies_index=live.index,
            intent=intent,
            composition=composition,
            personalization=(),
        )

    def _context(self, request: SearchRequest, catalog: CatalogState) -> ComposeContext:
        return ComposeContext(
            cohorts=request.cohorts,
            market=request.market,
            category_field=self.profile.category,
            price_stats=catalog.stats,
            money=self.profile.money,
        )

    def render(self, compiled: Compiled, request: SearchRequest, tier: Tier) -> dict[str, Any]:
        return render(
            compiled.composition.plan,
            self.profile,
            engine=self.engine.kind,
            tier=tier,
            personalization=compiled.personalization,
            page=request.page,
            size=request.size,
        )

    def rendered(
        self,
        compiled: Compiled,
        request: SearchRequest,
        tier: Tier,
        stages: list[StageTiming] | None = None,
    ) -> RenderedTier:
        """``tier``'s body for ``request``, rendered once per plan, page, size and boosts
        (a hit whose purchase boosts re-age to other values renders anew); the rendering,
        when there is one, is timed into ``stages``."""
        key = (tier, request.page, request.size, compiled.personalization)

        def render() -> dict[str, Any]:
            if stages is None:
                return self.render(compiled, request, tier)
            body: dict[str, Any] = _timed(stages, f"render.{tier}", self.render, compiled, request, tier)
            return body

        return compiled.renderings.body(key, render)

    @deadline.enforced
    def search(self, request: SearchRequest, now: datetime) -> Outcome:
        """Compile ``request`` at ``now`` and execute it, falling back tier by tier."""
        with counted_requests() as requests:
            stages: list[StageTiming] = []
            started = time.perf_counter()
            snapshot = self.snapshot()
            catalog = self.catalog.state()  # read once: the plan's statistics, the tiers' generation
            speculated = (
                self._speculated(snapshot, catalog, request, now, stages)
                if self.settings.search.speculation else None
            )
            if speculated is None:
                compiled = self._compile(snapshot, catalog, request, now, stages)
                compiled_at = time.perf_counter()
                steps = self._executing(compiled, request, stages, catalog.generation)
                execution = drive(steps, self.engine.msearch)
            else:
                compiled, execution, compiled_at = speculated
            done = time.perf_counter()
        return _outcome(compiled, execution, stages, (started, compiled_at, done), now, requests[0])

    def _speculated(
        self,
        snapshot: Snapshot,
        catalog: CatalogState,
        request: SearchRequest,
        now: datetime,
        stages: list[StageTiming],
    ) -> tuple[Compiled, Execution, float] | None:
        """A plan miss (of a request without a user, or whose user's purchases are cached)
        whose percolation is guessed (:meth:`_guess`): its percolation and the first tiers
        of the plan the guess expands to, in one ``_msearch`` (ADR 0048, ADR 0049). The
        percolation decides. It found exactly the guess: that plan is the plan (the same
        composition of the same matches, hence the same bodies), cached as any, and those
        answers are its first tiers'. It found anything else: the answers are dropped and
        the plan is composed from what it found, as on any miss, without percolating
        again. None: not tried (a user whose purchases are not cached, a legacy index, no
        guess, a plan or a percolation known)."""
        live, by_id = snapshot
        if live.layout != "triggers" or not isinstance(by_id, matcher.PolicyMap):
            return None
        normalised = search_intent(request.intent)
        intent = normalised.text
        version = live.policy_set.version
        key = _plan_key(request, intent, catalog)
        scope = _percolation_scope(live)
        user = request.user_id
        rows = self.purchases.get(version, user, now, counted=False) if user else ()
        if (
            rows is None  # the user's purchases not known yet: they go with the percolation (ADR 0032)
            or self.cache.get(version, key, now, counted=False) is not None
            or self.percolations.get(scope, intent, now) is not None
        ):
            return None
        mark, started = len(stages), time.perf_counter_ns()
        guess = self._guess(live, scope, by_id.triggers, intent)
        if guess is None:
            return None
        try:
            guessed = matcher.expanded(intent, guess, by_id, cohorts=request.cohorts, now=now)
            plan = self._planned(live, request, intent, guessed, stages, catalog)
        except ValueError:  # a guess no percolation gives (spans outside the intent): not tried
            log.exception("a percolation guess could not be composed (the miss goes unspeculated)")
            del stages[mark:]
            return None
        compiled = _for_request(plan, rows, now, normalised, cached=False)
        steps = self._executing(compiled, request, stages, catalog.generation)
        searches = next(steps)
        sent: list[tuple[str, Mapping[str, Any] | str]] = [
            matcher.percolation(live.index, intent, live.layout), *searches
        ]
        answers = self.engine.msearch_answers(sent)  # checked below: the percolation first
        (first,) = msearch_responses(sent[:1], answers[:1])  # failed: the request fails closed
        known = matcher.percolated(self.engine, live.index, intent, first=first)
        percolate = StageTiming("percolate", started, time.perf_counter_ns())
        self.percolations.put(scope, intent, known, None)
        right = list(known.items()) == list(guess.items())
        self.speculations.note(right)
        if not right:  # a miss like any other, its percolation done
            steps.close()
            stages[mark:] = [percolate]  # the plan's own compose and renders are timed next
            found = self._compile_from(
                snapshot, request, now, stages, cached_only=False, percolated=known, catalog=catalog
            )
            assert found is not None
            compiled_at = time.perf_counter()
            steps = self._executing(found, request, stages, catalog.generation)
            return found, drive(steps, self.engine.msearch), compiled_at
        stages.append(percolate)
        self.cache.note_miss()
        if user:
            self.purchases.note_hit()
        self.cache.put(version, key, plan, *_held_between(live, now))
        compiled_at = time.perf_counter()
        # the guess was right: its tiers' answers are served, so checked as any (a failed one fails
        # the request closed); a wrong guess's were dropped above, whatever they were
        tiers = msearch_responses(searches, answers[1:])
        return compiled, resume(steps, tiers, self.engine.msearch), compiled_at

    def _guess(
        self, live: policy_store.LivePolicySet, scope: str, triggers: matcher.Triggers, intent: str
    ) -> matcher.Percolated | None:
        """What percolating ``intent`` on ``live`` (loaded as ``scope``) will find, guessed in
        process (ADR 0049): the version's learned guess when there is one, else nothing found
        when the intent shares no word with any trigger phrase (ADR 0048); None: no guess."""
        found = None
        if self.guessing is not None:
            try:
                found = self.guessing.guess(scope, live.index, triggers.documents, intent)
            except Exception:  # a guess is an optimisation: it never fails a request
                log.exception("the percolation guess failed (the miss goes unspeculated)")
        if found is None and not triggers.may_match(intent):
            return {}
        return found

    async def search_cached(
        self, request: SearchRequest, now: datetime, engine: AsyncEngine
    ) -> Outcome | None:
        """:meth:`search` from the event loop, when it needs no engine call but its tiers'
        (the plan and the user's purchases cached, no watch due): the same plan, requests
        and answer, the ``_msearch`` sent through ``engine``. None when it would need
        another call: the caller runs :meth:`search` in a thread instead (ADR 0030)."""
        with deadline.enforcing(), counted_requests() as requests:
            snapshot = self._watch.peek()
            catalog = self.catalog.known_state()
            if snapshot is None or catalog is None:
                return None
            stages: list[StageTiming] = []
            started = time.perf_counter()
            compiled = self._compile_from(snapshot, request, now, stages, cached_only=True, catalog=catalog)
            if compiled is None:
                return None
            compiled_at = time.perf_counter()
            execution = await drive_async(
                self._executing(compiled, request, stages, catalog.generation), engine.msearch
            )
            done = time.perf_counter()
        return _outcome(compiled, execution, stages, (started, compiled_at, done), now, requests[0])

    def _executing(
        self,
        compiled: Compiled,
        request: SearchRequest,
        stages: list[StageTiming],
        generation: tuple[Any, ...],
    ) -> Steps[Execution]:
        """The tiers of ``compiled`` as steps: the served tier alone while the last run's
        fallback replays at this catalog ``generation``, else the tiers in their batches."""

        def render_tier(tier: Tier) -> RenderedTier:
            return self.rendered(compiled, request, tier, stages)

        plan = compiled.composition.plan
        renderings = compiled.renderings
        key = (generation, compiled.personalization)
        memo = renderings.replay
        execution = None
        if memo is not None and memo.key == key:
            execution = yield from replay_steps(self.profile.alias, render_tier, memo)
        if execution is None:
            execution = yield from execution_steps(
                self.profile.alias,
                plan,
                render_tier,
                min_hits=self.settings.search.min_hits,
                batches=tier_batches(
                    tiers_for(plan), self.settings.search.tier_batching, renderings.stop_tier
                ),
            )
            renderings.replay = replay_of(execution, key)
        renderings.stop_tier = execution.runs[-1].tier
        return execution


def _plan_key(
    request: SearchRequest, intent: str, catalog: CatalogState
) -> tuple[str, tuple[str, ...], str | None, str]:
    """The plan cache's key for ``request`` of normalised ``intent`` on ``catalog``: no user
    in it, a plan is shared by every user. The intent as normalised, not folded further (the
    plan holds its text: the query's, the record's); the catalog's index, whose price
    statistics the plan's relative prices were resolved with (a reload is another index)."""
    return (intent, request.cohorts, request.market, catalog.index)


def _percolation_scope(live: policy_store.LivePolicySet) -> str:
    """What a kept percolation holds for: one load of the policies index (one rewritten
    under its name and served again is another load)."""
    return f"{live.index}#{live.load}"


def _held_between(live: policy_store.LivePolicySet, now: datetime) -> tuple[datetime | None, datetime | None]:
    """The window edges around ``now`` a cache entry made at ``now`` holds between."""
    return next_boundary(live.policy_set, now), previous_boundary(live.policy_set, now)


def _for_request(
    plan: Compiled, rows: tuple[Mapping[str, Any], ...], now: datetime, normalised: NormalisedIntent,
    *, cached: bool,
) -> Compiled:
    """The plan-cache entry ``plan`` for one request: its user's purchase ``rows`` and their
    boosts at ``now`` (purchase ages move on; the plan holds until the next window edge), and
    how its intent was normalised."""
    return replace(
        plan,
        cached=cached,
        personalization=personalization.purchase_boosts(rows, now),
        purchases=rows,
        normalisation=normalised,
    )


def _outcome(
    compiled: Compiled,
    execution: Execution,
    stages: list[StageTiming],
    instants: tuple[float, float, float],
    now: datetime,
    engine_requests: int,
) -> Outcome:
    started, compiled_at, done = instants
    stages.extend(_tier_timings(execution))
    latency = {
        "compile": round((compiled_at - started) * 1000, 3),
        "execute": round((done - compiled_at) * 1000, 3),
        "total": round((done - started) * 1000, 3),
    }
    latency.update({stage.name: stage.ms for stage in stages})
    return Outcome(
        compiled=compiled,
        execution=execution,
        latency_ms=latency,
        stages=tuple(sorted(stages, key=lambda stage: stage.start_ns)),
        now=now,
        engine_requests=engine_requests,
    )


def _timed(stages: list[StageTiming], name: str, run: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run one stage and note its timing (``list.append`` is atomic: safe from the pool)."""
    start = time.perf_counter_ns()
    try:
        return run(*args, **kwargs)
    finally:
        stages.append(StageTiming(name, start, time.perf_counter_ns()))


def _tier_timings(execution: Execution) -> list[StageTiming]:
    """Each tier's engine round trip (the tiers sent together share theirs)."""
    return [
        StageTiming(f"tier.{run.tier}", run.start_ns, run.start_ns + int(run.took_ms * 1e6))
        for run in execution.runs
        if not run.replayed
    ]
