"""A guess, in process, of what percolating an intent will find (ADR 0049).

Speculation (ADR 0048) sends a plan miss's percolation and the first tiers of the plan it
guesses in one ``_msearch``; the percolation decides. ADR 0048 could only guess "nothing"
(no shared word). This module guesses the whole answer, the matched trigger documents and
their highlighted ranges, so that a miss of a *matched* intent can be speculated too:

- **Tokens**: :func:`standard_tokens` is the standard tokenizer (Unicode word boundaries,
  UAX #29) for the text it is sure about: Latin, Greek and Cyrillic letters, ASCII digits,
  spaces, and ASCII signs. An apostrophe, full stop or colon between two letters, or a
  comma, semicolon, full stop or apostrophe between two digits, is inside a word (as the
  tokenizer keeps ``l'huile`` and ``1,5``); ``_`` (which joins words), any other
  character (ideographs, emoji, other scripts, combining marks) or a token longer than
  :data:`MAX_TOKEN`: no guess.
- **Terms**: what the policies index's analyzer makes of one token is learned from the
  engine (``_analyze``, :class:`Terms`), once per token and analysis, off the request path
  (:class:`Learner`). Only an analyzer whose filters work on one token at a time qualifies
  (:func:`per_token`): lowercasing, folding, elision, stemmers, overrides; a token that does
  not come back as exactly one term of itself (a synonym, a split, a stop word) is marked,
  and an intent holding it is not guessed.
- **Queries**: each trigger document of the version (:attr:`~control_plane.matcher.Triggers.
  documents`) is a phrase of terms (``match_phrase``), an ``exact`` phrase (the intent's
  whole term count as well) or a ``suffix`` cue (also the cue's ``regexp`` on any term, as
  :func:`~control_plane.matcher_patterns.phrase_query` writes it). The guess of an intent is
  every document one of whose queries matches its terms, with the offsets of the matched
  tokens, in document id order: what the engine's sorted, highlighted percolation returns.
  A phrase that cannot be read here is left out, and an intent sharing one of its words is
  not guessed (:attr:`Guesser.unread`).

A guess is only ever a guess. The service serves it only when the percolation's answer is
equal to it, entry for entry (ADR 0049), so a wrong guess costs the tiers searched for
nothing, never a wrong plan.
"""

from __future__ import annotations

import logging
import queue
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from control_plane.catalog.analysis import PolicyAnalysis
from control_plane.engine import Engine, EngineError
from control_plane.matcher import Percolated, words_of
from control_plane.matcher_patterns import phrase_query
from control_plane.policy_store import analysed_values, index_analysis

log = logging.getLogger("govsearch.guess")

Token = tuple[int, int, str]
"""a token's start and end offsets (code points) and its text"""

_IN_LETTERS = frozenset("'.:\u2019")
"""inside a word between two letters (UAX #29 MidLetter, MidNumLetQ)"""
_IN_DIGITS = frozenset("'.,;\u2019")
"""inside a number between two digits (MidNum, MidNumLetQ)"""
_SIGNS = frozenset(chr(c) for c in range(0x21, 0x7F) if not chr(c).isalnum()) - {"_"}
"""ASCII signs: outside words, unless :data:`_IN_LETTERS` / :data:`_IN_DIGITS` says so"""


def _letter(char: str) -> bool:
    """A letter of the scripts the tokens are sure about (Latin, Greek, Cyrillic: below
    U+0530, and Latin Extended Additional)."""
    return (ord(char) < 0x0530 or 0x1E00 <= ord(char) <= 0x1EFF) and unicodedata.category(char)[0] == "L"


def _digit(char: str) -> bool:
    return "0" <= char <= "9"


MAX_TOKEN = 64
"""the longest token read here (the tokenizer cuts at 255; real words are far shorter, and
each learned token is kept in memory)"""


def standard_tokens(text: str) -> list[Token] | None:
    """The tokens the standard tokenizer makes of ``text``; None when ``text`` holds a
    character this reading is not sure about (module docstring), or a token longer than
    :data:`MAX_TOKEN`."""
    tokens: list[Token] = []
    start = -1
    last = len(text) - 1
    for i, char in enumerate(text):
        if _letter(char) or _digit(char):
            if start < 0:
                start = i
            continue
        if char == " " or char in _SIGNS or char == "\u2019":
            if start >= 0 and 0 < i < last:
                before, after = text[i - 1], text[i + 1]
                if (char in _IN_LETTERS and _letter(before) and _letter(after)) or (
                    char in _IN_DIGITS and _digit(before) and _digit(after)
                ):
                    continue  # inside the word
            if start >= 0:
                tokens.append((start, i, text[start:i]))
                start = -1
            continue
        return None
    if start >= 0:
        tokens.append((start, len(text), text[start:]))
    if any(end - start > MAX_TOKEN for start, end, _ in tokens):
        return None
    return tokens


