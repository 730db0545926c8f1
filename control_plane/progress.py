"""A progress bar for long CLI steps (publishing 100,000 policies), on a terminal only.

``bar = terminal_bar("publishing", sys.stderr)`` is None unless the stream is a terminal,
so pipes and logs get no carriage returns; ``bar(done, total)`` redraws one line and ends
it when ``done`` reaches ``total``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

WIDTH = 30


def line(label: str, done: int, total: int) -> str:
    """``publishing [#########.....]  3,000/10,000  30%``"""
    share = done / total if total else 1.0
    filled = round(WIDTH * share)
    return f"{label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done:,}/{total:,} {share:4.0%}"


def terminal_bar(label: str, stream: TextIO) -> Callable[[int, int], None] | None:
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        stream.write("\r" + line(label, done, total))
        if done >= total:
            stream.write("\n")
        stream.flush()

    return show
