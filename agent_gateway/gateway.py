"""The agent gateway, wired: budgets -> guardrails -> extraction -> governed search ->
grounded answer -> session memory.

The model (when configured) only ever produces an intent string; the intent then goes
through the same governed pipeline as ``POST /v1/search`` -- guards, policies, fallback
tiers -- so the worst a manipulated model can do is make fewer policies fire. Logs carry
the request id, the client, the flags and the sha256 of the screened message, never the
message itself.

Every query writes exactly one decision record (``endpoint: "agent"``) through the
service's recorder: served, abstained, or failed (a refused budget, a message too large,
the model or the engine down), with the extraction method, flags and refusal code, the
token usage, the abstention reason and its code, the caller and the session id. The
message is never recorded; the intent is, under the recorder's ``store_raw_intent`` rule.
The search the gateway runs is not recorded on its own: it is part of this one record.
When the record itself cannot be built, a minimal one stands for it
(``Recorder.minimal``): never none, never two.

Budgets are charged to the *caller* (``router.caller_of``: the API key's principal, else
the client address); ``client`` (``X-Client-Id``) is a label for the record and the logs.
Sessions belong to the caller and its label together.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from agent_gateway.abstention import Abstention, abstain_mode, after_search, before_search, understood_by
from agent_gateway.answer import Answer, cards_of, deterministic_answer, phrased_answer
from agent_gateway.budgets import Budgets
from agent_gateway.errors import as_api_error
from agent_gateway.extraction import Extraction, Extractor, Method
from agent_gateway.guardrails import Screened, screen
from agent_gateway.language import Language, language_of
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
from agent_gateway.settings import Abstain, GatewaySettings
from control_plane.api.models import SearchResponse
from control_plane.audit import record as audit
from control_plane.audit.recorder import AgentTurn, Recorder, error_of
from control_plane.service import Compiled, Outcome, SearchRequest, SearchService
from control_plane.times import Clock

log = logging.getLogger("govsearch.agent")


@dataclass(frozen=True)
class Governed:
    """A governed search, or why the gateway abstained from serving it (with the compiled
    plan that showed it: what matched, what was applied)."""

    request: SearchRequest
    outcome: Outcome | None
    abstention: Abstention | None = None
    compiled: Compiled | None = None

    @property
    def abstained(self) -> str | None:
        return self.abstention.reason if self.abstention else None


def governed_search(service: SearchService, request: SearchRequest, *, abstain: Abstain,
                    now: datetime) -> Governed:
    """The search, unless the mode says the plan is not an answer (``abstention``)."""
    if abstain == "no_policy":
        compiled = service.compile(request, now)
        found = before_search(compiled, abstain)
        if found is not None:
            return Governed(request, None, found, compiled)
    outcome = service.search(request, now)
    found = after_search(outcome, abstain)
    if found is not None:
        return Governed(request, None, found, outcome.compiled)
    return Governed(request, outcome)


def _usage(usage: Usage) -> UsageOut:
    return UsageOut(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                    total_tokens=usage.total_tokens)


def _usage_record(usage: Usage) -> audit.Usage:
    return audit.Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                       total_tokens=usage.total_tokens)


@dataclass
class _Progress:
    """What one query has established so far: its decision record is written from this,
    whether the query is answered or fails half-way."""

    client: str
    caller: str
    body: AgentQuery
    method: Method
    screened: Screened | None = None
    extraction: Extraction | None = None
    answer: Answer | None = None
    recorded: bool = False
    """its record was handed to the recorder (an error after that writes no second one)"""

    def turn(self, reason: str | None = None, reason_code: str | None = None) -> AgentTurn:
        """What the record says; a bare turn (client, caller, the error) when even that fails."""
        try:
            return self._turn(reason, reason_code)
        except Exception:
            log.exception("agent turn could not be built")
            return AgentTurn(client=self.client, caller=self.caller, reason=reason, reason_code=reason_code)

    def _turn(self, reason: str | None, reason_code: str | None) -> AgentTurn:
        extraction = None
        if self.extraction is not None:
            e = self.extraction
            extraction = audit.Extraction(method=e.method, flags=list(e.flags), refusal_code=e.refusal_code,
                                          usage=_usage_record(e.usage))
        elif self.screened is not None:  # screened, then the model failed
            extraction = audit.Extraction(method=self.method, flags=list(self.screened.flags))
        usage = (self.extraction.usage if self.extraction else Usage()) + (
            self.answer.usage if self.answer else Usage()
        )
        answer = None
        if self.answer is not None:
            answer = audit.AnswerOut(method=self.answer.method, fallback_reason=self.answer.fallback_reason,
                                     citations=[c.product_id for c in self.answer.citations])
        return AgentTurn(
            client=self.client,
            caller=self.caller,
            reason_code=reason_code,
            session_id=self.body.session_id,
            cohorts=self.body.cohorts,
            market=self.body.market,
            user_id=self.body.user_id,
            extraction=extraction,
            intent=self.extraction.intent if self.extraction else None,
            reason=reason,
            usage=_usage_record(usage),
            answer=answer,
        )


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
        clock: Clock,
        llm: LlmClient | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.service = service
        self.clock = clock
        """each query's instant (policies, records) and the budgets' minute and day"""
        self.settings = settings or GatewaySettings()
        if llm is None and service.settings.llm.base_url:
            llm = LlmClient(service.settings.llm)
        self.llm = llm
        self.extractor = Extractor(llm, max_intent_chars=self.settings.max_intent_chars,
                                   fallback_to_rules=self.settings.fallback_to_rules,
                                   on_bad_output=self.settings.on_bad_output)
        self.sessions = SessionStore(max_turns=self.settings.history_turns,
                                     max_sessions=self.settings.max_sessions)
        self.budgets = Budgets(requests_per_minute=self.settings.requests_per_minute,
                               tokens_per_day=self.settings.tokens_per_day, clock=clock,
                               global_requests_per_minute=self.settings.global_requests_per_minute,
                               global_tokens_per_day=self.settings.global_tokens_per_day)
        self._recorder = recorder

    @property
    def recorder(self) -> Recorder | None:
        """Where decision records go: the one given, else the service's (the API's); None:
        not recorded (a gateway used outside the API)."""
        return self._recorder if self._recorder is not None else self.service.recorder

    @property
    def abstain(self) -> Abstain:
        """The abstention mode in force (:func:`agent_gateway.abstention.abstain_mode`)."""
        return abstain_mode(self.settings, self.service.settings.search.require_policy_match)

    def query(self, body: AgentQuery, *, client: str, request_id: str, caller: str | None = None,
              ) -> AgentResponse:
        """Answer one message and write its one decision record. ``caller`` is who the
        budgets charge (default: ``client``, for callers outside the HTTP API). Raises
        ``BudgetExceeded``, ``MessageTooLarge``, ``LlmUnavailable`` or ``EngineError``
        (recorded first)."""
        now = self.clock()
        progress = _Progress(client, caller or client, body, "llm" if self.llm is not None else "rules")
        try:
            response = self._query(body, progress.caller, request_id, now, progress)
        except Exception as error:
            if self.recorder is not None and not progress.recorded:  # one record per request
                progress.recorded = True
                self.recorder.agent(request_id, progress.turn(), status="error",
                                    error=error_of(as_api_error(error)), time=now)
            raise
        return response

    def _query(self, body: AgentQuery, caller: str, request_id: str, now: datetime,
               progress: _Progress) -> AgentResponse:
        self.budgets.admit(caller)
        screened = screen(body.message, max_chars=self.settings.max_message_chars)
        progress.screened = screened
        conversation = f"{caller} {progress.client}"
        extraction = self.extractor.extract(screened, self.sessions.history(conversation, body.session_id))
        progress.extraction = extraction
        self.budgets.charge(caller, extraction.usage.total_tokens)
        log.info("agent request %s client=%s method=%s flags=%s message_sha256=%s", request_id,
                 progress.client, extraction.method, ",".join(extraction.flags),
                 hashlib.sha256(screened.text.encode()).hexdigest())
        if extraction.intent is None:
            reason = f"extraction refused: {extraction.refusal}"
            refused = Abstention(extraction.refusal_code or "refused", reason)
            return self._abstained(request_id, extraction, refused, progress, now)
        try:
            request = SearchRequest(intent=extraction.intent, user_id=body.user_id, cohorts=body.cohorts,
                                    market=body.market)
        except ValidationError as error:  # the body was validated: only the intent can be refused here
            problems = "; ".join(str(e["msg"]) for e in error.errors())
            reason = f"extraction refused: the intent is not a valid search: {problems}"
            refused = Abstention("invalid_intent", reason)
            return self._abstained(request_id, extraction, refused, progress, now)
        governed = governed_search(self.service, request, abstain=self.abstain, now=now)
        if governed.outcome is None:
            abstention = governed.abstention or Abstention("abstained", "abstained")
            return self._abstained(request_id, extraction, abstention, progress, now, extraction.intent,
                                   governed.compiled)
        from control_plane.api.answer import search_response

        search = search_response(request_id, request, governed.outcome, self.service.profile)
        understood = bool(understood_by(governed.outcome.compiled))
        answer = self._answer(extraction.intent, search, _language(screened), understood)
        progress.answer = answer
        self.budgets.charge(caller, answer.usage.total_tokens)
        self.sessions.append(conversation, body.session_id, Turn(screened.text, extraction.intent))
        if self.recorder is not None:
            progress.recorded = True
            self.recorder.agent(request_id, progress.turn(search.reason), status=search.status,
                                outcome=governed.outcome, time=now)
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

    def _answer(self, intent: str, search: SearchResponse, language: Language, understood: bool) -> Answer:
        """The phrased answer (``llm_answer``) or the deterministic one; a search that no
        shop policy understood (``abstain: off``) is said to be loose word matches, and is
        never phrased by the model as a confident answer."""
        cards = cards_of(search.hits, self.settings.answer_products)
        if self.settings.llm_answer and self.llm is not None and understood:
            return phrased_answer(self.llm, intent, cards, search.total, language)
        return deterministic_answer(intent, cards, search.total, language, understood=understood)

    @staticmethod
    def _extraction_out(extraction: Extraction) -> ExtractionOut:
        return ExtractionOut(method=extraction.method, flags=list(extraction.flags),
                             refusal_code=extraction.refusal_code, usage=_usage(extraction.usage))

    def _abstained(
        self, request_id: str, extraction: Extraction, abstention: Abstention, progress: _Progress,
        now: datetime, intent: str | None = None, compiled: Compiled | None = None,
    ) -> AgentResponse:
        reason = abstention.reason
        if self.recorder is not None:
            progress.recorded = True
            self.recorder.agent(request_id, progress.turn(reason, abstention.code), status="abstained",
                                compiled=compiled, time=now)
        return AgentResponse(
            request_id=request_id,
            status="abstained",
            reason=reason,
            reason_code=abstention.code,
            intent=intent,
            extraction=self._extraction_out(extraction),
            search=None,
            answer=AnswerOut(text=f"I can't answer this request: {reason}.", citations=[]),
            usage=_usage(extraction.usage),
        )

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()


def _language(screened: Screened) -> Language:
    """The language of the shopper's message (what they wrote, not just the intent)."""
    return language_of(screened.text)
