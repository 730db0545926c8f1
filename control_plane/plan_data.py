"""A plan and its explanation as JSON data: ``json.loads(model.model_dump_json())``, made in
one pass (pydantic's JSON mode, ``model_dump(mode="json")``) instead of writing JSON text and
parsing it back. Built once per compiled plan (the decision record's parts, the answer's
explanation), so on every plan-cache miss (ADR 0046).

The two passes give the same data (the same keys in the same order, the same values of the
same types) but for one difference: a field *typed* ``float`` keeps a value that is not
finite (``inf``, ``nan``) in JSON mode, where JSON text writes ``null`` (a value of an
``object`` field, a change's ``before`` and ``after``, is ``None`` either way). So:

- an :class:`~control_plane.plan.Explanation` has no field typed ``float`` (its changes'
  values are ``object``): one pass always;
- a :class:`~control_plane.plan.Plan` has (bounds, weights, boost and constraint values):
  one pass when every one of them is finite, the two passes otherwise (the renderer refuses
  such a plan anyway, but its record and digest stay what they were).

``tests/composer/test_plan_data.py`` holds both to the two passes, and the float-typed
fields to the ones :func:`_finite` reads (a new one fails there until it is read here).
"""

from __future__ import annotations

import json
import math
from typing import Any

from control_plane.plan import Constraint, Explanation, Plan


def explanation_data(explanation: Explanation) -> dict[str, Any]:
    """``json.loads(explanation.model_dump_json())``, in one pass."""
    return explanation.model_dump(mode="json")


def plan_data(plan: Plan) -> dict[str, Any]:
    """``json.loads(plan.model_dump_json())``, in one pass when every float in it is finite."""
    if _finite(plan):
        return plan.model_dump(mode="json")
    data: dict[str, Any] = json.loads(plan.model_dump_json())
    return data


def _finite(plan: Plan) -> bool:
    """Every field of ``plan`` typed ``float`` (or holding a :data:`~control_plane.policy.Value`)
    is finite."""
    price = plan.price
    numbers = [plan.margin_weight.value, plan.popularity_weight.value]
    numbers += [bound.value for bound in (price.min, price.max) if bound is not None]
    numbers += [boost.weight for boost in plan.boosts]
    numbers += [sponsored.weight for sponsored in plan.sponsored]
    constraints: list[Constraint] = [*plan.filters, *plan.exclusions, *plan.guards, *plan.guard_exclusions]
    if plan.category is not None:
        constraints.append(plan.category)
    values = [v for c in constraints for v in c.values] + [v for boost in plan.boosts for v in boost.values]
    if float in map(type, values):  # most values are strings: the type test runs in C
        numbers += [v for v in values if type(v) is float]
    return all(map(math.isfinite, numbers))
