"""Checkpoints: each writer's head, sealed and written to a second place.

A chain alone cannot show that its tail was cut off: the shorter log is still a valid
chain. So every writer writes, every ``audit.checkpoint_every_records`` records or
``audit.checkpoint_every_s`` seconds (monotonic, looked at when a record is written or
``/readyz`` is asked) and when it shuts down, a checkpoint::

    {"kind": "checkpoint", "log": "decisions", "writer": W, "sequence": 120,
     "hash": <hash of record 120>, "time": ..., "reason": "interval" | "shutdown",
     "key_id": K, "mac": HMAC(K, "govsearch-audit-checkpoint-v1\\n" + canonical JSON)}

to a checkpoint file (``audit.checkpoint_path``; default ``checkpoints.jsonl`` beside the
JSONL log) or, with the engine sink and no path, the index ``<audit.index>-checkpoints``.
``verify`` compares each writer's log with its latest checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from control_plane.audit.keys import KeyRing
from control_plane.audit.record import canonical_json
from control_plane.audit.sinks import JsonlSink, SinkError
from control_plane.config import AuditSettings
from control_plane.engine import Engine, EngineError

CHECKPOINT_MAC = "govsearch-audit-checkpoint-v1"

CHECKPOINT_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "log": {"type": "keyword"},
            "writer": {"type": "keyword"},
            "sequence": {"type": "long"},
        },
    },
}


def _body(checkpoint: dict[str, Any]) -> str:
    return canonical_json({k: v for k, v in checkpoint.items() if k != "mac"})


def seal_checkpoint(checkpoint: dict[str, Any], keys: KeyRing | None) -> dict[str, Any]:
    if not keys or keys.signing is None:
        return dict(checkpoint)
    sealed = {**checkpoint, "key_id": keys.signing}
    sealed["mac"] = keys.mac(keys.signing, CHECKPOINT_MAC, _body(sealed))
    return sealed


def check_checkpoint(checkpoint: dict[str, Any], keys: KeyRing) -> str | None:
    """None when the checkpoint's MAC is right, else ``unsealed``/``unknown_key``/``forged``."""
    return keys.check(checkpoint.get("key_id"), CHECKPOINT_MAC, _body(checkpoint), checkpoint.get("mac"))


class CheckpointStore(Protocol):
    def write(self, checkpoint: dict[str, Any]) -> None: ...

    def scan(self) -> Iterator[dict[str, Any]]: ...

    def describe(self) -> str: ...

    def exists(self) -> bool: ...


class FileCheckpoints:
    """Checkpoints as lines of a JSONL file (appended like the log: one write, locked)."""

    def __init__(self, path: str | Path) -> None:
        self.file = JsonlSink(path)

    def write(self, checkpoint: dict[str, Any]) -> None:
        self.file.write(checkpoint)

    def scan(self) -> Iterator[dict[str, Any]]:
        return self.file.scan()

    def describe(self) -> str:
        return self.file.describe()

    def exists(self) -> bool:
        return self.file.path.is_file()


class EngineCheckpoints:
    """Checkpoints as documents of an index, id ``<log>:<writer>:<sequence>``."""

    def __init__(self, engine: Engine, index: str) -> None:
        self.engine = engine
        self.index = index
        self._ready = False

    def write(self, checkpoint: dict[str, Any]) -> None:
        doc_id = f"{checkpoint['log']}:{checkpoint['writer']}:{checkpoint['sequence']}"
        try:
            if not self._ready:
                self.engine.ensure_index(self.index, CHECKPOINT_MAPPING)
                self._ready = True
            self.engine.index_document(self.index, doc_id, checkpoint, refresh=True)
        except EngineError as error:
            raise SinkError(f"cannot index a checkpoint into {self.index}: {error}") from error

    def scan(self) -> Iterator[dict[str, Any]]:
        if not self.engine.index_exists(self.index):
            return
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": 1000,
                "query": {"match_all": {}},
                "sort": [{"log": "asc"}, {"writer": "asc"}, {"sequence": "asc"}],
            }
            if after is not None:
                body["search_after"] = after
            hits = self.engine.search(self.index, body)["hits"]["hits"]
            for hit in hits:
                yield hit["_source"]
            if len(hits) < 1000:
                return
            after = hits[-1]["sort"]

    def describe(self) -> str:
        return f"{self.engine.url}/{self.index}"

    def exists(self) -> bool:
        return self.engine.index_exists(self.index)


def checkpoint_store(audit: AuditSettings, engine: Engine | None) -> CheckpointStore:
    """``audit.checkpoint_path`` when set; else the index ``<index>-checkpoints`` with the
    engine sink, or ``checkpoints.jsonl`` beside the JSONL log."""
    if audit.checkpoint_path:
        return FileCheckpoints(audit.checkpoint_path)
    if audit.sink == "engine":
        if engine is None:
            raise ValueError("engine checkpoints need an engine")
        return EngineCheckpoints(engine, audit.index + "-checkpoints")
    return FileCheckpoints(Path(audit.path).with_name("checkpoints.jsonl"))
