"""Loading a version from the previous one: unchanged policies are not validated again.

A promotion changes a few policies of a set; loading the new version used to validate all
of them again (100,000 policies: seconds of pydantic, ADR 0015). :func:`load_set` digests
each stored policy document as it was read from the engine (``marshal`` format 2 of the
parsed JSON, which keeps every type and the key order, then BLAKE2b) and takes, in place of
the document, the validated :class:`~control_plane.policy.Policy` the previous loaded
version built from a document with the same id **and** the same digest. Every other
document (new, changed, or with no previous version) is validated in full: the set
document with only those policies goes through ``PolicySet.model_validate`` (vocabularies,
governance and the version too), and the reused policies are put back in their places.
When that validation fails, the whole document is validated again, so the error names the
policy's real position.

The digests are of what was read, never taken from the index: a document whose content
changed has another digest, whatever its id or version claims. Equal digests mean equal
JSON values (the marshal bytes determine them); an equal policy serialised in another key
order only costs a validation. Policy validation reads nothing but the document (no
context, no other policy), so a policy validated once from the same JSON is the policy it
would validate to again.
"""

from __future__ import annotations

import hashlib
import marshal
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from control_plane.policy import Policy, PolicySet

Digests = Mapping[str, bytes]
"""policy id -> the digest of the document it was validated from"""


def digest(document: Any) -> bytes:
    """The digest of one stored policy document (parsed JSON)."""
    return hashlib.blake2b(marshal.dumps(document, 2), digest_size=16).digest()


def reusing(
    documents: list[Any], previous: Mapping[str, Policy], known: Digests
) -> tuple[list[Any], dict[str, bytes], int]:
    """``documents`` with each unchanged one replaced by ``previous``' policy of that id
    (``known``: the digests ``previous`` was validated from); the new digests by id; how
    many were reused."""
    policies: list[Any] = []
    digests: dict[str, bytes] = {}
    reused = 0
    for document in documents:
        found = digest(document)
        policy_id = document.get("id") if isinstance(document, dict) else None
        if isinstance(policy_id, str):
            digests[policy_id] = found
            if known.get(policy_id) == found and (policy := previous.get(policy_id)) is not None:
                policies.append(policy)
                reused += 1
                continue
        policies.append(document)
    return policies, digests, reused


def load_set(
    document: Any, previous: Mapping[str, Policy], known: Digests
) -> tuple[PolicySet, dict[str, bytes], int]:
    """The validated set of a stored set document, reusing ``previous``' unchanged policies
    (module docstring); the digests of its policies by id; how many were reused."""
    if not (isinstance(document, dict) and isinstance(document.get("policies"), list)):
        return PolicySet.model_validate(document), {}, 0  # fails, as it should
    policies, digests, reused = reusing(document["policies"], previous, known)
    fresh = [p for p in policies if not isinstance(p, Policy)]
    try:
        validated = PolicySet.model_validate({**document, "policies": fresh})
    except ValidationError:
        PolicySet.model_validate(document)  # the same error, at the policy's own position
        raise
    if not reused:
        return validated, digests, 0
    built = iter(validated.policies)
    merged = tuple(p if isinstance(p, Policy) else next(built) for p in policies)
    # every part validated: the fresh ones just now, the reused ones when first loaded
    values = {name: getattr(validated, name) for name in PolicySet.model_fields}
    policy_set = PolicySet.model_construct(validated.model_fields_set, **{**values, "policies": merged})
    return policy_set, digests, reused
