"""Four-eyes over the lineage, pure: who authored the changes between live and a candidate."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from control_plane.lifecycle.lineage import (
    CHANGES,
    ancestry,
    authors,
    lineage_changes,
    unreviewed_versions,
)
from control_plane.lifecycle.store import Event


def event(n: int, actor: str, action: str, version: str, suite: str | None = None) -> Event:
    return Event(
        event_id=f"{n:04d}", seq=n, time=f"2026-11-01T00:00:{n:02d}Z", actor=actor, action=action,
        version=version, suite_sha256=suite, reason=f"{action} {version}", policy_ids=(f"p-{version}",),
    )


def history(*events: Event) -> Callable[[Sequence[str]], list[Event]]:
    def events_of(versions: Sequence[str]) -> list[Event]:
        found = [e for e in events if e.version in versions and e.action in CHANGES]
        return sorted(found, key=lambda e: -e.seq)

    return events_of


def test_ancestry_walks_parents_and_stops_at_a_cycle() -> None:
    parents = {"C": "B", "B": "A", "A": None, "X": "Y", "Y": "X"}
    assert ancestry("C", parents.get) == ["C", "B", "A"]
    assert ancestry("X", parents.get) == ["X", "Y"]


def test_layered_draft_counts_the_author_of_the_draft_below() -> None:
    """X drafts A on live L; Y drafts B on A: B's authors are X and Y."""
    parents = {"B": "A", "A": "L", "L": None}
    events_of = history(
        event(1, "X", "draft", "A"), event(2, "Y", "draft", "B"), event(0, "op", "apply", "L")
    )
    changes = lineage_changes("B", "L", "s-live", parents.get, events_of)
    assert authors(changes) == ("X", "Y")
    assert [(c.actor, c.version) for c in changes] == [("Y", "B"), ("X", "A")]
    assert unreviewed_versions("B", "L", parents.get) == (["B", "A"], "L")


def test_changes_live_already_has_do_not_count() -> None:
    """A went live (reviewed); B on top of A: only B's author."""
    parents = {"B": "A", "A": "L", "L": None}
    events_of = history(event(1, "X", "draft", "A"), event(2, "Y", "draft", "B"))
    assert authors(lineage_changes("B", "A", "s", parents.get, events_of)) == ("Y",)


def test_after_a_rollback_the_rolled_back_changes_count_again() -> None:
    """A (by X) was promoted, then live rolled back to L: B on A brings A's change back, so X
    is an author of what lies between live and B."""
    parents = {"B": "A", "A": "L", "L": None}
    events_of = history(event(1, "X", "draft", "A"), event(2, "Y", "draft", "B"))
    assert authors(lineage_changes("B", "A", "s", parents.get, events_of)) == ("Y",)
    assert authors(lineage_changes("B", "L", "s", parents.get, events_of)) == ("X", "Y")


def test_live_off_the_candidate_line_stops_at_the_shared_ancestor() -> None:
    """Live is a kill-switch copy D of A; the candidate B was drafted on A: A is in live."""
    parents = {"B": "A", "D": "A", "A": "L", "L": None}
    events_of = history(event(1, "X", "draft", "A"), event(2, "Y", "draft", "B"))
    assert unreviewed_versions("B", "D", parents.get) == (["B"], "A")
    assert authors(lineage_changes("B", "D", "s", parents.get, events_of)) == ("Y",)


def test_test_edits_on_the_shared_version_count_unless_live_has_that_suite() -> None:
    parents = {"B": "L", "L": None}
    events_of = history(
        event(1, "T", "tests", "L", suite="s-edited"), event(2, "U", "tests", "L", suite="s-live"),
        event(0, "W", "draft", "L"), event(3, "Y", "draft", "B"),
    )
    changes = lineage_changes("B", "L", "s-live", parents.get, events_of)
    assert authors(changes) == ("T", "Y")  # U's edit is the suite live has; W's draft is live


def test_no_live_version_counts_the_whole_lineage() -> None:
    parents = {"B": "A", "A": None}
    events_of = history(event(1, "X", "draft", "A"), event(2, "Y", "suggest", "B"))
    assert authors(lineage_changes("B", None, None, parents.get, events_of)) == ("X", "Y")