# --- the analyzer ----------------------------------------------------------------------

PER_TOKEN_FILTERS = frozenset({
    "lowercase", "uppercase", "asciifolding", "elision", "stemmer", "stemmer_override",
    "keyword_marker", "snowball", "porter_stem", "kstem", "trim", "truncate", "apostrophe",
    "german_normalization", "scandinavian_folding", "scandinavian_normalization",
    "persian_normalization", "arabic_normalization", "decimal_digit", "classic",
})
"""token filters that make one token of one token, whatever its neighbours"""


def per_token(analysis: PolicyAnalysis) -> bool:
    """Whether ``analysis`` is the standard tokenizer followed by :data:`PER_TOKEN_FILTERS`
    only (no character filter): then an intent's terms are its tokens' terms, each learned
    alone."""
    definition = analysis.settings.get("analyzer", {}).get(analysis.analyzer)
    if definition is None and analysis.analyzer == "standard":  # the built-in: lowercased
        return True
    if not isinstance(definition, dict) or definition.get("type", "custom") != "custom":
        return False
    if definition.get("tokenizer") != "standard" or definition.get("char_filter"):
        return False
    defined = analysis.settings.get("filter", {})
    for name in definition.get("filter", []):
        kind = defined[name].get("type") if isinstance(defined.get(name), dict) else name
        if kind not in PER_TOKEN_FILTERS:
            return False
    return True


COMPLEX = ""
"""the term of a token that the analyzer does not make exactly one term of"""
TERMS_LIMIT = 100_000
"""intent tokens learned per analysis, at most (of at most :data:`MAX_TOKEN` characters: about
twenty megabytes at worst; past it, no more intent tokens are learned)"""


class Terms:
    """Each token's term under one analysis, learned from the engine (:meth:`learn`), at
    most ``limit`` of them (past it nothing more is learned: guesses needing more fail)."""

    def __init__(self, limit: int = TERMS_LIMIT, known: Mapping[str, str] | None = None) -> None:
        self.limit = limit
        self._terms: dict[str, str] = dict(known or {})

    def __len__(self) -> int:
        return len(self._terms)

    def get(self, token: str) -> str | None:
        """The token's term (:data:`COMPLEX` when it has none of its own); None: not learned."""
        return self._terms.get(token)

    def unknown(self, tokens: Iterable[str]) -> list[str]:
        return [token for token in dict.fromkeys(tokens) if token not in self._terms]

    def learn(
        self, engine: Engine, index: str, analyzer: str, tokens: Sequence[str], *, bounded: bool = True
    ) -> None:
        """Analyse ``tokens`` with ``index``'s ``analyzer``
        (:func:`~control_plane.policy_store.analysed_values`: many a request) and keep each
        token's term: the one term whose offsets are exactly the token's, else
        :data:`COMPLEX`. ``bounded``: no more than the limit allows (a version's own phrases
        are learned whatever it)."""
        wanted = self.unknown(tokens)
        if bounded:
            wanted = wanted[: max(0, self.limit - len(self._terms))]
        for token, start, terms in analysed_values(engine, index, analyzer, wanted):
            end = start + len(token.encode("utf-16-le")) // 2
            one = terms[0] if len(terms) == 1 else None
            alone = one is not None and (one["start_offset"], one["end_offset"]) == (start, end)
            self._terms[token] = str(one["token"]) if alone and one is not None else COMPLEX


# --- the queries -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Query:
    document: str
    kind: str
    """``phrase``, ``exact`` or ``suffix``"""
    terms: tuple[str, ...]
    ending: re.Pattern[str] | None = None
    """a suffix cue's ``regexp``, matched against each whole term"""


def _ending(text: str) -> re.Pattern[str] | None:
    query = phrase_query(text, suffix=True)
    for clause in query.get("bool", {}).get("should", []):
        if "regexp" in clause:
            return re.compile(clause["regexp"]["intent"]["value"])
    return None


