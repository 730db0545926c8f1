"""A request's total deadline, carried to every engine call made on its behalf.

The API sets one per serving request (:func:`bounded`, from ``api.request_deadline_s``);
the engine adapter asks :func:`call_timeout` before each call, so a call never outlives the
deadline: it gets the time that remains (or its own timeout, when that is shorter), and an
expired deadline raises :class:`DeadlineExceeded` instead of calling at all. The deadline
lives in a context variable, so it follows the request into the thread pool
(``run_in_threadpool`` copies the context; the service's own pool is given a copy).

Intervals only: ``time.monotonic``, never the wall clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from control_plane.engine.base import EngineTimeout


class DeadlineExceeded(EngineTimeout):
    """The request's total deadline passed before its engine work was done."""

    code = "deadline_exceeded"


@dataclass(frozen=True)
class Deadline:
    seconds: float
    """the whole budget"""
    expires: float
    """``time.monotonic()`` at which it runs out"""

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        return self.expires - time.monotonic()


_current: ContextVar[Deadline | None] = ContextVar("govsearch_deadline", default=None)


def current() -> Deadline | None:
    """The deadline of the request this code runs for, if it has one."""
    return _current.get()


@contextmanager
def bounded(seconds: float) -> Iterator[Deadline]:
    """Run the enclosed work (and what it starts with a copy of the context) under a
    deadline ``seconds`` from now."""
    deadline = Deadline.after(seconds)
    token = _current.set(deadline)
    try:
        yield deadline
    finally:
        _current.reset(token)


def call_timeout(timeout_s: float) -> float:
    """The timeout for one engine call: ``timeout_s``, cut to what remains of the current
    deadline. Raises :class:`DeadlineExceeded` when nothing remains."""
    deadline = _current.get()
    if deadline is None:
        return timeout_s
    remaining = deadline.remaining()
    if remaining <= 0:
        raise DeadlineExceeded(f"the request deadline of {deadline.seconds:g}s passed")
    return min(timeout_s, remaining)


def expired() -> bool:
    """Whether the current request's deadline has passed (False without one)."""
    deadline = _current.get()
    return deadline is not None and deadline.remaining() <= 0
