"""API keys and roles.

A key reads ``gsk_<key id>_<secret>``: the id (12 hex characters) finds the stored entry,
the secret is 32 random bytes. Only the SHA-256 of the whole key is stored, in the
``auth.keys_index`` index, with the principal it identifies and its roles. A key carries
256 bits of entropy, so a fast hash is enough: there is nothing to brute-force that a
slow hash would protect (ADR 0005). Comparison is constant-time.

Roles (``admin`` holds every permission):

=========  ==============================================================================
search     ``/v1/search``, ``/v1/compile``, ``/v1/agent/query``, ``/v1/events`` (when
           ``auth.search_requires_key`` is on; open otherwise)
author     read policies and history; draft in staging, apply, run tests, lint, diff, suggest
approver   read policies and history; run tests, lint, diff; approve, promote, rollback,
           disable (a guard only with ``admin``)
auditor    read policies and history; the audit API
admin      everything
=========  ==============================================================================
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, get_args

from control_plane.engine import Engine
from control_plane.times import iso

Role = Literal["search", "author", "approver", "auditor", "admin"]
ROLES: tuple[str, ...] = get_args(Role)
PRINCIPAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
KEY = re.compile(r"^gsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")

KEYS_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "key_id": {"type": "keyword"},
            "principal": {"type": "keyword"},
            "roles": {"type": "keyword"},
            "sha256": {"type": "keyword"},
            "label": {"type": "keyword"},
            "created_at": {"type": "date"},
            "revoked_at": {"type": "date"},
        },
    },
}


class AuthError(Exception):
    """A key that cannot be used: missing, or malformed, unknown or revoked (one code for
    the last three, so a caller learns nothing about which keys exist)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


MISSING = AuthError(
    "missing_api_key", "this endpoint needs an API key: 'Authorization: Bearer gsk_...'"
)
INVALID = AuthError("invalid_api_key", "the API key is not valid (unknown, malformed or revoked)")


@dataclass(frozen=True)
class Principal:
    """Who is acting, and with which roles."""

    name: str
    roles: frozenset[str]
    key_id: str | None = None

    def has(self, *roles: str) -> bool:
        return "admin" in self.roles or any(role in self.roles for role in roles)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("ascii")).hexdigest()


class KeyStore:
    def __init__(self, engine: Engine, index: str) -> None:
        self.engine = engine
        self.index = index

    def _ensure(self) -> None:
        self.engine.ensure_index(self.index, KEYS_MAPPING)

    def create(
        self, principal: str, roles: Iterable[str], now: datetime, label: str | None = None
    ) -> tuple[str, Principal]:
        """A new key for ``principal``: the key text (shown once) and its principal."""
        if not PRINCIPAL.match(principal):
            raise ValueError(f"principal {principal!r}: letters, digits, '_', '.', '@', '-' only")
        wanted = sorted(set(roles))
        unknown = [role for role in wanted if role not in ROLES]
        if not wanted or unknown:
            raise ValueError(
                f"roles must be some of {', '.join(ROLES)}"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        self._ensure()
        key_id = secrets.token_hex(6)
        key = f"gsk_{key_id}_{secrets.token_urlsafe(32)}"
        self.engine.index_document(
            self.index,
            key_id,
            {"key_id": key_id, "principal": principal, "roles": wanted, "sha256": _hash(key),
             "label": label, "created_at": iso(now), "revoked_at": None},
            refresh=True,
        )
        return key, Principal(principal, frozenset(wanted), key_id)

    def authenticate(self, key: str | None) -> Principal:
        if not key:
            raise AuthError(MISSING.code, str(MISSING))
        match = KEY.match(key.strip())
        if match is None:
            raise AuthError(INVALID.code, str(INVALID))
        found = self.engine.get_document(self.index, match.group(1)) if self.engine.index_exists(
            self.index
        ) else None
        if found is None:
            raise AuthError(INVALID.code, str(INVALID))
        entry = found["_source"]
        if not hmac.compare_digest(entry["sha256"], _hash(key.strip())) or entry.get("revoked_at"):
            raise AuthError(INVALID.code, str(INVALID))
        return Principal(entry["principal"], frozenset(entry["roles"]), entry["key_id"])

    def revoke(self, key_id: str, now: datetime) -> bool:
        found = self.engine.get_document(self.index, key_id) if self.engine.index_exists(
            self.index
        ) else None
        if found is None:
            return False
        entry = {**found["_source"], "revoked_at": iso(now)}
        self.engine.index_document(self.index, key_id, entry, refresh=True)
        return True

    def list(self) -> list[dict[str, Any]]:
        """Every key's id, principal, roles, label and dates (never the hash)."""
        if not self.engine.index_exists(self.index):
            return []
        result = self.engine.search(
            self.index, {"size": 1000, "query": {"match_all": {}}, "sort": [{"created_at": "asc"}]}
        )
        return [
            {k: v for k, v in hit["_source"].items() if k != "sha256"}
            for hit in result["hits"]["hits"]
        ]
