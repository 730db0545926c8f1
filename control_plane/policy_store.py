"""Policy sets in the engine: one immutable percolator index per version, behind aliases.

``publish`` writes a policy set to ``PREFIX-<version[:16]>`` (if that index does not exist
yet), marks it read-only and moves an alias (``PREFIX-live``, ``PREFIX-staging``) to it in
one atomic ``_aliases`` call. ``resolve`` reads an alias back into the concrete index and
its policy set, so every request works on one index and one set: never a mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from control_plane.config import project_path
from control_plane.engine import Engine, EngineError
from control_plane.matcher import percolator_document
from control_plane.policy import PolicySet

META_ID = "__policy_set__"


@lru_cache(maxsize=1)
def policies_mapping() -> dict[str, Any]:
    mapping: dict[str, Any] = json.loads(project_path("mappings/policies.json").read_text(encoding="utf-8"))
    return mapping


@dataclass(frozen=True)
class LivePolicySet:
    """A policy set as served: the concrete index holding it, and the set itself."""

    index: str
    policy_set: PolicySet


def index_name(prefix: str, version: str) -> str:
    return f"{prefix}-{version[:16]}"


def alias_name(prefix: str, env: str) -> str:
    return f"{prefix}-{env}"


def write_index(engine: Engine, prefix: str, policy_set: PolicySet) -> str:
    """Create the immutable index for ``policy_set`` (idempotent); return its name."""
    name = index_name(prefix, policy_set.version)
    if engine.index_exists(name):
        meta = engine.get_document(name, META_ID)
        if meta and meta["_source"].get("policy_set_version") == policy_set.version:
            return name
        engine.delete_index(name)  # a half-written index from an interrupted publish
    engine.create_index(name, policies_mapping())
    try:
        counts: dict[str, int] = {}

        def count_tokens(phrase: str) -> int:
            if phrase not in counts:
                counts[phrase] = len(engine.analyze(name, "govsearch_text", phrase))
            return counts[phrase]

        operations: list[dict[str, Any]] = []
        for policy in policy_set.policies:
            operations.append({"index": {"_index": name, "_id": policy.id}})
            operations.append(percolator_document(policy, policy_set.version, count_tokens))
        result: dict[str, Any] = (
            engine.bulk(operations, refresh=True) if operations else {"errors": False, "items": []}
        )
        if result.get("errors"):
            failed = [i for i in result["items"] if i["index"].get("error")]
            raise EngineError(f"{len(failed)} policies were refused by the engine: {failed[0]}")
        # The meta document is written last: its presence marks the index complete.
        engine.index_document(
            name,
            META_ID,
            {
                "doc_type": "policy_set",
                "policy_set_version": policy_set.version,
                "policy_set": json.loads(policy_set.model_dump_json(by_alias=True)),
            },
            refresh=True,
        )
        engine.request("PUT", f"/{name}/_settings", body={"index.blocks.write": True})
    except Exception:
        engine.delete_index(name)
        raise
    return name


def publish(engine: Engine, prefix: str, policy_set: PolicySet, env: str) -> str:
    """Write the set's index and point ``env``'s alias at it, atomically."""
    name = write_index(engine, prefix, policy_set)
    point_alias(engine, alias_name(prefix, env), name)
    return name


def point_alias(engine: Engine, alias: str, index: str) -> None:
    actions: list[dict[str, Any]] = [
        {"remove": {"index": old, "alias": alias}} for old in engine.alias_targets(alias) if old != index
    ]
    actions.append({"add": {"index": index, "alias": alias}})
    engine.update_aliases(actions)


def resolve(engine: Engine, prefix: str, env: str) -> LivePolicySet | None:
    """The index an environment's alias points to, and the policy set stored in it."""
    targets = engine.alias_targets(alias_name(prefix, env))
    if not targets:
        return None
    return read_index(engine, targets[0])


def read_index(engine: Engine, index: str) -> LivePolicySet:
    meta = engine.get_document(index, META_ID)
    if meta is None:
        raise EngineError(f"policies index {index} has no policy set document (incomplete)")
    policy_set = PolicySet.model_validate(meta["_source"]["policy_set"])
    return LivePolicySet(index=index, policy_set=policy_set)
