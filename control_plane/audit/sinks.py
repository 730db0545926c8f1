"""Where sealed records go: a JSONL file (default) or an engine index.

A sink writes one sealed record or raises; it never decides what to do on failure (the
recorder buffers and reports). Reads serve the audit API and ``verify``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from control_plane.audit.chain import Head
from control_plane.audit.record import canonical_bytes
from control_plane.engine import Engine, EngineError

#: the audit index mapping: the chain keys and what the API filters on; the rest of the
#: record is kept in ``_source`` without being indexed
AUDIT_MAPPING: dict[str, Any] = {
    "settings": {"number_of_shards": 1, "number_of_replicas": 0},
    "mappings": {
        "dynamic": False,
        "properties": {
            "kind": {"type": "keyword"},
            "writer": {"type": "keyword"},
            "sequence": {"type": "long"},
            "request_id": {"type": "keyword"},
            "time": {"type": "date"},
            "applied_policies": {"type": "keyword"},
            "policy_set_version": {"type": "keyword"},
            "status": {"type": "keyword"},
            "type": {"type": "keyword"},
        },
    },
}


class SinkError(Exception):
    """A record could not be written."""


class SyncError(SinkError):
    """The records were written but their sync to disk failed: they are in the file (writing
    them again would duplicate their sequences), not known to be on disk."""


class SinkBusy(SinkError):
    """Nothing was written: the file's lock is held by another writer and the caller would
    not wait for it (the event loop's own write, ADR 0050)."""


def write_all(
    sink: Any,
    records: list[dict[str, Any]],
    written: Callable[[], None] | None = None,
    lines: list[bytes] | None = None,
) -> None:
    """``records`` through the sink's ``write_many`` (one append, one fsync), or one by one
    for a sink without it. ``written`` (the ``written`` commit level) is called once the
    records are written and before they are synced, where the sink has such a moment (else
    once it returns). ``lines``: the records' canonical JSON, when the caller has it (the
    chain's :meth:`~control_plane.audit.chain.Chain.seal_line`), for a sink that writes lines."""
    many = getattr(sink, "write_many", None)
    if many is not None:
        options: dict[str, Any] = {}
        if written is not None:
            options["written"] = written
        if lines is not None:
            options["lines"] = lines
        many(records, **options)
        return
    for record in records:
        sink.write(record)
    if written is not None:
        written()


class Sink(Protocol):
    name: str

    def write(self, record: dict[str, Any]) -> None: ...

    def write_many(
        self,
        records: list[dict[str, Any]],
        *,
        written: Callable[[], None] | None = None,
        lines: list[bytes] | None = None,
    ) -> None:
        """The records in this order, as one durable append where the sink can; ``written``
        is called between the write and the sync (the ``written`` commit level). ``lines``,
        when given, are the records' canonical JSON (``canonical_bytes``), one each: a sink
        that writes lines writes them rather than serialising the records again."""
        ...

    def scan(self) -> Iterator[dict[str, Any]]:
        """Every readable record, in write order."""
        ...

    def select(
        self, *, request_id: str | None, since: datetime | None, until: datetime | None
    ) -> Iterator[dict[str, Any]]:
        """At least the records with that request id and ``time`` in ``[since, until)``
        (a sink may narrow the read or not: the recorder filters exactly)."""
        ...

    def head(self, writer: str) -> Head | None:
        """Where ``writer``'s chain stands in this sink (None: never wrote here)."""
        ...

    def describe(self) -> str: ...


_datasync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)
"""``fdatasync`` where there is one (Linux), else ``fsync``"""


