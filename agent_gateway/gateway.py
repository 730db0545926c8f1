"""The agent gateway, wired: budgets -> guardrails -> extraction -> governed search ->
grounded answer -> session memory.

The model (when configured) only ever produces an intent string; the intent then goes
through the same governed pipeline as ``POST /v1/search`` -- guards, policies, fallback
tiers -- so the worst a manipulated model can do is make fewer policies fire. Logs carry
the request id, the client, the flags and the sha256 of the screened message, never the
message itself.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from agent_gateway.answer import Answer, cards_of, deterministic_answer, phrased_answer
from agent_gateway.budgets import Budgets
from agent_gateway.extraction import Extraction, Extractor
from agent_gateway.guardrails import screen
from agent_gateway.llm import LlmClient, Usage
from agent_gateway.models import (
    AgentQuery,
    AgentResponse,
    AnswerOut,
    CitationOut,
    ExtractionOut,
    UsageOut,
)
from agent_gateway.sessions import SessionStore, Turn
from agent_gateway.settings import GatewaySettings
from control_plane.api.models import SearchResponse
from control_plane.service import Compiled, Outcome, SearchRequest, SearchService, utcnow

log = logging.getLogger("govsearch.agent")

Clock = Callable[[], datetime]
ABSTAIN_GUARDS_ONLY = (
    "no merchandising policy recognised the intent (only guards matched) and require_policy_match is on"
)


def policy_matched(compiled: Compiled) -> bool:
    """A policy (not a guard, not an always-on cohort rule) was triggered by the intent's text."""
    return any(m.kind == "policy" and m.trigger != "always" for m in compiled.composition.explanation.matched)


@dataclass(frozen=True)
class Governed:
    """A governed search, or the reason the gateway abstained from running it."""

    request: SearchRequest
    outcome: Outcome | None
    abstained: str | None = None


def governed_search(
    service: SearchService, request: SearchRequest, *, require_policy_match: bool
) -> Governed:
    if require_policy_match and not policy_matched(service.compile(request)):
        return Governed(request, None, ABSTAIN_GUARDS_ONLY)
    return Governed(request, service.search(request))


def _usage(usage: Usage) -> UsageOut:
    return UsageOut(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                    total_tokens=usage.total_tokens)


def _answer_out(answer: Answer) -> AnswerOut:
    return AnswerOut(
        text=answer.text,
        citations=[CitationOut(id=c.citation, product_id=c.product_id) for c in answer.citations],
        method=answer.method,
        fallback_reason=answer.fallback_reason,
    )


class AgentGateway:
    def __init__(
        self,
        service: SearchService,
        settings: GatewaySettings | None = None,
        *,
        llm: LlmClient | None = None,
        clock: Clock = utcnow,
    ) -> None:
        self.service = service
        self.settings = settings or GatewaySettings()
        if llm is None and service.settings.llm.base_url:
            llm = LlmClient(service.settings.llm)
        self.llm = llm
        self.extractor = Extractor(llm, max_intent_chars=self.settings.max_intent_chars,
                                   fallback_to_rules=self.settings.fallback_to_rules)
        self.sessions = SessionStore(max_turns=self.settings.history_turns,
                                     max_sessions=self.settings.max_sessions)
        self.budgets = Budgets(requests_per_minute=self.settings.requests_per_minute,
                               tokens_per_day=self.settings.tokens_per_day, clock=clock)

    @property
    def require_policy_match(self) -> bool:
        if self.settings.require_policy_match is not None:
            return self.settings.require_policy_match
        return self.service.settings.search.require_policy_match

    def query(self, body: AgentQuery, *, client: str, request_id: str) -> AgentResponse:
        """Raises ``BudgetExceeded``, ``MessageTooLarge``, ``LlmUnavailable`` or ``EngineError``."""
        self.budgets.admit(client)
        screened = screen(body.message, max_chars=self.settings.max_message_chars)
        extraction = self.extractor.extract(screened, self.sessions.history(client, body.session_id))
        self.budgets.charge(client, extraction.usage.total_tokens)
        log.info("agent request %s client=%s method=%s flags=%s message_sha256=%s", request_id, client,
                 extraction.method, ",".join(extraction.flags),
                 hashlib.sha256(screened.text.encode()).hexdigest())
        if extraction.intent is None:
            reason = f"extraction refused: {extraction.refusal}"
            return self._abstained(request_id, extraction, reason)
        request = SearchRequest(intent=extraction.intent, user_id=body.user_id, cohorts=body.cohorts,
                                market=body.market)
        governed = governed_search(self.service, request, require_policy_match=self.require_policy_match)
        if governed.outcome is None:
            return self._abstained(request_id, extraction, governed.abstained or "", extraction.intent)
        from control_plane.api.app import search_response

        search = search_response(request_id, request, governed.outcome, self.service.profile)
        answer = self._answer(extraction.intent, search)
        self.budgets.charge(client, answer.usage.total_tokens)
        self.sessions.append(client, body.session_id, Turn(screened.text, extraction.intent))
        return AgentResponse(
            request_id=request_id,
            status=search.status,
            reason=search.reason,
            intent=extraction.intent,
            extraction=self._extraction_out(extraction),
            search=search,
            answer=_answer_out(answer),
            usage=_usage(extraction.usage + answer.usage),
        )

    def _answer(self, intent: str, search: SearchResponse) -> Answer:
        cards = cards_of(search.hits, self.settings.answer_products)
        if self.settings.llm_answer and self.llm is not None:
            return phrased_answer(self.llm, intent, cards, search.total)
        return deterministic_answer(intent, cards, search.total)

    @staticmethod
    def _extraction_out(extraction: Extraction) -> ExtractionOut:
        return ExtractionOut(method=extraction.method, flags=list(extraction.flags),
                             refusal_code=extraction.refusal_code, usage=_usage(extraction.usage))

    def _abstained(self, request_id: str, extraction: Extraction, reason: str,
                   intent: str | None = None) -> AgentResponse:
        return AgentResponse(
            request_id=request_id,
            status="abstained",
            reason=reason,
            intent=intent,
            extraction=self._extraction_out(extraction),
            search=None,
            answer=AnswerOut(text=f"I can't answer this request: {reason}.", citations=[]),
            usage=_usage(extraction.usage),
        )

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
