"""Personalization: a purchase-history boost per product, looked up per user.

boost(product) = 1 + 3.5 * normalised(ln(1 + count) * 0.5 ** (age_days / 60))

where ``normalised`` divides by the user's largest raw score, so a user's most bought,
most recent product gets 4.5x and everything else between 1x and 4.5x. The renderer puts
these boosts outermost: they reorder what the constraints admitted and never re-admit a
product a policy excluded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from control_plane.engine import Engine, EngineError
from control_plane.engine.base import msearch_responses

HALF_LIFE_DAYS = 60.0
MAX_EXTRA = 3.5
MAX_PRODUCTS = 100


def purchase_boosts(
    purchases: Sequence[Mapping[str, Any]], now: datetime
) -> tuple[tuple[str, float], ...]:
    """Pure: purchase rows (product_id, count, last_purchased) -> (product id, boost), sorted by id."""
    raw: dict[str, float] = {}
    for row in purchases:
        last = datetime.fromisoformat(str(row["last_purchased"]).replace("Z", "+00:00"))
        if last.tzinfo is None:
            last = last.replace(tzinfo=now.tzinfo)
        age_days = max((now - last).total_seconds() / 86400.0, 0.0)
        score = math.log1p(max(int(row["count"]), 0)) * 0.5 ** (age_days / HALF_LIFE_DAYS)
        raw[str(row["product_id"])] = raw.get(str(row["product_id"]), 0.0) + score
    top = max(raw.values(), default=0.0)
    if top <= 0:
        return ()
    return tuple(
        (product, round(1.0 + MAX_EXTRA * score / top, 4))
        for product, score in sorted(raw.items())
        if score > 0
    )


def purchases_query(user_id: str) -> dict[str, Any]:
    """The search for a user's purchase rows (most bought first, then by product id)."""
    return {
        "size": MAX_PRODUCTS,
        "query": {"term": {"user_id": user_id}},
        "sort": [{"count": "desc"}, {"product_id": "asc"}],
    }


def purchase_rows(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The purchase rows of an answer to :func:`purchases_query`."""
    return [hit["_source"] for hit in response["hits"]["hits"]]


def lookup_purchases(engine: Engine, index: str, user_id: str) -> list[dict[str, Any]]:
    """The user's purchase rows from the ``user_purchases`` index (empty if none, or no index)."""
    try:
        response = engine.search(index, purchases_query(user_id))
    except EngineError as error:
        if error.status == 404:
            return []
        raise
    return purchase_rows(response)


def lookup_alongside(
    engine: Engine, index: str, user_id: str, search: tuple[str, Mapping[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``search`` (index, body) and the user's purchase rows, in one ``_msearch``: the
    answer to ``search`` and the rows (what :func:`lookup_purchases` returns). ``search``'s
    item fails closed exactly as :meth:`Engine.msearch` makes it (an error or a missing
    shard raises); the purchases item likewise, except that a missing index (404) means no
    rows, as it does alone."""
    searches = [search, (index, purchases_query(user_id))]
    answer, purchases = engine.msearch_answers(searches)
    (checked,) = msearch_responses(searches[:1], [answer])
    if "error" in purchases and purchases.get("status") == 404:
        return checked, []
    (found,) = msearch_responses(searches[1:], [purchases])
    return checked, purchase_rows(found)
