"""Model suggestions through the real ``openai`` client against a local scripted server:
what the model is shown, and how its output is validated."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from control_plane.catalog.profile import load_profile
from control_plane.lifecycle.suggest import Signal
from control_plane.lifecycle.suggest_llm import SuggestionError, llm_drafts, suggest_llm
from control_plane.loader import build_policy_set, load_policy_set
from control_plane.policy import PolicySet
from tests.agent.conftest import FakeLlm, Reply

ROOT = Path(__file__).resolve().parents[2]

SIGNALS = [
    Signal("reformulation", "chocolat noire", 2, "chocolat noir", ("r1", "r2")),
    Signal("zero_results", "chocolat noire", 4, None, ("r3",)),
    Signal("fallback_tier", "gummi bears", 3, None, ("r4",)),
    Signal("zero_results", "oranges", 5, None, ("r5",)),  # the oranges policy's exact trigger
    Signal("zero_results", "qwxzyv", 1, None, ("r6",)),
]


def suggestion(intent: Any, kind: Any, to: Any = None, terms: Any = (), reason: str = "") -> dict[str, Any]:
    return {"intent": intent, "kind": kind, "to": to, "terms": list(terms), "reason": reason}


ANSWER = {
    "suggestions": [
        suggestion("chocolat noire", "rewrite", to="chocolat noir", reason="noir is the usual spelling"),
        suggestion("Gummi  Bears", "synonyms", terms=["gummy bears", "gummies", "gummi bears"]),
        suggestion("qwxzyv", "filter", to="in_stock"),
        suggestion("oranges", "rewrite", to="fresh oranges"),
        suggestion("cheap tv", "rewrite", to="television"),
        suggestion("chocolat noire", "synonyms", terms=["dark chocolate"]),
        suggestion("qwxzyv", "rewrite", to="{amount}"),
        suggestion("qwxzyv", "rewrite", to=""),
        suggestion("qwxzyv", "synonyms", terms=["qwxzyv"]),
        "just words",
    ]
}


@pytest.fixture()
def demo() -> PolicySet:
    return load_policy_set(ROOT / "policies")


@pytest.fixture()
def client(fake_llm: FakeLlm) -> Iterator[openai.OpenAI]:
    made = openai.OpenAI(base_url=fake_llm.url, api_key="test", max_retries=0)
    yield made
    made.close()


def ask(client: openai.OpenAI, demo: PolicySet) -> Any:
    return llm_drafts(SIGNALS, client=client, model="suggester", existing=demo, timeout_s=5)


def test_valid_suggestions_become_llm_drafts(
    fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet
) -> None:
    fake_llm.script(Reply(ANSWER))
    drafts = ask(client, demo)
    assert [p.id for p in drafts.policies] == ["suggested-chocolat-noire", "suggested-gummi-bears"]
    noire, gummi = drafts.policies
    assert [r.to_yaml() for r in noire.rules] == [
        {"rewrite": {"from": "chocolat noire", "to": "chocolat noir"}}
    ]
    assert [r.to_yaml() for r in gummi.rules] == [{"synonyms": {"terms": ["gummy bears", "gummies"]}}]
    for policy in drafts.policies:
        marks = (policy.origin, policy.owner, policy.priority, policy.enabled)
        assert marks == ("llm", "suggestions", 100, True)
        assert policy.trigger.kind == "exact"
    assert noire.description == (
        'Mined from the decision log: 4 search(es) with no results, 2 reformulation(s) to'
        ' "chocolat noir" (sample requests: r3, r1, r2). Model\'s reason: noir is the usual spelling'
    )
    combined = build_policy_set([*demo.policies, *drafts.policies], demo.vocabularies, demo.governance)
    assert {"suggested-chocolat-noire", "suggested-gummi-bears"} <= {p.id for p in combined.policies}


def test_invalid_items_are_dropped_with_a_reason(
    fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet
) -> None:
    fake_llm.script(Reply(ANSWER))
    dropped = {d.index: d.reason for d in ask(client, demo).dropped}
    assert dropped == {
        2: "rule kind 'filter' is not allowed (rewrite or synonyms only)",
        3: "intent 'oranges' is not one of the searches sent",
        4: "intent 'cheap tv' is not one of the searches sent",
        5: "a suggestion for 'chocolat noire' came earlier",
        6: dropped[6],
        7: "'to' must be a non-empty phrase of at most 100 characters",
        8: "the synonyms only repeat the intent",
        9: "not an object",
    }
    assert dropped[6].startswith("invalid policy: ") and "{amount}" in dropped[6]


def test_the_model_sees_intents_counts_and_reformulations_only(
    fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet
) -> None:
    fake_llm.script(Reply({"suggestions": []}))
    drafts = ask(client, demo)
    (request,) = fake_llm.requests
    body = request["body"]
    assert request["path"].endswith("/chat/completions")
    assert body["model"] == "suggester" and body["temperature"] == 0
    assert body["response_format"]["type"] == "json_schema"
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert json.loads(user["content"]) == drafts.sent == {
        "searches": [
            {
                "intent": "chocolat noire",
                "no_results": 4,
                "too_few_results": 0,
                "typed_next": [{"intent": "chocolat noir", "times": 2}],
            },
            {"intent": "gummi bears", "no_results": 0, "too_few_results": 3, "typed_next": []},
            {"intent": "qwxzyv", "no_results": 1, "too_few_results": 0, "typed_next": []},
        ]
    }
    shown = json.dumps(body["messages"], ensure_ascii=False).casefold()
    profile = load_profile(ROOT / "mappings" / "catalog.profile.yaml")
    fields = {*demo.governance.filterable_fields, *demo.governance.boostable_fields}
    fields |= {value for value in profile.model_dump().values() if isinstance(value, str)}
    fields |= {f.field.split(".")[0] for f in profile.fulltext}
    never = fields | {p.id for p in demo.policies} | {"percentile", "weight", "vocabulary"}
    leaked = sorted(word for word in never if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", shown))
    assert leaked == []
    assert not re.search(r"\d+\.\d+", shown)  # no price, no weight
    assert "r1" not in user["content"]  # request ids stay home


def test_nothing_to_ask_sends_nothing(fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet) -> None:
    signals = [Signal("zero_results", "Oranges", 5), Signal("zero_results", "noël", 2)]
    assert suggest_llm(signals, client=client, model="m", existing=demo, timeout_s=5) == []
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply(raw="here are my ideas"), "not JSON"),
        (Reply({"intent": "cheap chocolate"}), "no 'suggestions' list"),
        (Reply(status=500), "could not be asked"),
        (Reply({"suggestions": []}, delay_s=1.5), "could not be asked"),
    ],
)
def test_a_broken_answer_is_an_error(
    fake_llm: FakeLlm, demo: PolicySet, reply: Reply, message: str
) -> None:
    fake_llm.script(reply)
    with openai.OpenAI(base_url=fake_llm.url, api_key="test", max_retries=0) as client, pytest.raises(
        SuggestionError, match=message
    ):
        suggest_llm(SIGNALS, client=client, model="m", existing=demo, timeout_s=0.5)


def test_suggest_llm_returns_the_valid_drafts(
    fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet
) -> None:
    fake_llm.script(Reply(ANSWER), Reply(ANSWER))
    policies = suggest_llm(SIGNALS, client=client, model="m", existing=demo, timeout_s=5)
    assert policies == ask(client, demo).policies


def test_contact_details_typed_into_the_search_box_never_reach_the_model(
    fake_llm: FakeLlm, client: openai.OpenAI, demo: PolicySet
) -> None:
    fake_llm.script(Reply({"suggestions": []}))
    signals = [
        Signal("zero_results", "chocolate for jane.doe@example.com", 1),
        Signal("zero_results", "call me 06 12 34 56 78", 1),
        Signal("reformulation", "gummi bears", 1, "bears jane.doe@example.com"),
        Signal("zero_results", "qwxzyv", 1),
    ]
    drafts = llm_drafts(signals, client=client, model="m", existing=demo, timeout_s=5)
    assert [s["intent"] for s in drafts.sent["searches"]] == ["qwxzyv"]
    sent = json.dumps(fake_llm.requests[0]["body"])
    assert "example.com" not in sent and "56 78" not in sent
