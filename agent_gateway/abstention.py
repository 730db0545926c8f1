"""When a governed search is not an answer: the agent abstains instead of presenting a
catalog dump as a reply.

What counts is what was *applied*, never what merely matched: a policy that matched and
was then skipped (``capture_unmapped``, ``span_consumed``...) changed nothing. Guards
always apply and ``always`` policies (cohort rules) apply whatever the words, so neither
says the intent was understood. The mode (``GatewaySettings.abstain``):

- ``no_policy`` (default): abstain, before searching, when no policy other than guards
  and ``always`` policies was applied (code ``no_policy_applied``);
- ``broad_guards_only``: search, and abstain when the broad tier served and nothing but
  guards was applied (code ``broad_tier_guards_only``): plain words that find products on
  the strict or relaxed tier are still served;
- ``off``: never abstain for this (``POST /v1/search`` never does).

``require_policy_match`` (gateway, else ``search``) is the older switch for ``no_policy``.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_gateway.settings import Abstain, GatewaySettings
from control_plane.service import Compiled, Outcome

NO_POLICY_APPLIED = "no_policy_applied"
BROAD_TIER_GUARDS_ONLY = "broad_tier_guards_only"


@dataclass(frozen=True)
class Abstention:
    code: str
    reason: str


def abstain_mode(settings: GatewaySettings, search_requires_match: bool) -> Abstain:
    """The mode in force: the gateway's ``require_policy_match`` when set, else
    ``search.require_policy_match`` when on, else ``abstain``."""
    if settings.require_policy_match is not None:
        return "no_policy" if settings.require_policy_match else "off"
    return "no_policy" if search_requires_match else settings.abstain


def _kinds(compiled: Compiled) -> dict[str, tuple[str, str]]:
    """policy id -> (kind, trigger kind), for every policy that matched."""
    return {m.policy_id: (m.kind, m.trigger) for m in compiled.composition.explanation.matched}


def understood_by(compiled: Compiled) -> tuple[str, ...]:
    """The applied policies that say the intent was understood: not guards, not ``always``."""
    kinds = _kinds(compiled)
    understood = []
    for policy_id in compiled.composition.plan.applied:
        kind, trigger = kinds.get(policy_id, ("policy", "unknown"))
        if kind == "policy" and trigger != "always":
            understood.append(policy_id)
    return tuple(understood)


def only_guards_applied(compiled: Compiled) -> bool:
    kinds = _kinds(compiled)
    return all(kinds.get(p, ("policy", ""))[0] == "guard" for p in compiled.composition.plan.applied)


def _skipped(compiled: Compiled) -> str:
    skipped = compiled.composition.explanation.skipped
    if not skipped:
        return ""
    return "; matched but not applied: " + ", ".join(f"{s.policy_id} ({s.code})" for s in skipped)


def before_search(compiled: Compiled, mode: Abstain) -> Abstention | None:
    if mode != "no_policy" or understood_by(compiled):
        return None
    return Abstention(
        NO_POLICY_APPLIED,
        "no shop policy applied to the intent (only guards and always-on policies)" + _skipped(compiled),
    )


def after_search(outcome: Outcome, mode: Abstain) -> Abstention | None:
    if mode == "off" or outcome.execution.tier != "broad" or not only_guards_applied(outcome.compiled):
        return None
    return Abstention(
        BROAD_TIER_GUARDS_ONLY,
        "the search fell back to the broad tier with only guards applied: the results would be loose"
        " word matches" + _skipped(outcome.compiled),
    )
