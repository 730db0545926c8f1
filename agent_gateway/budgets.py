"""Budgets: requests per minute and model tokens per day, per caller and for all callers
together, in memory.

A caller is who the request comes from, not what it says it is (``router.caller_of``):
``key:<principal>`` when an API key was presented, else ``address:<client address>``.
``X-Client-Id`` is a label and never a budget key, so rotating it resets nothing. The
minute is a sliding window of 60 s; the day is the UTC calendar day of the injected
clock. :meth:`Budgets.admit` is called before any work and raises :class:`BudgetExceeded`
with a message that says which budget ran out and when it frees up (the caller's own
budgets first, then the global ones); :meth:`Budgets.charge` records the tokens a
completion used, on the caller and on the global account. At most ``max_clients`` callers
are tracked (least recently seen evicted).
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

    def roll(self, now: datetime) -> None:
        today = now.astimezone(UTC).date()
        if self.day != today:
            self.day, self.tokens = today, 0
        while self.requests and now - self.requests[0] >= WINDOW:
            self.requests.popleft()


@dataclass(frozen=True)
class _Limits:
    requests_per_minute: int
    tokens_per_day: int
    prefix: str
    """the budget names' prefix: ``""`` for a caller's, ``global_`` for all callers'"""


def _refusal(account: _Account, limits: _Limits, who: str, now: datetime) -> BudgetExceeded | None:
    if account.tokens >= limits.tokens_per_day:
        midnight = datetime.combine(now.astimezone(UTC).date() + timedelta(days=1), datetime.min.time(), UTC)
        return BudgetExceeded(
            limits.prefix + "tokens_per_day",
            f"{who} used its {limits.tokens_per_day} model tokens for today (UTC); "
            "the budget resets at midnight UTC",
            max(1, int((midnight - now).total_seconds())),
        )
    if len(account.requests) >= limits.requests_per_minute:
        retry = max(1, int((WINDOW - (now - account.requests[0])).total_seconds()))
        return BudgetExceeded(
            limits.prefix + "requests_per_minute",
            f"{who} sent {limits.requests_per_minute} requests in the last minute; retry in {retry} s",
            retry,
        )
    return None


class Budgets:
    def __init__(self, *, requests_per_minute: int, tokens_per_day: int, clock: Clock,
                 global_requests_per_minute: int | None = None, global_tokens_per_day: int | None = None,
                 max_clients: int = 10_000) -> None:
        self.requests_per_minute = requests_per_minute
        self.tokens_per_day = tokens_per_day
        self._caller = _Limits(requests_per_minute, tokens_per_day, "")
        self._global = _Limits(global_requests_per_minute or requests_per_minute * 20,
                               global_tokens_per_day or tokens_per_day * 25, "global_")
        self.clock = clock
        self.max_clients = max_clients
        self._accounts: OrderedDict[str, _Account] = OrderedDict()
        self._all = _Account()
        self._lock = threading.Lock()

    def _account(self, caller: str, now: datetime) -> _Account:
        account = self._accounts.get(caller)
        if account is None:
            account = self._accounts[caller] = _Account()
            while len(self._accounts) > self.max_clients:
                self._accounts.popitem(last=False)
        self._accounts.move_to_end(caller)
        account.roll(now)
        return account

    def admit(self, caller: str) -> None:
        """Count one request for ``caller`` (and for all callers), or raise :class:`BudgetExceeded`."""
        now = self.clock()
        with self._lock:
            account = self._account(caller, now)
            self._all.roll(now)
            refusal = _refusal(account, self._caller, f"caller '{caller}'", now) or _refusal(
                self._all, self._global, "the gateway (all callers)", now
            )
            if refusal is not None:
                raise refusal
            account.requests.append(now)
            self._all.requests.append(now)

    def charge(self, caller: str, tokens: int) -> None:
        if tokens <= 0:
            return
        now = self.clock()
        with self._lock:
            self._account(caller, now).tokens += tokens
            self._all.roll(now)
            self._all.tokens += tokens

    def tokens_used(self, caller: str) -> int:
        now = self.clock()
        with self._lock:
            return self._account(caller, now).tokens

    def global_tokens_used(self) -> int:
        now = self.clock()
        with self._lock:
            self._all.roll(now)
            return self._all.tokens
