"""Per-client budgets: requests per minute and model tokens per day, in memory.

A client is the ``X-Client-Id`` header, or ``anonymous``. The minute is a sliding window
of 60 s; the day is the UTC calendar day of the injected clock. :meth:`Budgets.admit`
is called before any work and raises :class:`BudgetExceeded` with a message that says
which budget ran out and when it frees up; :meth:`Budgets.charge` records the tokens a
completion used. At most ``max_clients`` clients are tracked (least recently seen evicted).
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

Clock = Callable[[], datetime]
WINDOW = timedelta(minutes=1)


class BudgetExceeded(Exception):
    def __init__(self, budget: str, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.budget, self.message, self.retry_after_s = budget, message, retry_after_s


@dataclass
class _Account:
    requests: deque[datetime] = field(default_factory=deque)
    day: date | None = None
    tokens: int = 0


class Budgets:
    def __init__(self, *, requests_per_minute: int, tokens_per_day: int, clock: Clock,
                 max_clients: int = 10_000) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_day = tokens_per_day
        self.clock = clock
        self.max_clients = max_clients
        self._accounts: OrderedDict[str, _Account] = OrderedDict()
        self._lock = threading.Lock()

    def _account(self, client: str, now: datetime) -> _Account:
        account = self._accounts.get(client)
        if account is None:
            account = self._accounts[client] = _Account()
            while len(self._accounts) > self.max_clients:
                self._accounts.popitem(last=False)
        self._accounts.move_to_end(client)
        today = now.astimezone(UTC).date()
        if account.day != today:
            account.day, account.tokens = today, 0
        while account.requests and now - account.requests[0] >= WINDOW:
            account.requests.popleft()
        return account

    def admit(self, client: str) -> None:
        """Count one request for ``client``, or raise :class:`BudgetExceeded`."""
        now = self.clock()
        with self._lock:
            account = self._account(client, now)
            if account.tokens >= self.tokens_per_day:
                midnight = datetime.combine(now.astimezone(UTC).date() + timedelta(days=1),
                                            datetime.min.time(), UTC)
                raise BudgetExceeded(
                    "tokens_per_day",
                    f"client '{client}' used its {self.tokens_per_day} model tokens for today (UTC); "
                    "the budget resets at midnight UTC",
                    max(1, int((midnight - now).total_seconds())),
                )
            if len(account.requests) >= self.requests_per_minute:
                retry = WINDOW - (now - account.requests[0])
                raise BudgetExceeded(
                    "requests_per_minute",
                    f"client '{client}' sent {self.requests_per_minute} requests in the last minute; "
                    f"retry in {max(1, int(retry.total_seconds()))} s",
                    max(1, int(retry.total_seconds())),
                )
            account.requests.append(now)

    def charge(self, client: str, tokens: int) -> None:
        if tokens <= 0:
            return
        now = self.clock()
        with self._lock:
            self._account(client, now).tokens += tokens

    def tokens_used(self, client: str) -> int:
        now = self.clock()
        with self._lock:
            return self._account(client, now).tokens
