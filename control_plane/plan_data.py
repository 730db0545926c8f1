"""A plan and its explanation as JSON data: ``json.loads(model.model_dump_json())``, made in
one pass (pydantic's JSON mode, ``model_dump(mode="json")``) instead of writing JSON text and
parsing it back. Built once per compiled plan (the decision record's parts, the answer's
explanation), so on every plan-cache miss (ADR 0046).

The two passes give the same data (the same keys in the same order, the same values of the
same types) but for one difference: a float that is not finite (``inf``, ``nan``) where the
model types it, or in a model held by an untyped field, stays a float in JSON mode, where
JSON text writes ``null``. So:

- an :class:`~control_plane.plan.Explanation` takes the one pass: it has no field typed
  ``float`` anywhere in its tree, and the untyped values it holds (a change's ``before`` and
  ``after``) are plain data, where a float that is not finite is ``None`` either way.
  ``tests/composer/test_plan_data.py`` holds both facts (the types of its whole tree, the
  composer's changes being plain data). At 50 matched policies it is about 60 KB of JSON:
  0.47 ms in one pass against 2.0 in two (thread CPU, one machine);
- a :class:`~control_plane.plan.Plan` keeps the two passes. It has float fields (bounds,
  weights, boosts), and the one pass would need a check of every float in it, which costs
  more in Python than the second pass it saves (a plan is 0.4-3 KB: 20-55 us in two passes).
"""

from __future__ import annotations

import json
from typing import Any

from control_plane.plan import Explanation, Plan


def explanation_data(explanation: Explanation) -> dict[str, Any]:
    """``json.loads(explanation.model_dump_json())``, in one pass."""
    return explanation.model_dump(mode="json")


def plan_data(plan: Plan) -> dict[str, Any]:
    """``json.loads(plan.model_dump_json())``: the two passes (see above)."""
    data: dict[str, Any] = json.loads(plan.model_dump_json())
    return data