def _sync_directory(directory: Path) -> None:
    """fsync a directory (a file's new name in it), where directories can be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # a platform without directory descriptors: nothing more to sync
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Torn(Exception):
    """A write cut short whose cut back failed too: the file from ``size`` to ``end`` is a
    part of a batch that is not written (the writer holds it and tries it again)."""

    def __init__(self, size: int, end: int, error: OSError) -> None:
        super().__init__(f"a write cut short could not be undone: {error}")
        self.size, self.end = size, end


def _append(fd: int, line: bytes, size: int) -> None:
    """``line`` at the end of the file (``O_APPEND``, under the caller's ``flock``), whole or
    not at all: a write cut short (a full disk, a quota) is undone by cutting the file back
    to ``size``, so the batch's retry does not follow a part of itself (a torn line, or
    records already in the file: the chain would read them twice). Should the cut fail
    too: :class:`_Torn`, the part left in the file."""
    done = 0
    try:
        while done < len(line):  # a short write (rare): finished under the lock
            done += os.write(fd, line[done:])
    except OSError as error:
        if done:
            try:
                os.ftruncate(fd, size)
            except OSError as cut:
                raise _Torn(size, size + done, cut) from error
        raise


class JsonlSink:
    """Append one canonical JSON line per record; synced to disk before returning.

    Several processes may append to one file: each record is one ``write`` on an
    ``O_APPEND`` descriptor under an exclusive ``flock``, so lines never interleave; a
    torn last line (a writer killed mid-write) is closed with a newline first, so the
    next record starts a line of its own."""

    name = "jsonl"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._to_sync = threading.Lock()
        """guards the two below: set by the appending thread, taken by the syncing one"""
        self._unsynced_name = False
        """an :meth:`append_lines` created the file: its directory is synced with it"""
        self._sync_fd: int | None = None
        """the descriptor of the first :meth:`append_lines` since the last sync, kept open"""
        self._torn: tuple[int, int] | None = None
        """(size, end): a part of a held batch left in the file by a write cut short whose cut
        back failed; cut off before anything else is appended (under the lock)"""

    def describe(self) -> str:
        return str(self.path)

    def write(self, record: dict[str, Any]) -> None:
        self.write_many([record])

    def write_many(
        self,
        records: list[dict[str, Any]],
        *,
        written: Callable[[], None] | None = None,
        lines: list[bytes] | None = None,
    ) -> None:
        """The records, one line each, in one ``write`` and one ``fdatasync`` (group commit).
        ``written`` is called once the ``write`` returned (the lines are in the kernel's
        page cache: they survive a killed process) and before the sync (they survive a power
        loss once it returns). The sync is ``fdatasync``: for a file only ever appended to it
        flushes the data and the size that reaches it, all ``fsync`` adds is the times. A
        file this append created (or found empty) has its directory synced too, so its
        name survives with it. ``lines``: the records' canonical JSON, already made (the
        chain's ``seal_line``)."""
        if lines is None:
            lines = [canonical_bytes(record) for record in records]
        fd, size = self._open_and_append(lines, wait=True)
        try:
            if written is not None:
                written()
            self._sync_through(fd, directory=not size)
        finally:
            self._close(fd)

    def append_lines(self, lines: list[bytes], *, wait: bool = True) -> None:
        """The lines appended as :meth:`write_many` appends them, not synced (the ``written``
        commit level's own write, ADR 0050: :meth:`sync_appended` follows, from another
        thread). ``wait=False``: :class:`SinkBusy` at once, nothing written, when another
        process holds the file's lock. :class:`SyncError` when the lines went in but the
        file would not close: they are in the file all the same."""
        fd, size = self._open_and_append(lines, wait=wait)
        with self._to_sync:
            self._unsynced_name = self._unsynced_name or not size
            if self._sync_fd is None:  # the first append since the last sync: the next sync's
                self._sync_fd, fd = fd, -1  # descriptor (it reports any write-back error since)
        if fd >= 0:
            self._close(fd)

    def sync_appended(self) -> None:
        """Sync what :meth:`append_lines` wrote, and the directory when an append created the
        file: through the descriptor of the first append since the last sync, opened before
        every line the sync covers, so a write-back error of any of them is reported to it
        (a descriptor opened later may not see an error another one already reported), then
        closed. :class:`SyncError` when it fails."""
        with self._to_sync:
            fd, self._sync_fd = self._sync_fd, None
            directory, self._unsynced_name = self._unsynced_name, False
        try:
            if fd is None:  # nothing appended since (a sync asked for all the same)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except OSError as error:
            raise SyncError(f"wrote to {self.path} but cannot sync it: {error}") from error
        try:
            self._sync_through(fd, directory=directory)
        finally:
            self._close(fd)

    def _sync_through(self, fd: int, *, directory: bool) -> None:
        """The file synced through ``fd`` (and its directory, when an append created the
        file); :class:`SyncError` when it fails."""
        try:
            self._sync(fd)
            if directory:
                _sync_directory(self.path.parent)
        except OSError as error:
            raise SyncError(f"wrote to {self.path} but cannot sync it: {error}") from error

    def _open_and_append(self, lines: list[bytes], *, wait: bool) -> tuple[int, int]:
        """Open the file, append the lines whole under its ``flock``: the open descriptor
        and the file's size before them. Nothing of them is in the file when it raises
        (:class:`SinkError`; :class:`SinkBusy` when not ``wait`` and the lock is taken)."""
        line = b"".join(text + b"\n" for text in lines)
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
            except FileNotFoundError:  # no directory yet (the first record): made once, not per batch
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o640)
        except OSError as error:
            raise SinkError(f"cannot append to {self.path}: {error}") from error
        appended = False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as error:
                raise SinkBusy(f"{self.path} is locked by another writer") from error
            try:
                if self._torn is not None:
                    self._mend(fd)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # a torn line before us stays torn, alone
                try:
                    _append(fd, line, size)
                except _Torn as torn:  # held, as a write undone: its retry cuts the part first
                    self._torn = (torn.size, torn.end)
                    raise SinkError(f"cannot append to {self.path}: {torn}") from torn
                appended = True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.close(fd)
            if appended:  # the unlock failed: the lines are in the file, never to be written again
                raise SyncError(f"wrote to {self.path} but cannot unlock it: {error}") from error
            if isinstance(error, OSError):  # nothing of the batch is in the file: held and retried
                raise SinkError(f"cannot append to {self.path}: {error}") from error
            raise
        return fd, size

    def _mend(self, fd: int) -> None:
        """Cut off the part of a held batch a failed write left (``_torn``), under the lock,
        before its retry (or anything else) is appended. :class:`SinkError`, nothing
        appended, when the cut fails again, or when the file grew past that part meanwhile
        (another process appended after it: it stays, and this process appends no more, so
        the batch it holds is never in the file twice)."""
        assert self._torn is not None
        size, end = self._torn
        if os.fstat(fd).st_size != end:
            raise SinkError(
                f"{self.path} holds a part of a batch this process could not cut off, and lines"
                " appended after it: not appended to again (the batch is held)"
            )
        os.ftruncate(fd, size)  # an OSError: held again, as any failed append
        self._torn = None

    def _close(self, fd: int) -> None:
        """Close a descriptor the lines went through: they are in the file, so a failure to
        close (network file systems report a flushed write's error here) is a
        :class:`SyncError`: never written again."""
        try:
            os.close(fd)
        except OSError as error:
            raise SyncError(f"wrote to {self.path} but cannot close it: {error}") from error

    def _sync(self, fd: int) -> None:
        _datasync(fd)

    def lines(self) -> Iterator[tuple[int, str]]:
        """(line number from 1, text) of every non-empty line. Bytes that are not UTF-8 (a
        line cut inside a character) are read as U+FFFD: that line does not parse, or does
        not hash, and the lines after it are read all the same."""
        if not self.path.is_file():
            return
        with self.path.open(encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, start=1):
                if line.strip():
                    yield number, line

    def select(
        self, *, request_id: str | None, since: datetime | None, until: datetime | None
    ) -> Iterator[dict[str, Any]]:
        return self.scan()  # a file is read whole

    def scan(self) -> Iterator[dict[str, Any]]:
        for _, line in self.lines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record

    def head(self, writer: str) -> Head | None:
        last: dict[str, Any] | None = None
        for record in self.scan():
            if record.get("writer") == writer:
                last = record
        if last is None:
            return None
        return Head(writer, int(last["sequence"]) + 1, str(last["hash"]))


