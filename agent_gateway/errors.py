"""The gateway's refusals as the API's errors: one mapping, used by the HTTP route to answer
and by the decision record to say what was answered.

- :class:`BudgetExceeded` -> 429 ``rate_limited`` (details: ``budget``, ``retry_after_s``)
- :class:`MessageTooLarge` -> 413 ``message_too_large``
- :class:`LlmUnavailable` -> 503 ``llm_unavailable``

Anything else (the engine's errors included) keeps the API's usual mapping.
"""

from __future__ import annotations

from agent_gateway.budgets import BudgetExceeded
from agent_gateway.guardrails import MessageTooLarge
from agent_gateway.llm import LlmUnavailable
from control_plane.api.errors import ApiError

GatewayError = BudgetExceeded | MessageTooLarge | LlmUnavailable
GATEWAY_ERRORS = (BudgetExceeded, MessageTooLarge, LlmUnavailable)


def api_error(error: GatewayError) -> ApiError:
    """The API error a gateway refusal answers with."""
    if isinstance(error, BudgetExceeded):
        return ApiError(429, "rate_limited", error.message,
                        [{"budget": error.budget, "retry_after_s": error.retry_after_s}])
    if isinstance(error, MessageTooLarge):
        return ApiError(413, "message_too_large", str(error))
    return ApiError(503, "llm_unavailable",
                    f"intent extraction failed and no fallback is configured: {error}")


def as_api_error(error: BaseException) -> BaseException:
    """A gateway refusal as its API error (what the decision record reports); any other error as is."""
    return api_error(error) if isinstance(error, GATEWAY_ERRORS) else error
