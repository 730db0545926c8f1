"""The publish progress bar: drawn on a terminal only, one line redrawn, ended at the total."""

from __future__ import annotations

import io

from control_plane.progress import line, terminal_bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_no_bar_when_the_stream_is_not_a_terminal() -> None:
    assert terminal_bar("publishing", io.StringIO()) is None


def test_the_bar_redraws_one_line_and_ends_it_at_the_total() -> None:
    stream = Terminal()
    bar = terminal_bar("publishing", stream)
    assert bar is not None
    bar(2000, 10000)
    bar(10000, 10000)
    drawn = stream.getvalue()
    assert drawn.count("\r") == 2 and drawn.endswith("\n") and drawn.count("\n") == 1
    assert "2,000/10,000  20%" in drawn and "10,000/10,000 100%" in drawn


def test_the_line_fills_in_proportion() -> None:
    assert line("p", 0, 4) == "p [" + "." * 30 + "] 0/4   0%"
    assert line("p", 2, 4) == "p [" + "#" * 15 + "." * 15 + "] 2/4  50%"
    assert line("p", 0, 0).endswith("0/0 100%")