class Guesser:
    """The guess for one loaded version (its trigger documents' terms, learned)."""

    def __init__(self, queries: Iterable[_Query], terms: Terms, unread: frozenset[str] = frozenset()) -> None:
        self.terms = terms
        self.unread = unread
        """the words (:func:`~control_plane.matcher.words_of`) of the phrases not read here: an
        intent holding one is not guessed (its document may match it)"""
        self.by_start: dict[tuple[str, ...], list[_Query]] = {}
        """queries by their first two terms (one-term queries by their term): an intent's
        position is compared with the phrases that start as it does, however many share its
        first word (thousands of "without ..." phrases at 100,000 policies)"""
        self.endings: list[_Query] = []
        for query in queries:
            if query.terms:
                self.by_start.setdefault(query.terms[:2], []).append(query)
            if query.ending is not None:
                self.endings.append(query)

    @classmethod
    def of(
        cls,
        documents: Mapping[str, tuple[str, str]],
        terms: Terms,
        tokens_of: Mapping[str, list[Token] | None] | None = None,
    ) -> Guesser:
        """The guesser of ``documents`` (id -> (kind, normalised text)), their tokens'
        terms in ``terms``. A phrase that cannot be read here (a character, a token without
        a term of its own) is left out, and its words are :attr:`unread`. ``tokens_of``:
        each document's :func:`standard_tokens`, when the caller already read them."""
        queries, unread = [], set()
        for document, (kind, text) in documents.items():
            tokens = tokens_of[document] if tokens_of is not None else standard_tokens(text)
            found = [terms.get(token) for _, _, token in tokens or ()]
            if tokens is None or any(term is None or term == COMPLEX for term in found):
                unread.update(words_of(text))
                continue
            ending = _ending(text) if kind == "suffix" else None
            queries.append(_Query(document, kind, tuple(t for t in found if t is not None), ending))
        return cls(queries, terms, frozenset(unread))

    def guess(self, intent: str, tokens: Sequence[Token] | None = None) -> Percolated | None:
        """What percolating ``intent`` finds, guessed; None when an intent token is not
        learned, or cannot be read here. ``tokens``: its :func:`standard_tokens`, when the
        caller already has them."""
        tokens = standard_tokens(intent) if tokens is None else tokens
        if tokens is None:
            return None
        if self.unread and not self.unread.isdisjoint(words_of(intent)):
            return None
        terms: list[str] = []
        for _, _, token in tokens:
            term = self.terms.get(token)
            if term is None or term == COMPLEX:
                return None
            terms.append(term)
        matched: dict[str, set[int]] = {}
        starts = self.by_start
        for at, term in enumerate(terms):
            two = starts.get((term, terms[at + 1]), ()) if at + 1 < len(terms) else ()
            for query in (*starts.get((term,), ()), *two):
                width = len(query.terms)
                if tuple(terms[at : at + width]) != query.terms:
                    continue
                if query.kind == "exact" and width != len(terms):
                    continue
                matched.setdefault(query.document, set()).update(range(at, at + width))
        for query in self.endings:
            assert query.ending is not None
            for at, term in enumerate(terms):
                if query.ending.fullmatch(term):
                    matched.setdefault(query.document, set()).add(at)
        return {
            document: [(tokens[at][0], tokens[at][1]) for at in sorted(matched[document])]
            for document in sorted(matched)
        }


# --- learning off the request path -----------------------------------------------------


LEARNER_THREAD = "govsearch-guess"
IDLE_S = 30.0
"""how long the learner's thread waits for a job before it ends"""


class Learner:
    """One daemon thread that runs jobs in order, off the request path, started by the
    first job and ended after :data:`IDLE_S` without one; a job submitted while one of the
    same key waits is dropped, and so is one that finds the queue full (what it would learn
    is learned by a later request's job)."""

    def __init__(self, name: str = LEARNER_THREAD, size: int = 64) -> None:
        self._jobs: queue.Queue[tuple[str, Callable[[], None]] | None] = queue.Queue(size)
        self._waiting: set[str] = set()
        self._lock = threading.Lock()
        self._name = name
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, key: str, job: Callable[[], None]) -> None:
        with self._lock:
            if key in self._waiting or self._closed:
                return
            if self._thread is None:
                thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had: nothing is learned now
                    return
                self._thread = thread
            try:
                self._jobs.put_nowait((key, job))
            except queue.Full:
                return
            self._waiting.add(key)

    def settle(self) -> None:
        """Wait until every job submitted so far is done (not once closed)."""
        if not self._closed:
            self._jobs.join()

    def close(self) -> None:
        """Drop the jobs not started and tell the thread to stop after the job it runs (not
        waited for: a daemon thread, it never holds the process or its closer)."""
        with self._lock:
            thread, self._thread, self._closed = self._thread, None, True
            while True:
                try:
                    self._jobs.get_nowait()
                except queue.Empty:
                    break
                self._jobs.task_done()
            self._waiting.clear()
        if thread is not None:
            self._jobs.put(None)

    def _run(self) -> None:
        while True:
            try:
                item = self._jobs.get(timeout=IDLE_S)
            except queue.Empty:
                with self._lock:  # idle: the thread ends (the next job starts another)
                    if self._jobs.empty():
                        if self._thread is threading.current_thread():
                            self._thread = None
                        return
                continue
            try:
                if item is None:
                    return
                key, job = item
                with self._lock:
                    self._waiting.discard(key)
                try:
                    job()
                except Exception:  # a guess is an optimisation: never fail anything for it
                    log.debug("guess job %s failed", key, exc_info=True)
            finally:
                self._jobs.task_done()


