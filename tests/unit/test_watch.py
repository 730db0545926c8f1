"""The watch both aliases share (control_plane.watch): refusals held until the next check,
other errors retried by the next caller, no read while a value is fresh."""

from __future__ import annotations

import pytest

from control_plane.engine import EngineError
from control_plane.watch import Refused, Watched


def test_a_fresh_value_is_not_read_again() -> None:
    reads: list[int | None] = []

    def read(previous: int | None) -> int:
        reads.append(previous)
        return 7

    watched = Watched(read, interval_s=float("inf"), unknown=lambda: EngineError("unknown"))
    assert [watched.get(), watched.get()] == [7, 7]
    assert reads == [None]
    watched.reread()
    assert reads == [None, 7]


def test_a_refusal_is_held_until_the_next_check_and_the_value_kept() -> None:
    answers: list[int | EngineError] = [1, EngineError("no index"), 2]

    def read(previous: int | None) -> int:
        answer = answers.pop(0)
        if isinstance(answer, EngineError):
            raise Refused(answer)
        return answer

    watched = Watched(read, interval_s=0.0, unknown=lambda: EngineError("unknown"))
    assert watched.get() == 1
    with pytest.raises(EngineError, match="no index"):
        watched.get()
    assert watched.get() == 2


def test_another_error_reaches_the_caller_and_the_next_one_reads_again() -> None:
    answers: list[int | EngineError] = [EngineError("engine down"), 3]

    def read(previous: int | None) -> int:
        answer = answers.pop(0)
        if isinstance(answer, EngineError):
            raise answer
        return answer

    watched = Watched(read, interval_s=float("inf"), unknown=lambda: EngineError("unknown"))
    with pytest.raises(EngineError, match="engine down"):
        watched.get()
    assert watched.get() == 3
