"""Policy sets in the engine: one immutable percolator index per version, behind aliases.

``publish`` writes a policy set to ``PREFIX-<version[:16]>`` (if that index does not exist
yet), marks it read-only and moves an alias (``PREFIX-live``, ``PREFIX-staging``) to it in
one atomic ``_aliases`` call. ``resolve`` reads an alias back into the concrete index and
its policy set, so every request works on one index and one set: never a mix.

The index holds one percolator document per distinct trigger query (phrase, cue or exact
phrase, :func:`control_plane.matcher.index_documents`; the policies using each are kept in
memory, not in the index), a layout marker and the policy-set document (ADR 0015).
They are written in bulk batches bounded in documents and bytes (:data:`BATCH_DOCUMENTS`,
:data:`BATCH_BYTES`; one 105 MB request for 100,000 policies was refused with 429), with
progress reported to the :func:`reporting` callback if one is set. Any failure deletes the
half-written index before anything points to it: no alias ever sees a partial set.

Every alias move is a compare-and-swap (:func:`point_alias`): it names the index it
expects to replace, and the engine refuses the whole call when the alias is no longer
there (``remove`` with ``must_exist``). A first move (no alias yet) consumes a placeholder
index named like the alias (``remove_index``), which cannot exist once the alias does: of
two concurrent movers, exactly one wins and the other gets :class:`AliasMoved`. An alias
found on more than one index is never served (:class:`AmbiguousAlias`).
"""

from __future__ import annotations

import bisect
import contextvars
import gc
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from control_plane.catalog import analysis as catalog_analysis
from control_plane.catalog.analysis import PolicyAnalysis
from control_plane.config import CatalogSettings, project_path
from control_plane.engine import Engine, EngineError
from control_plane.intent_text import normalise
from control_plane.matcher import Layout, index_documents, layout_of
from control_plane.policy import PolicySet
from control_plane.policy_digests import Digests, load_set
from control_plane.policy_index import index_of

META_ID = "__policy_set__"
#: at most this many documents per bulk request
BATCH_DOCUMENTS = 2000
#: and about this many bytes of NDJSON (a batch closes before it would pass it)
BATCH_BYTES = 4 * 1024 * 1024
#: attempts per batch when the engine answers 429 (too many requests)
BATCH_ATTEMPTS = 4

Progress = Callable[[int, int], None]
"""``progress(written, total)``: documents written so far, out of ``total``"""
_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar("publish_progress", default=None)


@contextmanager
def reporting(progress: Progress) -> Iterator[None]:
    """Report the progress of every index written in this block (e.g. a terminal bar)."""
    token = _PROGRESS.set(progress)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


@lru_cache(maxsize=1)
def _policies_template() -> dict[str, Any]:
    mapping: dict[str, Any] = json.loads(project_path("mappings/policies.json").read_text(encoding="utf-8"))
    return mapping


@lru_cache(maxsize=1)
def default_analysis() -> PolicyAnalysis:
    """The analysis of the default catalog profile (for callers that name none)."""
    from control_plane.catalog.profile import load_profile

    return load_profile(project_path(CatalogSettings().profile)).policy_analysis()


def policies_mapping(analysis: PolicyAnalysis | None = None) -> dict[str, Any]:
    """The policies index body, analysed like the catalog (``analysis``: the catalog
    profile's :meth:`~control_plane.catalog.profile.CatalogProfile.policy_analysis`)."""
    return catalog_analysis.policies_mapping(_policies_template(), analysis or default_analysis())


class AnalysisChanged(ValueError):
    """A served index of this version was written with another analysis than asked for
    (a configuration conflict, not an engine failure: the workflow refuses with it)."""

    code = "analysis_changed"

    def __init__(self, index: str, aliases: list[str], found: str | None, wanted: PolicyAnalysis) -> None:
        was = f"analysis {found}" if found else "the built-in govsearch_text of earlier releases"
        super().__init__(
            f"policies index {index} holds this version analysed with {was}, and the catalog profile"
            f" now asks for analysis {wanted.fingerprint} (analyzer {wanted.analyzer}). It is served by"
            f" {', '.join(aliases)} and keeps serving as it was written. To reload it with the new"
            f" analysis, point {', '.join(aliases)} to another version (or delete {index}), then"
            " publish again."
        )
        self.index, self.aliases, self.found, self.wanted = index, aliases, found, wanted


