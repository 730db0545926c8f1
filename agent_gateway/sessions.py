"""Conversation memory: the last turns of each session, in memory, bounded.

A session belongs to one client (the key is ``(client, session_id)``), holds at most
``max_turns`` turns, and the store holds at most ``max_sessions`` sessions, the least
recently used evicted first. Turns hold the *screened* message (PII already redacted) and
the intent the gateway accepted for it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from dataclasses import dataclass


@dataclass(frozen=True)
class Turn:
    message: str
    intent: str


class SessionStore:
    def __init__(self, *, max_turns: int = 6, max_sessions: int = 1000) -> None:
        self.max_turns = max_turns
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], deque[Turn]] = OrderedDict()
        self._lock = threading.Lock()

    def history(self, client: str, session_id: str | None) -> tuple[Turn, ...]:
        if session_id is None or self.max_turns == 0:
            return ()
        with self._lock:
            turns = self._sessions.get((client, session_id))
            if turns is None:
                return ()
            self._sessions.move_to_end((client, session_id))
            return tuple(turns)

    def append(self, client: str, session_id: str | None, turn: Turn) -> None:
        if session_id is None or self.max_turns == 0:
            return
        key = (client, session_id)
        with self._lock:
            turns = self._sessions.get(key)
            if turns is None:
                turns = self._sessions[key] = deque(maxlen=self.max_turns)
            turns.append(turn)
            self._sessions.move_to_end(key)
            while len(self._sessions) > self.max_sessions:
                self._sessions.popitem(last=False)

    def __len__(self) -> int:
        return len(self._sessions)
