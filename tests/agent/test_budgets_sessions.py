from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_gateway.budgets import BudgetExceeded, Budgets
from agent_gateway.sessions import SessionStore, Turn


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 23, 59, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_requests_per_minute_is_a_sliding_window() -> None:
    clock = Clock()
    budgets = Budgets(requests_per_minute=2, tokens_per_day=1000, clock=clock)
    budgets.admit("a")
    budgets.admit("a")
    with pytest.raises(BudgetExceeded) as error:
        budgets.admit("a")
    assert (
        error.value.budget == "requests_per_minute" and "2 requests in the last minute" in error.value.message
    )
    budgets.admit("b")  # another client has its own budget
    clock.now += timedelta(seconds=61)
    budgets.admit("a")


def test_tokens_per_day_reset_at_utc_midnight() -> None:
    clock = Clock()
    budgets = Budgets(requests_per_minute=100, tokens_per_day=50, clock=clock)
    budgets.admit("a")
    budgets.charge("a", 50)
    with pytest.raises(BudgetExceeded) as error:
        budgets.admit("a")
    assert error.value.budget == "tokens_per_day" and error.value.retry_after_s == 60
    clock.now += timedelta(minutes=2)  # the next UTC day
    budgets.admit("a")
    assert budgets.tokens_used("a") == 0


def test_sessions_keep_the_last_turns_per_client_and_evict_old_sessions() -> None:
    store = SessionStore(max_turns=2, max_sessions=2)
    for n in range(3):
        store.append("c1", "s1", Turn(f"m{n}", f"i{n}"))
    assert [t.intent for t in store.history("c1", "s1")] == ["i1", "i2"]
    assert store.history("c2", "s1") == ()  # another client cannot read the session
    assert store.history("c1", None) == ()
    store.append("c1", "s2", Turn("m", "i"))
    store.append("c1", "s3", Turn("m", "i"))
    assert len(store) == 2
    assert store.history("c1", "s1") == ()  # least recently used, evicted


def test_the_global_cap_holds_across_callers() -> None:
    clock = Clock()
    budgets = Budgets(requests_per_minute=10, tokens_per_day=1000, clock=clock,
                      global_requests_per_minute=3, global_tokens_per_day=100)
    for caller in ("address:10.0.0.1", "address:10.0.0.2", "key:shop"):
        budgets.admit(caller)
    with pytest.raises(BudgetExceeded) as error:
        budgets.admit("address:10.0.0.9")  # a new caller, under its own budget: the gateway's is spent
    assert error.value.budget == "global_requests_per_minute" and "all callers" in error.value.message
    clock.now += timedelta(seconds=61)
    budgets.charge("key:shop", 60)
    budgets.charge("address:10.0.0.1", 40)
    assert budgets.global_tokens_used() == 100 and budgets.tokens_used("key:shop") == 60
    with pytest.raises(BudgetExceeded) as error:
        budgets.admit("address:10.0.0.2")
    assert error.value.budget == "global_tokens_per_day"


def test_a_callers_own_budget_is_refused_before_the_global_one() -> None:
    budgets = Budgets(requests_per_minute=1, tokens_per_day=1000, clock=Clock(), global_requests_per_minute=1)
    budgets.admit("key:a")
    with pytest.raises(BudgetExceeded) as error:
        budgets.admit("key:a")
    assert error.value.budget == "requests_per_minute" and "caller 'key:a'" in error.value.message
