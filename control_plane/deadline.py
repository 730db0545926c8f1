"""A request's total deadline, carried to every engine call made on its behalf.

The API gives each serving request one (:func:`requested`, from ``api.request_deadline_s``);
the search pipeline enforces it (:func:`enforced` on ``SearchService.search`` and
``compile``), and the engine adapter asks :func:`call_timeout` before each call, so a call
never outlives the deadline: it gets the time that remains (or its own timeout, when that is
shorter), and an expired deadline raises :class:`DeadlineExceeded` instead of calling at
all. Writing the request's decision record afterwards is not cut short: a record is never
lost to the deadline. The deadline lives in context variables, so it follows the request
into the thread pool (``run_in_threadpool`` copies the context; the service's own pool is
given a copy). :func:`bounded` enforces a deadline at once (readiness checks).

Intervals only: ``time.monotonic``, never the wall clock.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import ParamSpec, TypeVar

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
"""the deadline engine calls obey now"""
_requested: ContextVar[Deadline | None] = ContextVar("govsearch_requested_deadline", default=None)
"""the deadline of the request being served, enforced where :func:`enforced` says"""

P = ParamSpec("P")
R = TypeVar("R")


def current() -> Deadline | None:
    """The deadline of the request this code runs for, if it has one."""
    return _current.get()


def current_requested() -> Deadline | None:
    """The deadline of the request being served (:func:`requested`), enforced or not yet."""
    return _requested.get()


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


@contextmanager
def requested(seconds: float, *, since: float | None = None) -> Iterator[Deadline]:
    """The enclosed request has a deadline ``seconds`` from now (or from ``since``, a
    ``time.monotonic()`` reading: when it arrived), which the work marked :func:`enforced`
    obeys."""
    deadline = Deadline.after(seconds) if since is None else Deadline(seconds, since + seconds)
    token = _requested.set(deadline)
    try:
        yield deadline
    finally:
        _requested.reset(token)


@contextmanager
def enforcing() -> Iterator[None]:
    """The enclosed work's engine calls obey the request's deadline (if it has one): what
    :func:`enforced` does for a function, for a block (a coroutine's)."""
    token = _current.set(_requested.get() or _current.get())
    try:
        yield
    finally:
        _current.reset(token)


def enforced(work: Callable[P, R]) -> Callable[P, R]:
    """``work``'s engine calls obey the request's deadline (if it has one)."""

    @functools.wraps(work)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with enforcing():
            return work(*args, **kwargs)

    return run


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
