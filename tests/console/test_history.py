"""The console's history page (docs/console.md, ADR 0056): the environments' events, and
beside them the moves no event names (in flight, dropped, withdrawn) with their state,
environment, versions, who asked and why, the process that owns them, how they were
closed, and what each means for what is live. Without JavaScript, over the real engine;
the moves are made as in tests/lifecycle/test_move_intents_read.py (a wrapper raising at
the chosen engine request)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from control_plane.lifecycle.intents import this_process
from tests.console.test_pages import signed
from tests.lifecycle.conftest import Lifecycle
from tests.lifecycle.test_history_semantics import candidate
from tests.lifecycle.test_move_intents import (
    Crash,
    Crashing,
    alias_move,
    crash_promotion,
    dead_owner,
    elsewhere,
    event_write,
    workflow,
)
from tests.lifecycle.test_move_intents_read import dropped_promotion, withdrawn_disable

HOSTILE = '<script>alert("owned")</script><img src=x onerror="alert(1)">'


def rows(text: str) -> list[tuple[str, str]]:
    """(state, row text without tags) of every move on the page, in page order."""
    found = re.findall(r'<tr class="move [a-z]+" data-intent="[^"]+" data-state="([a-z]+)">(.*?)</tr>',
                       text, re.S)
    return [(state, re.sub(r"<[^>]+>", "", row)) for state, row in found]


def moves_section(text: str) -> str:
    return text.split('id="moves-h"', 1)[1].split('id="events-h"', 1)[0]


def events_section(text: str) -> str:
    return text.split('id="events-h"', 1)[1]


def taken_back_to(lc: Lifecycle, live: str) -> str:
    """the version the withdrawn kill switch of ``live`` moved to (its journal entry's)"""
    (entry,) = lc.workflow.move_intents(state="withdrawn")
    version = entry.as_json()["event"]["version"]
    assert version != live
    return f"{version[:12]} (to {live[:12]}, unless another move stood on top)"


def test_the_history_page_lists_the_moves_no_event_names(lifecycle: Lifecycle) -> None:
    lc = lifecycle
    live_before = lc.workflow.environment("live").version
    withdrawn_disable(lc)
    dropped = dropped_promotion(lc)
    # another host's process died after its move: in its owner's hands until the lease passes
    pending = crash_promotion(lc, event_write(lc, "promote"), elsewhere)

    client, _ = signed(lc, "carol")  # an auditor; authors and approvers read it too
    page = client.get("/console/history")
    assert page.status_code == 200, page.text
    assert 'href="/console/history" aria-current="page"' in page.text
    listed = rows(page.text)
    assert [state for state, _ in listed] == ["open", "dropped", "withdrawn"], "newest first"
    (_, held), (_, never), (_, taken_back) = listed
    assert "promote by bob" in held and "live" in held and "teas for winter" in held
    assert "marker applied" in held and "another-host pid" in held and "lease until" in held
    assert f"moved: live serves {pending[:12]}; its event is not written yet" in held
    assert "not yet" in held  # not closed
    assert f"{live_before[:12]} → {pending[:12]}" in held  # the withdrawn disable was moved back
    assert "promote by bob" in never and "never sent" in never and dropped[:12] in never
    assert f"live never served {dropped[:12]} through this move" in never
    assert "disable by bob" in taken_back and "the history cannot be written" in taken_back
    assert "its event could not be written; the alias was moved back" in taken_back
    assert f"live was moved back from {taken_back_to(lc, live_before)}" in taken_back
    # the legend says what each state means for what is live
    legend = page.text.split('id="move-states"', 1)[1].split("</dl>", 1)[0]
    for words in ("in flight", "never made", "taken back", "<code>applied</code>",
                  "Its event could not be written; the alias was moved back"):
        assert words in legend, words
    # none of them is an event; the events are beside them
    events = events_section(page.text)
    assert "never sent" not in events and "teas for winter" not in events
    assert "the history cannot be written" not in events
    assert "bootstrap" in events

    for who in ("dan", "bob", "root"):
        other, _ = signed(lc, who)
        assert [s for s, _ in rows(other.get("/console/history").text)] == ["open", "dropped", "withdrawn"]
    staging = client.get("/console/history", params={"env": "staging"})
    assert staging.status_code == 200 and rows(staging.text) == []
    assert "No move without an event: every move of staging is in the history." in staging.text
    assert [s for s, _ in rows(client.get("/console/history", params={"env": "live"}).text)] == [
        "open", "dropped", "withdrawn"
    ]


def test_nothing_without_an_event_says_so(lifecycle: Lifecycle) -> None:
    client, _ = signed(lifecycle, "dan")
    page = client.get("/console/history")
    assert page.status_code == 200, page.text
    assert rows(page.text) == [] and 'id="moves"' not in page.text
    assert "No move without an event: every move of live and staging is in the history." in page.text
    assert "bootstrap" in events_section(page.text)


def hostile_owner() -> dict[str, Any]:
    return {**this_process(), "host": HOSTILE}


def test_hostile_owner_and_reason_are_shown_as_text(lifecycle: Lifecycle) -> None:
    """A move's reason is anyone's text and its owner's host name is what the process was
    told: both are shown escaped, never as markup."""
    lc = lifecycle
    version = candidate(lc, "teas", "green tea")
    doomed = workflow(lc, Crashing(lc.engine, alias_move(lc, "live")), hostile_owner)
    with pytest.raises(Crash):
        doomed.promote(lc.principals["bob"], version, HOSTILE)

    client, _ = signed(lc, "carol")
    page = client.get("/console/history")
    assert page.status_code == 200, page.text
    ((state, row),) = rows(page.text)
    assert state == "open" and "marker open" in row and "not moved yet" in row
    moves = moves_section(page.text)
    assert "<script" not in moves and "<img" not in moves and 'onerror="' not in moves
    escaped = ("&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;"
               "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;")
    assert moves.count(escaped) == 2, moves  # the reason and the owner's host


def test_the_moves_are_listed_when_the_history_cannot_be_read(lifecycle: Lifecycle) -> None:
    """A move made by a process that died before its event, while the history cannot be
    written: reading the history settles first and fails; the page says so (503, the API's
    sentence) and still lists the move as it stands, moved and not recorded."""
    lc = lifecycle
    client, _ = signed(lc, "carol")
    moved = crash_promotion(lc, event_write(lc, "promote"), dead_owner)
    history = lc.workflow.store.history
    lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": True})
    try:
        page = client.get("/console/history")
    finally:
        lc.engine.request("PUT", f"/{history}/_settings", body={"index.blocks.write": False})
    assert page.status_code == 503, page.text
    assert 'id="history-problem"' in page.text and "The history cannot be read now" in page.text
    ((state, row),) = rows(page.text)
    assert state == "open" and f"moved: live serves {moved[:12]}" in row, row
    # written again, the next read records it: no move without an event
    again = client.get("/console/history")
    assert again.status_code == 200 and rows(again.text) == []
    assert "recovered" in events_section(again.text)