def index_analysis(engine: Engine, index: str) -> str | None:
    """The analysis fingerprint a policies index was written with (None: written before
    fingerprints, with the built-in ``govsearch_text``, or incomplete)."""
    meta = engine.get_document(index, META_ID, source=["analysis"])  # not the whole set
    found = meta["_source"].get("analysis") if meta else None
    return found if isinstance(found, str) else None


_LOADS = itertools.count()
"""the process's loads of policies indices, numbered (``LivePolicySet.load``)"""


@dataclass(frozen=True)
class LivePolicySet:
    """A policy set as served: the concrete index holding it, and the set itself."""

    index: str
    policy_set: PolicySet
    digests: Digests = field(default_factory=dict, repr=False, compare=False)
    """policy id -> digest of the stored document its policy was validated from (what the
    next version's load may reuse: :mod:`control_plane.policy_digests`)"""
    reused: int = field(default=0, compare=False)
    """how many policies this load took from the previous version instead of validating"""
    layout: Layout | None = field(default=None, compare=False)
    """how the index stores its triggers (:func:`control_plane.matcher.layout_of`), read
    as the version is loaded; None where it was not read: the matcher asks per request"""
    load: int = field(default_factory=lambda: next(_LOADS), compare=False)
    """this load's number in the process (each read of an index is another): what is kept
    of what the index answered (the percolations, ADR 0043) is kept per load, since an index
    no alias serves may be rewritten under the same name (another analysis) and served again"""



def index_name(prefix: str, version: str) -> str:
    return f"{prefix}-{version[:16]}"


def alias_name(prefix: str, env: str) -> str:
    return f"{prefix}-{env}"


def write_index(
    engine: Engine,
    prefix: str,
    policy_set: PolicySet,
    *,
    batch_documents: int | None = None,
    batch_bytes: int | None = None,
    analysis: PolicyAnalysis | None = None,
) -> str:
    """Create the immutable index for ``policy_set`` (idempotent); return its name.
    Batches default to :data:`BATCH_DOCUMENTS` documents and :data:`BATCH_BYTES` bytes.
    ``analysis`` (default: the default catalog profile's) is the chain triggers get; an
    existing index of the version written with another one is rewritten, or, when an alias
    serves it, kept and refused (:class:`AnalysisChanged`)."""
    analysis = analysis or default_analysis()
    name = index_name(prefix, policy_set.version)
    if engine.index_exists(name):
        # not the set itself: 38 MB at 100,000 policies
        meta = engine.get_document(name, META_ID, source=("policy_set_version", "analysis"))
        if meta and meta["_source"].get("policy_set_version") == policy_set.version:
            found = meta["_source"].get("analysis")
            if found == analysis.fingerprint:
                return name
            aliases = sorted(engine.request("GET", f"/{name}/_alias").get(name, {}).get("aliases", {}))
            if aliases:
                raise AnalysisChanged(name, aliases, found, analysis)
        engine.delete_index(name)  # a half-written index, or one analysed otherwise
    engine.create_index(name, policies_mapping(analysis))
    try:
        counts = token_counts(engine, name, analysis.analyzer, _exact_phrases(policy_set))

        def count_tokens(phrase: str) -> int:
            if phrase not in counts:
                counts[phrase] = len(engine.analyze(name, analysis.analyzer, phrase))
            return counts[phrase]

        documents = list(index_documents(policy_set.policies, count_tokens))
        total = len(documents)
        written = 0
        progress = _PROGRESS.get()
        bounds = (batch_documents or BATCH_DOCUMENTS, batch_bytes or BATCH_BYTES)
        for batch in batches(name, documents, *bounds):
            _send(engine, batch.payload)
            written += batch.documents
            if progress is not None:
                progress(written, total)
        engine.refresh(name)
        # The meta document is written last: its presence marks the index complete.
        engine.index_document(
            name,
            META_ID,
            {
                "doc_type": "policy_set",
                "policy_set_version": policy_set.version,
                "analysis": analysis.fingerprint,
                "policy_set": json.loads(policy_set.model_dump_json(by_alias=True)),
            },
            refresh=True,
        )
        engine.request("PUT", f"/{name}/_settings", body={"index.blocks.write": True})
    except BaseException:
        engine.delete_index(name)
        raise
    return name


