"""What a refused intent costs: an intent within its bound as received that normalisation
expands past it (NFKC: U+FDFA is 18 characters, U+3316 six), refused on its normalised length.

``python -m bench.refused_intent [--calls 50]`` (no engine): for each hostile text, the
median **thread CPU** (``time.thread_time_ns``) of one refusal, in ms, where it happens:

- ``search``: ``SearchRequest(intent=...)``, the validation ``/v1/search`` and ``/v1/compile``
  run on the event loop, with the search intents' cache emptied before each call (a new
  intent each time, as a stream of distinct hostile intents would be);
- ``agent``: ``screen(message)``, the agent gateway's message bound (2,000 characters);
- ``mcp``: ``validate_intent(intent)``, an extracted or MCP intent's bound (120).

Then how many entries one refusal of each search text left in the search intents' cache.
Run it against another tree (``PYTHONPATH=<tree>``) to compare code.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from functools import partial

from pydantic import ValidationError

from agent_gateway.guardrails import MessageTooLarge, screen
from agent_gateway.intent_validation import validate_intent
from control_plane.intent_text import search_intent
from control_plane.service import SearchRequest

SEARCH_TEXTS = {
    "512 x U+FDFA (9,216 once normalised)": "\ufdfa" * 512,
    "511 x U+FDFA + a (scripts that may mix)": "\ufdfa" * 511 + "a",
    "512 x U+3316 (3,072)": "\u3316" * 512,
    "257 x U+FB01 (514)": "\ufb01" * 257,
}
MESSAGES = {
    "2,000 x U+FDFA (36,000)": "\ufdfa" * 2000,
    "1,999 x U+FDFA + a": "\ufdfa" * 1999 + "a",
    "2,000 x U+3316 (12,000)": "\u3316" * 2000,
}
MCP_INTENTS = {"512 x U+FDFA (9,216)": "\ufdfa" * 512}


def _median_ms(call: Callable[[], object], calls: int) -> float:
    spent = []
    for _ in range(calls):
        start = time.thread_time_ns()
        call()
        spent.append(time.thread_time_ns() - start)
    return statistics.median(spent) / 1e6


def _refused_search(text: str) -> Callable[[], object]:
    def call() -> None:
        search_intent.cache_clear()
        try:
            SearchRequest(intent=text)
        except ValidationError:
            return
        raise SystemExit(f"not refused: {text[:20]!r}")

    return call


def _refused_message(text: str) -> Callable[[], object]:
    def call() -> None:
        try:
            screen(text, max_chars=2000)
        except MessageTooLarge:
            return
        raise SystemExit(f"not refused: {text[:20]!r}")

    return call


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.refused_intent", description=__doc__)
    parser.add_argument("--calls", type=int, default=50)
    calls = parser.parse_args().calls
    rows = [("search", name, _median_ms(_refused_search(text), calls)) for name, text in SEARCH_TEXTS.items()]
    rows += [("agent", name, _median_ms(_refused_message(text), calls)) for name, text in MESSAGES.items()]
    rows += [("mcp", name, _median_ms(partial(validate_intent, text, max_chars=120), calls))
             for name, text in MCP_INTENTS.items()]
    print("| where | text | thread CPU per refusal, median (ms) |\n| --- | --- | --- |")
    for where, name, ms in rows:
        print(f"| {where} | {name} | {ms:.2f} |")
    search_intent.cache_clear()
    for text in SEARCH_TEXTS.values():
        with contextlib.suppress(ValidationError):
            SearchRequest(intent=text)
    print(f"\nsearch intents' cache entries after {len(SEARCH_TEXTS)} refused intents: "
          f"{search_intent.cache_info().currsize}")


if __name__ == "__main__":
    main()
