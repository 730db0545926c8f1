"""Loading a policy set pauses the cyclic garbage collector and always restores it."""

from __future__ import annotations

import gc

import pytest

from control_plane import policy_store


def test_a_load_pauses_the_collector_and_restores_it() -> None:
    assert gc.isenabled()
    with policy_store._without_cyclic_gc():
        assert not gc.isenabled()
        with policy_store._without_cyclic_gc():  # a second, concurrent load
            assert not gc.isenabled()
        assert not gc.isenabled()  # the first is still loading
    assert gc.isenabled()
    with pytest.raises(RuntimeError), policy_store._without_cyclic_gc():
        raise RuntimeError("the set document is invalid")
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_host_stays_off() -> None:
    gc.disable()
    try:
        with policy_store._without_cyclic_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