class EngineSink:
    """The same records as documents of an index (``govsearch-audit``), id
    ``<writer>:<sequence>``, refreshed on write so the audit API reads its own writes."""

    name = "engine"

    def __init__(self, engine: Engine, index: str) -> None:
        self.engine = engine
        self.index = index
        self._ready = False

    def describe(self) -> str:
        return f"{self.engine.url}/{self.index}"

    def _ensure(self) -> None:
        if not self._ready:
            self.engine.ensure_index(self.index, AUDIT_MAPPING)
            self._ready = True

    def write(self, record: dict[str, Any]) -> None:
        self.write_many([record])

    def write_many(
        self,
        records: list[dict[str, Any]],
        *,
        written: Callable[[], None] | None = None,
        lines: list[bytes] | None = None,
    ) -> None:
        """One bulk request, each record by its id ``<writer>:<sequence>`` (a retried batch
        overwrites itself), refreshed; any item refused fails the whole batch."""
        operations: list[dict[str, Any]] = []
        for record in records:
            key = f"{record['writer']}:{record['sequence']}"
            operations += [{"index": {"_index": self.index, "_id": key}}, record]
        try:
            self._ensure()
            result = self.engine.bulk(operations, refresh=True)
        except EngineError as error:
            raise SinkError(f"cannot index into {self.index}: {error}") from error
        if result.get("errors"):
            failed = [item for item in result.get("items", []) if item.get("index", {}).get("error")]
            reason = failed[0]["index"]["error"] if failed else "unknown"
            raise SinkError(f"cannot index into {self.index}: {len(failed)} record(s) refused: {reason}")
        if written is not None:  # the engine acknowledged the bulk: there is no later sync to wait for
            written()

    def scan(self) -> Iterator[dict[str, Any]]:
        """Every record, by writer then sequence (paged with ``search_after``)."""
        return self._paged({"match_all": {}})

    def select(
        self, *, request_id: str | None, since: datetime | None, until: datetime | None
    ) -> Iterator[dict[str, Any]]:
        """The matching records only, found by the engine (request id, time range)."""
        filters: list[dict[str, Any]] = []
        if request_id is not None:
            filters.append({"term": {"request_id": request_id}})
        # the engine keeps milliseconds: widen by one on each side, the recorder cuts exactly
        margin = timedelta(milliseconds=1)
        window = {
            bound: moment.astimezone(UTC).isoformat()
            for bound, moment in (
                ("gte", since - margin if since else None), ("lt", until + margin if until else None)
            )
            if moment is not None
        }
        if window:
            filters.append({"range": {"time": window}})
        return self._paged({"bool": {"filter": filters}} if filters else {"match_all": {}})

    def _paged(self, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if not self.engine.index_exists(self.index):
            return
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {
                "size": 1000,
                "query": query,
                "sort": [{"writer": "asc"}, {"sequence": "asc"}],
            }
            if after is not None:
                body["search_after"] = after
            hits = self.engine.search(self.index, body)["hits"]["hits"]
            for hit in hits:
                yield hit["_source"]
            if len(hits) < 1000:
                return
            after = hits[-1]["sort"]

    def head(self, writer: str) -> Head | None:
        if not self.engine.index_exists(self.index):
            return None
        body = {
            "size": 1,
            "query": {"term": {"writer": writer}},
            "sort": [{"sequence": "desc"}],
        }
        hits = self.engine.search(self.index, body)["hits"]["hits"]
        if not hits:
            return None
        last = hits[0]["_source"]
        return Head(writer, int(last["sequence"]) + 1, str(last["hash"]))
