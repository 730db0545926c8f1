"""A value read from the engine and watched, not read per request: the live policy set
behind an environment's alias, the catalog statistics behind the catalog alias.

The value is re-read at most every ``interval_s`` (``time.monotonic``), by the first caller
that finds the check due; meanwhile, and while someone else re-reads it, every caller gets
what was last read, with no engine round trip and no wait. Only the first read (nothing
known yet) makes callers wait. A read may *refuse* (:class:`Refused`: an alias on no index,
or on several): the refusal is what callers get until the next check. Any other error
propagates to the caller that read, and the next caller tries again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from control_plane.engine import EngineError

T = TypeVar("T")


class Refused(Exception):
    """What a read raises to refuse service until the next check (``error`` is raised to
    every caller meanwhile)."""

    def __init__(self, error: EngineError) -> None:
        super().__init__(str(error))
        self.error = error


class Watched(Generic[T]):
    def __init__(
        self,
        read: Callable[[T | None], T],
        *,
        interval_s: float,
        unknown: Callable[[], EngineError],
    ) -> None:
        """``read(previous)`` returns the current value (``previous`` when nothing moved);
        ``unknown()`` is the error of a caller that waited for a first read that failed."""
        self._read = read
        self._unknown = unknown
        self.interval_s = interval_s
        self._value: T | None = None
        self._refusal: EngineError | None = None
        self._checked_at: float | None = None
        self.lock = threading.Lock()
        """held by whoever re-reads; callers never wait on it while there is a value"""

    def get(self) -> T:
        if self._due() and self.lock.acquire(blocking=self._value is None and self._refusal is None):
            try:
                if self._due():
                    self._refresh()
            finally:
                self.lock.release()
        refusal, value = self._refusal, self._value
        if refusal is not None:
            raise refusal
        if value is None:  # the first read failed for this caller's waiters
            raise self._unknown()
        return value

    def peek(self) -> T | None:
        """What :meth:`get` would return without reading: None when a read is due (or
        nothing was read yet); the refusal, raised, while one stands."""
        if self._due():
            return None
        refusal, value = self._refusal, self._value
        if refusal is not None:
            raise refusal
        return value

    def reread(self) -> None:
        """Re-read now (a move made through this process): the caller waits for it, others
        go on with the previous value meanwhile."""
        with self.lock:
            self._refresh()

    def _due(self) -> bool:
        checked = self._checked_at
        return checked is None or time.monotonic() - checked >= self.interval_s

    def _refresh(self) -> None:
        """Called with :attr:`lock` held."""
        started = time.monotonic()
        try:
            self._value = self._read(self._value)
        except Refused as refused:
            self._refusal, self._checked_at = refused.error, started
            return
        self._refusal, self._checked_at = None, started
