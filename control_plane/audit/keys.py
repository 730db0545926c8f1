"""The audit key ring: the HMAC-SHA-256 keys that seal records and checkpoints.

A key file holds one key per line, ``KEY_ID:SECRET`` (``#`` comments and blank lines
ignored). Every key verifies; the **last** one seals new records. Rotating is appending a
line and restarting the writers: old records keep naming the key that sealed them
(``key_id``), so ``verify`` still checks them as long as the old line stays in the file.

``audit.key`` (``GOVSEARCH_AUDIT_KEY``) is one more key in the same form, added after the
file's: it seals when set. With neither, and ``audit.generate_key`` on (the default, for
the demo), a writer creates a local key file (mode 0600) on its first record; in
production the key lives elsewhere (see ``docs/audit.md``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("govsearch.audit")

KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MIN_SECRET_CHARS = 32

_BLOCK = 64
"""SHA-256's block size: HMAC pads (or first hashes) its key to it"""
_INNER = bytes(byte ^ 0x36 for byte in range(256))
_OUTER = bytes(byte ^ 0x5C for byte in range(256))


def _hmac_pads(secret: bytes) -> tuple[Any, Any]:
    """HMAC-SHA-256's two keyed states (RFC 2104): ``sha256(key ^ ipad)`` and ``sha256(key ^
    opad)``, each the start of every MAC under that key, taken once per key (a copy of each
    per MAC: the key's two blocks are not hashed again for every record)."""
    if len(secret) > _BLOCK:
        secret = hashlib.sha256(secret).digest()
    secret = secret.ljust(_BLOCK, b"\0")
    return hashlib.sha256(secret.translate(_INNER)), hashlib.sha256(secret.translate(_OUTER))


class AuditKeyError(Exception):
    """A key file or key that cannot be used."""


@dataclass(frozen=True)
class KeyRing:
    keys: dict[str, bytes] = field(default_factory=dict)
    signing: str | None = None
    """the key id that seals new records (the last one read)"""
    sources: tuple[str, ...] = ()
    """where the keys came from (files, ``audit.key``), for messages"""
    _pads: dict[str, tuple[Any, Any]] = field(default_factory=dict, init=False, repr=False, compare=False)
    """each key's HMAC pads, made on its first MAC (:func:`_hmac_pads`)"""

    def __bool__(self) -> bool:
        return bool(self.keys)

    def mac(self, key_id: str, purpose: str, message: str) -> str:
        """HMAC-SHA-256 of ``purpose`` + newline + ``message`` under ``key_id``, in hex."""
        pads = self._pads.get(key_id)
        if pads is None:
            pads = self._pads[key_id] = _hmac_pads(self.keys[key_id])
        inner, outer = pads[0].copy(), pads[1].copy()
        inner.update(f"{purpose}\n{message}".encode())
        outer.update(inner.digest())
        return str(outer.hexdigest())

    def check(self, key_id: object, purpose: str, message: str, mac: object) -> str | None:
        """None when ``mac`` is right; else what is wrong (unsealed, unknown key, forged)."""
        if not isinstance(mac, str) or not isinstance(key_id, str):
            return "unsealed"
        if key_id not in self.keys:
            return "unknown_key"
        if not hmac.compare_digest(self.mac(key_id, purpose, message), mac):
            return "forged"
        return None

    def merged(self, other: KeyRing) -> KeyRing:
        return KeyRing(
            {**self.keys, **other.keys}, other.signing or self.signing, self.sources + other.sources
        )


def parse_key(text: str, source: str) -> tuple[str, bytes]:
    key_id, sep, secret = text.strip().partition(":")
    if not sep or not KEY_ID.match(key_id):
        raise AuditKeyError(f"{source}: a key is KEY_ID:SECRET (KEY_ID of letters, digits, . _ -)")
    if len(secret) < MIN_SECRET_CHARS:
        raise AuditKeyError(f"{source}: key {key_id!r} is shorter than {MIN_SECRET_CHARS} characters")
    return key_id, secret.encode()


def read_key_file(path: str | Path) -> KeyRing:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as error:
        raise AuditKeyError(f"cannot read audit key file {file}: {error}") from error
    keys: dict[str, bytes] = {}
    signing = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key_id, secret = parse_key(line, f"{file}:{number}")
        keys[key_id] = secret
        signing = key_id
    if not keys:
        raise AuditKeyError(f"audit key file {file} holds no key")
    return KeyRing(keys, signing, (str(file),))


def generate_key_file(path: str | Path) -> KeyRing:
    """Create ``path`` (mode 0600) with one fresh key, unless another process just did:
    then read theirs (``O_EXCL``: concurrent writers end up with one key)."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    line = f"local-{secrets.token_hex(4)}:{secrets.token_hex(32)}\n"
    try:
        fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_key_file(file)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    log.warning(
        "generated a local audit key in %s: fine for a demo; in production keep the key away"
        " from the log (audit.key_file / GOVSEARCH_AUDIT_KEY, audit.generate_key: false)",
        file,
    )
    return read_key_file(file)


def load_key_ring(key_file: str | None, key: str | None, *, generate: bool) -> KeyRing:
    """The ring of ``key_file`` (when it exists) and ``key``; with neither, a generated
    key file when ``generate``, else an error."""
    ring = KeyRing()
    if key_file and Path(key_file).is_file():
        ring = read_key_file(key_file)
    if key:
        key_id, secret = parse_key(key, "audit.key")
        ring = ring.merged(KeyRing({key_id: secret}, key_id, ("audit.key",)))
    if ring:
        return ring
    if generate and key_file:
        return generate_key_file(key_file)
    raise AuditKeyError(
        f"no audit key: {key_file or 'audit.key_file'} does not exist and audit.key is not set"
        " (set one, or audit.generate_key: true for a local demo key)"
    )