#: texts and characters per ``_analyze`` request of :func:`analysed_values` (the engine
#: refuses a request past ``index.analyze.max_token_count``, 10,000 tokens by default)
ANALYZE_BATCH = 500
ANALYZE_CHARS = 4000


def token_counts(engine: Engine, index: str, analyzer: str, phrases: Iterable[str]) -> dict[str, int]:
    """How many tokens ``analyzer`` makes of each phrase (:func:`analysed_values`: one
    request per :data:`ANALYZE_BATCH` phrases, one per phrase before: a third of a
    20,000-policy publish)."""
    return {phrase: len(tokens) for phrase, _, tokens in analysed_values(engine, index, analyzer, phrases)}


def analysed_values(
    engine: Engine, index: str, analyzer: str, texts: Iterable[str]
) -> Iterator[tuple[str, int, list[dict[str, Any]]]]:
    """Each distinct text, where it starts in its request, and the tokens ``analyzer`` makes
    of it: :data:`ANALYZE_BATCH` texts (at most :data:`ANALYZE_CHARS` characters) per
    ``_analyze`` request. The engine analyses an array as one text, each value
    ``offset_gap`` (1) after the end of the one before, offsets in UTF-16 code units: a
    token belongs to the value whose range holds its start offset."""
    for chunk in _chunks(list(dict.fromkeys(texts))):
        result = engine.request("POST", f"/{index}/_analyze", body={"analyzer": analyzer, "text": chunk})
        starts: list[int] = []
        position = 0
        for text in chunk:
            starts.append(position)
            position += len(text.encode("utf-16-le")) // 2 + 1
        found: list[list[dict[str, Any]]] = [[] for _ in chunk]
        for token in result.get("tokens", []):
            found[bisect.bisect_right(starts, token["start_offset"]) - 1].append(token)
        yield from zip(chunk, starts, found, strict=True)


