"""Load a catalog (NDJSON) into a new versioned index and move the catalog alias to it,
only when every document was accepted. Also stores the per-category price statistics
that category-relative price rules resolve against, in the index's mapping ``_meta``
(so the statistics always belong to exactly the catalog version they describe).

Nothing partial ever goes live: malformed lines are reported with their line numbers
before any index is created, and an index whose bulk load lost a document is deleted.
The alias move is a compare-and-swap against the index the alias was on when the load
started: a concurrent load that moved it meanwhile makes this one fail (CatalogLoadError
naming the index that won), never leaves the alias on two indices.

An engine that fails in the middle of a load (killed, unreachable, timing out) fails it
with :class:`CatalogLoadInterrupted`, which says what was left: the alias not moved, and
the new index deleted or, when the engine could not be asked to, left half written (never
marked complete, so never reused: the same load run again deletes and rewrites it). One
that fails while the alias moves leaves a complete index, which the same load reuses.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from control_plane.catalog.profile import CatalogProfile
from control_plane.catalog.stats import category_price_stats, stats_to_json
from control_plane.config import project_path
from control_plane.engine import Engine, EngineError
from control_plane.policy_store import AliasMoved, point_alias, single_target

BATCH = 500
#: Part of the index name: a load that stores statistics of another shape (``samples`` since
#: version 2) builds a new index instead of reusing one with the old statistics.
STATS_FORMAT = "stats-2"
CATALOG_AMBIGUOUS = "catalog_ambiguous"


class CatalogLoadError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"{len(problems)} problem(s):\n" + "\n".join(problems))
        self.problems = problems


class CatalogLoadInterrupted(EngineError):
    """The engine failed in the middle of a load; the message says what the load left."""


@dataclass(frozen=True)
class LoadReport:
    index: str
    alias: str
    documents: int
    categories: int
    reused: bool


def parse_ndjson(path: Path, profile: CatalogProfile) -> list[dict[str, Any]]:
    """Every line must be a JSON object with a string id; all problems are collected."""
    products: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    try:
        opened = open(path, encoding="utf-8")  # noqa: SIM115 (closed by the with below)
    except OSError as error:  # a directory, no permission: invalid input, not a traceback
        reason = error.strerror or error
        raise CatalogLoadError([f"{path}: cannot read the catalog file: {reason}"]) from error
    with opened as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                product = json.loads(line)
            except ValueError as error:
                problems.append(f"{path}:{number}: invalid JSON: {error}")
                continue
            if not isinstance(product, dict):
                problems.append(f"{path}:{number}: a product must be a JSON object")
                continue
            product_id = product.get(profile.id)
            if not isinstance(product_id, str) or not product_id:
                problems.append(f"{path}:{number}: missing or non-string '{profile.id}'")
                continue
            if product_id in seen:
                problems.append(
                    f"{path}:{number}: duplicate id {product_id!r} (first on line {seen[product_id]})"
                )
                continue
            seen[product_id] = number
            products.append(product)
    if problems:
        raise CatalogLoadError(problems)
    if not products:
        raise CatalogLoadError([f"{path}: no products"])
    return products


def load_catalog(engine: Engine, profile: CatalogProfile, path: Path) -> LoadReport:
    products = parse_ndjson(path, profile)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    mapping = profile.load_mapping()
    mapping_digest = hashlib.sha256(json.dumps(mapping, sort_keys=True).encode()).hexdigest()
    content = digest + mapping_digest + STATS_FORMAT
    index = f"{profile.alias}-{hashlib.sha256(content.encode()).hexdigest()[:12]}"
    stats = category_price_stats(products, profile)
    expected = single_target(engine, profile.alias, CATALOG_AMBIGUOUS)
    if engine.index_exists(index) and _complete(engine, index, len(products)):
        _move(engine, profile.alias, index, expected)
        return LoadReport(index, profile.alias, len(products), len(stats), reused=True)
    engine.delete_index(index)
    engine.create_index(index, mapping)
    try:
        _bulk(engine, index, profile, products)
        engine.refresh(index)
        count = engine.request("GET", f"/{index}/_count")["count"]
        if count != len(products):
            raise EngineError(f"{index} holds {count} documents, expected {len(products)}")
        engine.request(
            "PUT",
            f"/{index}/_mapping",
            body={
                "_meta": {
                    "govsearch": {
                        "source_sha256": digest,
                        "documents": len(products),
                        "price_stats": json.loads(stats_to_json(stats)),
                    }
                }
            },
        )
    except Exception as error:
        left = _discard(engine, index)
        if isinstance(error, EngineError):
            kept = f"it stays on {expected}" if expected else "it points to no index"
            raise CatalogLoadInterrupted(
                f"loading {index} failed: {error}; {profile.alias} was not moved ({kept}); "
                + (
                    f"{index} is left half written (it could not be deleted: {left}): it is never"
                    " served, and load-catalog with the same file deletes and rewrites it"
                    if left else f"{index} was deleted"
                ),
                status=error.status, info=error.info,
            ) from error
        if left and isinstance(error, CatalogLoadError):
            raise CatalogLoadError([*error.problems, f"{index} is left half written: {left}"]) from error
        raise
    _move(engine, profile.alias, index, expected)
    return LoadReport(index, profile.alias, len(products), len(stats), reused=False)


def _discard(engine: Engine, index: str) -> str | None:
    """Delete the index a failed load was writing; None when done, else why it could not be."""
    try:
        engine.delete_index(index)
    except EngineError as error:
        return str(error)
    return None


def _move(engine: Engine, alias: str, index: str, expected: str | None) -> None:
    """Move ``alias`` to the complete ``index``, from ``expected`` only."""
    try:
        point_alias(engine, alias, index, expected=expected)
    except AliasMoved as moved:
        raise CatalogLoadError([
            f"concurrent_change: another load moved {alias} to {', '.join(moved.current) or 'nothing'}"
            f" while this one ran (it expected {expected or 'no catalog yet'}); {alias} was left there"
        ]) from moved
    except EngineError as error:  # the move may or may not have been made: either is whole
        raise CatalogLoadInterrupted(
            f"moving {alias} to {index} failed: {error}; {index} holds every product, {alias} is on"
            f" it or still on {expected or 'no index'}, and load-catalog with the same file moves it there",
            status=error.status, info=error.info,
        ) from error


def _complete(engine: Engine, index: str, expected: int) -> bool:
    mapping = engine.request("GET", f"/{index}/_mapping")[index]["mappings"]
    meta = mapping.get("_meta", {}).get("govsearch", {})
    return bool(meta.get("documents") == expected)


def _bulk(
    engine: Engine, index: str, profile: CatalogProfile, products: list[dict[str, Any]]
) -> None:
    problems: list[str] = []
    for start in range(0, len(products), BATCH):
        batch = products[start : start + BATCH]
        result = engine.bulk(_operations(index, profile, batch))
        if result.get("errors"):
            for offset, item in enumerate(result["items"]):
                error = item["index"].get("error")
                if error:
                    problems.append(
                        f"product {batch[offset][profile.id]!r}: {error.get('type')}: {error.get('reason')}"
                    )
    if problems:
        raise CatalogLoadError(problems)


def _operations(
    index: str, profile: CatalogProfile, batch: list[dict[str, Any]]
) -> Iterable[dict[str, Any]]:
    for product in batch:
        yield {"index": {"_index": index, "_id": product[profile.id]}}
        yield product


def load_purchases(engine: Engine, index: str, purchases: list[dict[str, Any]]) -> int:
    """Replace the user purchases index with ``purchases`` (user_id, product_id, count, last_purchased)."""
    mapping_file = project_path("mappings/user_purchases.json")
    engine.delete_index(index)
    engine.create_index(index, json.loads(mapping_file.read_text(encoding="utf-8")))
    operations: list[dict[str, Any]] = []
    for row in purchases:
        operations.append(
            {"index": {"_index": index, "_id": f"{row['user_id']}:{row['product_id']}"}}
        )
        operations.append(row)
    if operations:
        result = engine.bulk(operations, refresh=True)
        if result.get("errors"):
            raise EngineError("some purchases were refused by the engine")
    return len(purchases)