class Guessing:
    """The service's guesses: a :class:`Guesser` per loaded version (the last two), the
    :class:`Terms` per analysis, and the :class:`Learner` that builds and teaches them."""

    def __init__(
        self, engine: Engine, analysis: Callable[[], PolicyAnalysis], *, limit: int = TERMS_LIMIT
    ) -> None:
        self.engine = engine
        self._analysis = analysis
        """the policies' analysis, read by the first build (off the request path, and not at
        all by a service that never speculates)"""
        self.analysis: PolicyAnalysis | None = None
        self.limit = limit
        self.learner = Learner()
        self._terms: dict[str | None, Terms] = {}
        self._guessers: dict[str, Guesser | None] = {}
        """per load of a policies index (its scope): None when it cannot be guessed"""
        self._pending: dict[str, None] = {}
        """tokens intents held that are not learned yet, in order: the next learning job's"""
        self._lock = threading.Lock()

    def close(self) -> None:
        self.learner.close()

    def guess(self, scope: str, index: str, documents: Mapping[str, tuple[str, str]], intent: str) -> (
        Percolated | None
    ):
        """The guess of ``intent`` on ``index`` (loaded as ``scope``, its trigger
        ``documents``); None when there is none yet: the version's guesser is built, or the
        intent's unknown tokens learned, in the background for a later request."""
        guessers = self._guessers  # replaced whole by the learner: read once
        if scope not in guessers:
            self.learner.submit(scope, lambda: self._build(scope, index, documents))
            return None
        guesser = guessers[scope]
        if guesser is None:
            return None
        tokens = standard_tokens(intent)
        if tokens is None:
            return None
        found = guesser.guess(intent, tokens)
        if found is None and self.analysis is not None:
            terms, analyzer = guesser.terms, self.analysis.analyzer
            unknown = terms.unknown(t for _, _, t in tokens)
            if unknown and len(terms) + len(self._pending) < terms.limit:
                with self._lock:
                    self._pending.update(dict.fromkeys(unknown))
                self.learner.submit(f"learn {scope}", lambda: self._learn(terms, index, analyzer))
        return found

    def _learn(self, terms: Terms, index: str, analyzer: str) -> None:
        """Learn every pending token."""
        with self._lock:
            tokens, self._pending = list(self._pending), {}
        terms.learn(self.engine, index, analyzer, tokens)

    def _build(self, scope: str, index: str, documents: Mapping[str, tuple[str, str]]) -> None:
        """The guesser of one load (None: not guessed); the last two loads are kept (requests
        of the previous one may still be in flight while the alias moves)."""
        guesser = None
        try:
            analysis = self.analysis = self.analysis or self._analysis()
            fingerprint = index_analysis(self.engine, index)
            if fingerprint == analysis.fingerprint and per_token(analysis):
                terms = self._terms.get(fingerprint) or Terms(self.limit)
                tokens_of = {document: standard_tokens(text) for document, (_, text) in documents.items()}
                tokens = [t for read in tokens_of.values() for _, _, t in read or ()]
                terms.learn(self.engine, index, analysis.analyzer, tokens, bounded=False)
                self._terms = {fingerprint: terms}  # one analysis served at a time
                guesser = Guesser.of(documents, terms, tokens_of)
        except (EngineError, OSError, ValueError):  # a refused ``_analyze``, an unreadable profile
            log.warning("no percolation guesses for %s: what they need could not be read", index,
                        exc_info=True)
        kept = [(key, value) for key, value in self._guessers.items() if key != scope][-1:]
        self._guessers = dict([*kept, (scope, guesser)])
