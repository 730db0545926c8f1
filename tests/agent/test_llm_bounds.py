"""The pure parts of the model client's bounds: JSON depth without recursion, usage
clamped to what a call can have used, and a completion's shape."""

from __future__ import annotations

import json

import pytest

from agent_gateway.llm import Bound, LlmBadOutput, clamp_usage, completion_of
from agent_gateway.llm_wire import TooDeep, json_depth, loads_bounded


def test_json_depth_counts_nesting_outside_strings() -> None:
    assert json_depth(b'{"a": [1, {"b": []}]}', 10) == 4
    assert json_depth(b'{"a": "[[[[{{{{"}', 10) == 1  # brackets inside a string do not nest
    assert json_depth(b'["\\"[[["]', 10) == 1  # nor after an escaped quote
    assert json_depth(b"[" * 1_000_000, 32) == 33  # stops counting past the limit


def test_loads_bounded_refuses_deep_json_and_constants() -> None:
    assert loads_bounded(b"[" * 32 + b"]" * 32, 32) == json.loads("[" * 32 + "]" * 32)
    with pytest.raises(TooDeep):
        loads_bounded(b"[" * 33 + b"]" * 33, 32)
    with pytest.raises(TooDeep):
        loads_bounded("[" * 100_000 + "]" * 100_000, 32)  # RecursionError before the check existed
    with pytest.raises(ValueError):
        loads_bounded(b'{"a": NaN}', 32)


@pytest.mark.parametrize(
    ("reported", "expected", "clamped"),
    [
        ({"prompt_tokens": 40, "completion_tokens": 6}, (40, 6, 46), False),
        ({"prompt_tokens": 2e15, "completion_tokens": 2e15, "total_tokens": 4e15}, (500, 300, 800), True),
        ({"prompt_tokens": 40.2, "completion_tokens": 0}, (41, 0, 41), True),
        ({"prompt_tokens": 9_000, "completion_tokens": 9_000}, (500, 300, 800), True),
    ],
)
def test_usage_is_clamped_to_the_bytes_exchanged(reported: dict[str, float], expected: tuple[int, int, int],
                                                 clamped: bool) -> None:
    result = clamp_usage(reported, Bound(sent=500, received=300))
    assert result is not None
    usage, was_clamped = result
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == expected
    assert was_clamped is clamped


def test_usage_per_call_cap() -> None:
    result = clamp_usage({"prompt_tokens": 1e9, "completion_tokens": 1e9}, Bound(10**6, 10**6, per_call=100))
    assert result is not None and result[0].total_tokens == 100


@pytest.mark.parametrize("reported", [
    None, "lots", {"prompt_tokens": "1", "completion_tokens": 1},
    {"prompt_tokens": -1, "completion_tokens": 1}, {"prompt_tokens": True, "completion_tokens": 1},
    {"completion_tokens": 1},
])
def test_usage_that_is_not_numbers_is_refused(reported: object) -> None:
    assert clamp_usage(reported, Bound(500, 300)) is None


def test_a_bad_completion_is_charged_its_bound() -> None:
    with pytest.raises(LlmBadOutput) as error:
        completion_of(b'{"choices": [], "usage": {"prompt_tokens": "x"}}', Bound(500, 50))
    assert error.value.detail == "usage_invalid"
    assert (error.value.usage.prompt_tokens, error.value.usage.completion_tokens) == (500, 50)