def _chunks(phrases: list[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for phrase in phrases:
        if chunk and (len(chunk) >= ANALYZE_BATCH or size + len(phrase) > ANALYZE_CHARS):
            yield chunk
            chunk, size = [], 0
        chunk.append(phrase)
        size += len(phrase) + 1
    if chunk:
        yield chunk


def _exact_phrases(policy_set: PolicySet) -> set[str]:
    """The normalised phrases of ``exact`` triggers: the ones the index counts tokens of."""
    return {
        text
        for policy in policy_set.policies
        if policy.trigger.kind == "exact"
        for value in policy.trigger.values
        if (text := normalise(value))
    }


@dataclass(frozen=True)
class Batch:
    """One bulk request: its NDJSON body and how many documents it holds."""

    payload: str
    documents: int


def batches(
    index: str, documents: Iterable[tuple[str, dict[str, Any]]], max_documents: int, max_bytes: int
) -> Iterator[Batch]:
    """``(id, source)`` documents as bulk bodies of at most ``max_documents`` documents and
    ``max_bytes`` UTF-8 bytes (a single larger document goes alone)."""
    lines: list[str] = []
    size = 0
    for doc_id, source in documents:
        pair = (
            json.dumps({"index": {"_index": index, "_id": doc_id}}, ensure_ascii=False)
            + "\n"
            + json.dumps(source, ensure_ascii=False)
            + "\n"
        )
        length = len(pair.encode("utf-8"))
        if lines and (len(lines) >= max_documents or size + length > max_bytes):
            yield Batch("".join(lines), len(lines))
            lines, size = [], 0
        lines.append(pair)
        size += length
    if lines:
        yield Batch("".join(lines), len(lines))


def _send(engine: Engine, payload: str) -> None:
    """One bulk request; retried with a backoff while the engine answers 429."""
    for attempt in range(BATCH_ATTEMPTS):
        try:
            result: dict[str, Any] = engine.request("POST", "/_bulk", body=payload)
        except EngineError as error:
            if error.status != 429 or attempt == BATCH_ATTEMPTS - 1:
                raise
            time.sleep(0.5 * 2**attempt)
            continue
        if result.get("errors"):
            failed = [i for i in result["items"] if i["index"].get("error")]
            raise EngineError(f"{len(failed)} policy documents were refused by the engine: {failed[0]}")
        return


def publish(
    engine: Engine, prefix: str, policy_set: PolicySet, env: str, analysis: PolicyAnalysis | None = None
) -> str:
    """Write the set's index and point ``env``'s alias at it, atomically (a compare-and-swap
    against the index the alias was on just before: a concurrent move raises AliasMoved)."""
    name = write_index(engine, prefix, policy_set, analysis=analysis)
    alias = alias_name(prefix, env)
    point_alias(engine, alias, name, expected=single_target(engine, alias))
    return name


class AliasMoved(Exception):
    """A compare-and-swap alias move lost: the alias was not on the index it expected."""

    def __init__(self, alias: str, expected: str | None, current: list[str]) -> None:
        where = ", ".join(current) or "no index"
        super().__init__(
            f"alias {alias} moved meanwhile: expected it on {expected or 'no index'}, it is on {where}"
        )
        self.alias, self.expected, self.current = alias, expected, current


class AmbiguousAlias(EngineError):
    """An alias points to more than one index: nothing is served from it."""

    code = "alias_ambiguous"

    def __init__(self, alias: str, targets: list[str], code: str | None = None) -> None:
        super().__init__(
            f"alias {alias} points to {len(targets)} indices ({', '.join(targets)}); refusing to pick"
            " one: point it at exactly one index"
        )
        self.alias, self.targets = alias, targets
        if code is not None:
            self.code = code


POLICY_SET_AMBIGUOUS = "policy_set_ambiguous"


def single_target(engine: Engine, alias: str, code: str = POLICY_SET_AMBIGUOUS) -> str | None:
    """The one index ``alias`` points to (None when it does not exist); AmbiguousAlias when
    it points to several."""
    targets = engine.alias_targets(alias)
    if len(targets) > 1:
        raise AmbiguousAlias(alias, targets, code)
    return targets[0] if targets else None


def move_actions(alias: str, index: str, expected: str) -> list[dict[str, Any]]:
    """The ``_aliases`` actions moving ``alias`` from ``expected`` (it must be there) to
    ``index`` alone."""
    return [
        {"remove": {"index": expected, "alias": alias, "must_exist": True}},
        {"remove": {"index": "*", "alias": alias, "must_exist": False}},  # anything else: one after
        {"add": {"index": index, "alias": alias}},
    ]


WILDCARD_ATTEMPTS = 10
"""how many times a move is made again when an index its wildcard named was deleted meanwhile"""


def point_alias(
    engine: Engine,
    alias: str,
    index: str,
    *,
    expected: str | None,
    also: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Move ``alias`` from ``expected`` (None: the alias does not exist yet) to ``index`` in
    one conditional ``_aliases`` call; AliasMoved when the alias is not on ``expected`` any
    more. Afterwards the alias is on ``index`` alone. ``index`` must exist. ``also``: more
    actions applied in the same atomic call (a move intent's marker step); when one of
    their conditions fails while the alias is still on ``expected``, the EngineError.

    The call's ``remove`` from ``*`` is expanded to every index of the cluster when the
    call is made: another index deleted at that moment (anyone's: an old version, another
    application's, a rolled-over log) made the whole call fail with ``index_not_found``,
    a third of the moves of a cluster creating and deleting an index every few milliseconds.
    The call is atomic, so such a failure changed nothing: while the alias is still on
    ``expected`` and the missing index is none the call names, it is made again (at most
    :data:`WILDCARD_ATTEMPTS` times)."""
    actions: list[dict[str, Any]]
    if expected is None:
        _claim_placeholder(engine, alias)
        actions = [{"remove_index": {"index": alias}}, {"add": {"index": index, "alias": alias}}]
    else:
        actions = move_actions(alias, index, expected)
    actions.extend(dict(action) for action in also)
    named = {alias, index, expected} | {
        str(body.get("index")) for action in also for body in action.values() if isinstance(body, Mapping)
    }
    for attempt in range(1, WILDCARD_ATTEMPTS + 1):
        try:
            engine.update_aliases(actions)
            return
        except EngineError as error:
            if error.status not in (400, 404):  # a timeout or an engine failure: not a lost race
                raise
            current = engine.alias_targets(alias)
            if current != ([expected] if expected else []):
                raise AliasMoved(alias, expected, current) from error
            missing = _missing_index(error)
            if missing is None or missing in named or attempt == WILDCARD_ATTEMPTS:
                raise  # the condition still holds: the call failed for another reason


def _missing_index(error: EngineError) -> str | None:
    """The index an ``index_not_found_exception`` names, else None."""
    info = error.info if isinstance(error.info, Mapping) else {}
    cause = info.get("error")
    if not isinstance(cause, Mapping) or cause.get("type") != "index_not_found_exception":
        return None
    missing = cause.get("index")
    return missing if isinstance(missing, str) else None


def _claim_placeholder(engine: Engine, alias: str) -> None:
    """Create the empty index named like ``alias`` that a first move consumes; it cannot be
    created once the alias exists (the engine keeps one namespace for both)."""
    try:
        engine.create_index(alias, {"settings": {"number_of_shards": 1, "number_of_replicas": 0}})
    except EngineError as error:
        text = f"{error} {error.info}"
        if "already_exists" in text or "already exists as alias" in text:
            return  # another mover's placeholder, or the alias: the _aliases call decides
        raise


def resolve(engine: Engine, prefix: str, env: str) -> LivePolicySet | None:
    """The index an environment's alias points to, and the policy set stored in it
    (AmbiguousAlias, code ``policy_set_ambiguous``, when it points to several)."""
    index = single_target(engine, alias_name(prefix, env))
    if index is None:
        return None
    return read_index(engine, index)


def read_index(engine: Engine, index: str, previous: LivePolicySet | None = None) -> LivePolicySet:
    """The set stored in ``index``, validated, with its per-version lookups built (the id
    map, guards, window edges, the matcher's trigger groups): all of it once, here, as the
    version is loaded, never by a request (ADR 0015). With ``previous`` (the version served
    until now), a policy whose stored document is unchanged (same id, same digest) is
    ``previous``' validated policy; new and changed ones are validated in full
    (:mod:`control_plane.policy_digests`)."""
    with _without_cyclic_gc():
        meta = engine.get_document(index, META_ID)
        if meta is None:
            raise EngineError(f"policies index {index} has no policy set document (incomplete)")
        # once per version, no percolation asks for it (ADR 0037); read before the set is
        # validated, so a failed read costs one request, not a whole load
        layout = layout_of(engine, index)
        document = meta["_source"]["policy_set"]
        del meta
        known = previous.digests if previous is not None else {}
        by_id = previous.policy_set.lookups().by_id if previous is not None and known else {}
        policy_set, digests, reused = load_set(document, by_id, known)
        del document
        # built once, as the version is loaded, not by its first request
        index_of(policy_set, previous.policy_set.lookups() if previous is not None else None)
    # The set lives as long as it is served: keep its objects out of the cyclic collector's
    # full scans (at 10,000 policies a gen-2 collection inside a request cost milliseconds).
    gc.freeze()
    return LivePolicySet(index=index, policy_set=policy_set, digests=digests, reused=reused, layout=layout)


_GC_LOCK = threading.Lock()
_GC_STATE = {"loads": 0, "was_enabled": False}


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """No cyclic collection while a set loads: building 100,000 policies (millions of
    objects, none of them garbage) triggered collections that rescanned the growing graph,
    2-4x the validation itself. Reference counting still frees memory meanwhile; the
    collector is back on as soon as the last concurrent load ends (if it was on before)."""
    with _GC_LOCK:
        if _GC_STATE["loads"] == 0:
            _GC_STATE["was_enabled"] = gc.isenabled()
            gc.disable()
        _GC_STATE["loads"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_STATE["loads"] -= 1
            if _GC_STATE["loads"] == 0 and _GC_STATE["was_enabled"]:
                gc.enable()
