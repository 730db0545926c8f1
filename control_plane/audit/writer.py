"""The background audit writer: one thread per log (decisions, events) per process.

A request builds its record (pure work, in its own thread) and hands it to the log's bounded
queue; the writer thread takes the queue in order, seals a batch into the chain (sequence,
``prev_hash``, hash, HMAC), writes the batch in one append and one fsync
(``Sink.write_many``), and wakes every request of the batch (group commit: many requests
share one fsync, each still waits for its own record to be durable before it is answered).
No request ever holds a lock across file or engine I/O.

- **Queue full**: ``append`` raises :class:`AuditBacklog` (the API answers 503
  ``audit_backlog``) instead of dropping a record; the refusal is counted
  (``govsearch_audit_backlog_refusals``). No writer thread to be had: :class:`AuditUnavailable`
  (503 ``audit_unavailable``), the record not queued, counted the same way.
- **A sink that fails**: the batch stays at the head of the queue, in order, and is retried
  (on the next record, on ``/readyz`` and at shutdown); the
  requests waiting on it are answered, their records held in memory, as before the writer
  existed: ``/readyz`` fails while anything is held, and once the queue is full requests are
  refused. Nothing is given up.
- **Measured**: each batch written whole, its size (``govsearch_audit_batch_records``) and the
  sink's time to write and sync it (``govsearch_audit_batch_seconds``), per log.
- **Checkpoints**: after a batch when due (every N records or T seconds), when idle and due,
  and on ``close`` (shutdown), which first drains the queue.

Commit levels (``audit.commit``, ADR 0034): ``group`` (the default) answers once the batch
holding the record is synced to disk (it survives a power loss); ``written`` once the batch is
written to the file (``write`` returned: it is in the kernel and survives a killed process),
the sync following right after in the writer; ``queued`` as soon as the record is queued (the
bench compares it; a crash can then lose records of answered requests).

At ``written``, with a sink that can append without syncing (the JSONL file), a request on
the event loop writes its own sealed line when nothing is queued before it and nobody holds
the file (ADR 0050): the writer thread is left the sync alone, so the request neither waits
for the writer nor is woken by it. Anything else (a record queued or held before it, the
writer busy writing, the file locked by another process, a write that fails) goes through
the queue as before. A checkpoint never names a record whose sync has not returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import threading
import time as monotonic_time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from control_plane.audit.chain import Chain, Head
from control_plane.audit.checkpoints import CheckpointStore, seal_checkpoint
from control_plane.audit.keys import AuditKeyError, KeyRing
from control_plane.audit.metrics import Metrics
from control_plane.audit.sinks import Sink, SinkError, SyncError, write_all
from control_plane.engine import EngineError
from control_plane.times import Clock, iso, parse_time

log = logging.getLogger("govsearch.audit")

Commit = Literal["group", "written", "queued"]

RETRY_CHECKPOINT_S = 5.0
"""how long a failed checkpoint waits before the next interval try (shutdown always tries)"""
WAIT_S = 1.0
"""how often a waiting request (or ``retry``) looks again whether the writer is still alive"""
RESTARTS = 8
"""how many times ``close`` starts a writer again for records that came in as it stopped"""


class AuditBacklog(Exception):
    """The log's queue is full: the request's record cannot be taken, so the request is
    refused (503 ``audit_backlog``) rather than served without one."""

    code = "audit_backlog"


class AuditUnavailable(AuditBacklog):
    """No writer thread can be started (the process is at its thread limit): the record is
    not queued, so the request is refused (503 ``audit_unavailable``) rather than answered
    with an error while a record saying it was served waits for a writer."""

    code = "audit_unavailable"


@dataclass(frozen=True)
class Checkpointing:
    """Where and how often a log checkpoints its writer's head."""

    store: CheckpointStore
    every_records: int = 100
    every_s: float = 60.0
    clock: Clock | None = None
    """the checkpoint's ``time`` (None: no time field)"""
    monotonic: Callable[[], float] = monotonic_time.monotonic


class _Ticket:
    """One queued record and what became of it."""

    __slots__ = ("record", "sealed", "tried", "waiter")

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = record
        self.sealed: dict[str, Any] | None = None
        self.tried = False
        """the writer tried it at least once (written: ``sealed`` is set; else held)"""
        self.waiter: asyncio.Future[None] | None = None
        """set by :meth:`ChainedLog.append_async`: settled (from the writer thread, through
        its loop) once ``tried``"""

    def settle(self, wakes: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]]) -> None:
        """Mark it tried (with ``_state`` held); an awaiting request's future joins ``wakes``
        (by loop: the writer wakes each loop once for the whole batch, :func:`send_wakes`)."""
        self.tried = True
        waiter = self.waiter
        if waiter is not None:
            wakes.setdefault(waiter.get_loop(), []).append(waiter)


def send_wakes(wakes: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]]) -> None:
    """One ``call_soon_threadsafe`` per loop for every future of a batch: one write to the
    loop's self-pipe and one callback, not one of each per record."""
    for loop, waiters in wakes.items():
        with contextlib.suppress(RuntimeError):  # its loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_wake, waiters)
    wakes.clear()


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


class ChainedLog:
    """One sink, one writer's chain, its queue, its writer thread (and its checkpoints)."""

    def __init__(
        self,
        sink: Sink,
        writer: str,
        metrics: Metrics,
        capacity: int,
        *,
        name: str = "decisions",
        keys: Callable[[], KeyRing | None] = lambda: None,
        checkpointing: Checkpointing | None = None,
        fresh: bool = False,
        batch: int = 256,
        commit: Commit = "group",
    ) -> None:
        self.sink = sink
        self.writer = writer
        self.metrics = metrics
        self.name = name
        """the log's name in its checkpoints (``decisions`` or ``events``)"""
        self._batch_records = metrics.batch_records.labels(name)
        self._batch_seconds = metrics.batch_seconds.labels(name)
        """a batch written whole (and synced at ``group``): its size and the sink's time"""
        self._keys = keys
        self._checkpointing = checkpointing
        self._fresh = fresh
        """a writer id made for this process: its chain starts at 0, no need to look it up"""
        self._capacity = capacity
        self._batch = batch
        self._commit = commit
        self._chain: Chain | None = None
        self._queue: deque[_Ticket] = deque()
        """records not written yet, oldest first; only the writer thread removes from it"""
        lock = threading.RLock()
        self._state = threading.Condition(lock)
        """guards the queue, the thread handle and the attempt counter (never held over I/O);
        waited on by requests (``append``) and ``retry``, notified when the writer tried a batch"""
        self._work = threading.Condition(lock)
        """the same lock; waited on by the writer thread alone, notified when there is work
        (a record, ``retry``, ``close``): a record queued wakes the writer, not every request
        waiting for its own batch"""
        self._wakes: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        """the awaiting requests of the batch just answered, woken (:func:`send_wakes`) when
        the writer is about to block (its next sync, or its wait for work), or before a
        checkpoint: the loop then wakes as the writer lets go of the interpreter, not while it
        still holds it"""
        self._io = threading.Lock()
        """held by whoever seals and writes (the writer thread; ``close`` after it stopped; a
        request on the loop writing its own record, which never waits for it)"""
        self._direct = commit == "written" and all(
            callable(getattr(sink, name, None)) for name in ("append_lines", "sync_appended")
        )
        """``written`` on a sink that appends and syncs apart: requests on the loop write their
        own record, batches sync after ``_io`` is let go (ADR 0050)"""
        self._unsynced = 0
        """records appended but not synced yet (direct mode; under ``_state``)"""
        self._syncing = False
        """the writer is syncing them (direct mode; under ``_state``)"""
        self._synced: Head | None = None
        """what a checkpoint names: the head as of the last sync that returned, as long as no
        sync failed (then it stays where it was until the process restarts: a later sync that
        succeeds does not say the earlier lines reached the disk)"""
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._attempts = 0
        self._kick = False
        self.last_error: str | None = None
        self.sync_error: str | None = None
        """a batch was written but its sync failed (its lines are in the file, its requests
        answered). Kept until the process restarts: after a failed ``fsync`` the kernel may
        have dropped those pages, and a later sync that succeeds does not bring them back
        (``audit verify`` against the checkpoints tells whether they reached the disk)"""
        self.refused = 0
        self.checkpoint_error: str | None = None
        self._checkpointed: tuple[tuple[int, str], str] | None = None
        """the head last checkpointed, and why"""
        self._since_checkpoint = 0
        self._checkpoint_at = checkpointing.monotonic() if checkpointing else 0.0
        self._checkpoint_retry_at = 0.0
        """after a failed checkpoint, no interval checkpoint is tried before this instant"""

    # --- the request side ---------------------------------------------------------

    def admit(self) -> None:
        """Raise :class:`AuditBacklog` now if a record would not be taken (a request checks
        before it does any work)."""
        with self._state:
            if len(self._queue) >= self._capacity:
                self._refuse()

    def _refuse(self) -> None:
        raise self._refused(AuditBacklog(
            f"the audit {self.name} queue is full ({self._capacity} records not yet written to"
            f" {self.sink.describe()}); the request is refused rather than served without a record"
        ))

    def _refused(self, error: AuditBacklog) -> AuditBacklog:
        """``error``, counted as a refusal (a record not taken: the queue full, no writer)."""
        self.refused += 1
        self.metrics.backlog_refusals.labels(self.name).inc()
        return error

    def append(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Queue ``record`` behind any earlier ones and (group commit) wait until the writer
        tried it: the sealed record once it is durably written, None when it is held
        because the sink failed (or with ``commit="queued"``). :class:`AuditBacklog` when
        the queue is full."""
        ticket = _Ticket(record)
        with self._state:
            if not self._enqueue(ticket):
                return None
            while not ticket.tried:
                if not self._state.wait(timeout=WAIT_S) and not self._running():
                    self._start()  # a writer that died (a bug) must not leave requests waiting
        return ticket.sealed

    async def append_async(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`append` from the event loop: queued the same way, the wait awaited (the
        loop serves other requests meanwhile; ``_state`` is only ever held briefly, never
        across I/O). The writer settles the ticket's future through the loop; a watchdog
        looks every ``WAIT_S`` whether the writer is still alive, as ``append`` does."""
        if self._direct:
            sealed = self._write_now(record)
            if sealed is not None:
                return sealed
        ticket = _Ticket(record)
        loop = asyncio.get_running_loop()
        ticket.waiter = waiter = loop.create_future()
        with self._state:
            if not self._enqueue(ticket):
                return None
        if ticket.tried:
            return ticket.sealed
        watchdog = loop.call_later(WAIT_S, self._watch, ticket, loop)
        try:
            await waiter
        finally:
            watchdog.cancel()
        return ticket.sealed

    def _write_now(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """Seal ``record`` and append its line from the caller's thread (``written``, direct
        mode): the sealed record once it is in the file, None (nothing written, nothing
        sealed for good) when it must go through the queue instead: ``_io`` taken (the
        writer is writing or checkpointing), anything queued or held before it, a chain not
        read yet, the file's lock held by another process, a write that failed (the writer
        then tries it and holds it as it holds any batch). Never waits for a lock held over
        I/O; the sync is the writer's."""
        if not self._io.acquire(blocking=False):
            return None
        try:
            with self._state:
                if self._queue or self.last_error is not None or self._stopping or self._chain is None:
                    return None
            chain = self._chain
            try:
                sealed, line = chain.seal_line(record)
            except Exception:  # a bug: the writer tries it and holds it, as it always did
                return None
            started = monotonic_time.monotonic()
            failure: SyncError | None = None
            try:
                self.sink.append_lines([line], wait=False)  # type: ignore[attr-defined]
            except SyncError as error:  # in the file, its close failed: never written again
                failure = error
            except SinkError:
                return None  # nothing in the file: queued, tried and held by the writer
            chain.advance(sealed)  # first: the line is in the file, its sequence is taken
            self._since_checkpoint += 1
            if failure is not None:
                self._written_with(failure)
            self._batch_seconds.observe(monotonic_time.monotonic() - started)
            self._batch_records.observe(1)
            with self._state:
                self._unsynced += 1
                try:
                    self._start()
                except RuntimeError:  # in the file, as ``written`` promises: synced by the next
                    log.warning("audit %s writer cannot start: a written record waits for its sync",
                                self.name)  # writer that starts (a record, or shutdown)
                self._work.notify()
            return sealed
        finally:
            self._io.release()

    def _written_with(self, error: Exception) -> None:
        """Lines went into the file and then something failed (a sync, a close): reported
        until the process restarts, never written again."""
        self.metrics.sink_failures.labels(self.sink.name).inc()
        self.sync_error = str(error)
        log.warning("audit sink %s failed to sync written record(s): %s", self.sink.describe(), error)

    def _sync_appended(self) -> None:
        """Direct mode, on the writer thread: sync what was appended, outside ``_io`` (the
        loop goes on writing meanwhile), then checkpoint if due, at the head as of the sync."""
        with self._state:  # not ``_io``: the head only moves once its line is in the file
            if not self._unsynced or self._chain is None:
                return
            self._unsynced = 0
            self._syncing = True
            head = self._chain.head
        try:
            try:
                self.sink.sync_appended()  # type: ignore[attr-defined]
                synced = True
            except (SinkError, OSError) as error:
                self._written_with(error)
                synced = False
            with self._io:  # a write before ``head`` whose close failed has said so by now
                if synced:
                    self._vouch(head)
                self._checkpoint_if_due()
        finally:  # quiesce() returns once the sync and its checkpoint are done
            with self._state:
                self._syncing = False
                self._state.notify_all()

    def _watch(self, ticket: _Ticket, loop: asyncio.AbstractEventLoop) -> None:
        """On the loop, every ``WAIT_S`` while ``ticket`` waits: a dead writer is restarted (a
        bug must not leave requests waiting), and the watch goes on until it was tried."""
        waiter = ticket.waiter
        if waiter is None or waiter.done():
            return
        with self._state:
            if ticket.tried:
                return
            if not self._running():
                self._start()
        loop.call_later(WAIT_S, self._watch, ticket, loop)

    def append_nowait(self, record: dict[str, Any]) -> None:
        """Queue ``record`` without waiting for the writer (the record of a request being
        cancelled: it is written all the same). :class:`AuditBacklog` when the queue is full."""
        with self._state:
            self._enqueue(_Ticket(record))

    def _enqueue(self, ticket: _Ticket) -> bool:
        """Queue ``ticket`` (``_state`` held) and kick the writer; False when the request
        is not to wait (``commit="queued"``). :class:`AuditBacklog` when the queue is full."""
        if len(self._queue) >= self._capacity:
            self._refuse()
        self._start_or_refuse()  # first: a record is never queued for a writer that cannot run
        self._queue.append(ticket)
        self.metrics.buffered.set(len(self._queue))
        self._kick = True
        self._work.notify()
        return self._commit != "queued"

    def _start_or_refuse(self) -> None:
        """:meth:`_start`, or :class:`AuditUnavailable` when no thread can be had."""
        try:
            self._start()
        except RuntimeError as error:  # threading's "can't start new thread"
            raise self._refused(AuditUnavailable(
                f"the audit {self.name} writer cannot start ({error}); the request is refused"
                " rather than served without a record"
            )) from error

    def full(self) -> bool:
        with self._state:
            return len(self._queue) >= self._capacity

    def retry(self) -> None:
        """After a sink failure, have the writer try whatever is held now, and wait for
        that try (a healthy writer is left alone)."""
        with self._state:
            if not self._queue or self.last_error is None:
                return
            self._start()
            attempts = self._attempts
            self._kick = True
            self._work.notify()
            while self._queue and self._attempts == attempts and self._running():
                self._state.wait(timeout=WAIT_S)

    def close(self, reason: str = "shutdown") -> None:
        """Drain the queue (stops at a failing sink: those records stay held), stop the
        writer thread, and checkpoint the head. A record queued, or appended by its request,
        as the writer stopped (its thread past its last look but not ended, so none was
        started for it) is written and synced by a writer started again (a few times at most:
        a writer that keeps ending with records queued is a bug, not a reason to hang)."""
        restarts = 0
        while True:
            with self._state:
                thread = self._thread
                self._stopping = True
                self._work.notify()
            if thread is not None:
                thread.join()
            with self._state:
                if self._thread is not thread and self._running():
                    continue  # a record queued meanwhile started another: stopped in turn
                self._thread = None
                if ((self._queue and self.last_error is None) or self._unsynced) and restarts < RESTARTS:
                    restarts += 1
                    self._start()  # came in as it stopped: drained (and synced) by a new one
                    continue
                self._stopping = False
                break
        self.checkpoint(reason)

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start(self) -> None:
        """Start the writer thread (under ``_state``) if it is not running. ``RuntimeError``
        when no thread can be had (the one that would not start is not kept)."""
        if not self._running():
            thread = threading.Thread(target=self._run, name=f"govsearch-audit-{self.name}", daemon=True)
            thread.start()
            self._thread = thread

    # --- the writer thread ----------------------------------------------------------

    def _run(self) -> None:
        try:
            self._serve()
        finally:  # stopped (or a bug): whoever the last batch answered is woken all the same
            send_wakes(self._wakes)

    def _serve(self) -> None:
        while True:
            with self._state:
                work = self._kick or self._stopping or bool(self._queue and self.last_error is None)
                if not work and not self._unsynced:  # idle, or held by a failing sink: a record,
                    send_wakes(self._wakes)  # retry() or close kicks; the last batch's requests,
                    self._work.wait(timeout=self._idle_wait())  # as the writer sleeps (an interval
                    work = self._kick or self._stopping or bool(self._queue and self.last_error is None)
                self._kick = False  # checkpoint may be due)
                batch = list(itertools.islice(self._queue, self._batch)) if work else []
                stopping = self._stopping
                unsynced = self._unsynced
            send_wakes(self._wakes)  # before the next batch is sealed
            if batch:
                written = self._write(batch)
                if self._direct:
                    self._sync_appended()
                if not written and stopping:
                    return  # shutdown with a failing sink: the rest stays held
            elif unsynced:
                self._sync_appended()
            else:
                with self._io:
                    self._checkpoint_if_due()
                if stopping and not self._unsynced:  # a request's own write (counted under
                    return  # ``_io``) that came in as the writer stopped is synced first

    def _idle_wait(self) -> float | None:
        cp = self._checkpointing
        if cp is None or not self._since_checkpoint or not self._news():
            return None
        return max(0.05, min(cp.every_s, RETRY_CHECKPOINT_S))

    def _write(self, batch: list[_Ticket]) -> bool:
        """Seal ``batch`` after the head, write it in one go; True when it was written.

        Its requests are answered as soon as the commit level allows (``group``: once the
        sink synced the batch; ``written``: once it is written, before the sync), and only
        then is a checkpoint that fell due written, so no request waits for a checkpoint."""
        sealed: list[dict[str, Any]] = []
        error: Exception | None = None
        answered = False
        chain: Chain | None = None

        def answer() -> None:  # the batch is in the sink: the head moves, its requests are woken
            nonlocal answered
            if answered:
                return
            assert self._chain is not None and chain is not None
            self._chain.head = chain.head
            self._answer(batch, sealed)
            answered = True
            if self._commit == "written":
                send_wakes(self._wakes)  # the sync follows: the loop wakes as it starts

        with self._io:
            try:
                if self._chain is None:
                    head = None if self._fresh else self.sink.head(self.writer)
                    self._chain = Chain(head or Head(self.writer), self._keys())
                    self._synced = self._taken_over(head)
                chain = Chain(self._chain.head, self._chain.keys)
                lines: list[bytes] = []
                for ticket in batch:
                    record, line = chain.seal_line(ticket.record)
                    chain.advance(record)
                    sealed.append(record)
                    lines.append(line)
                written = answer if self._commit == "written" else None  # before the sync
                started = monotonic_time.monotonic()
                if self._direct:  # the sync follows outside ``_io`` (``_sync_appended``)
                    self.sink.append_lines(lines)  # type: ignore[attr-defined]
                    with self._state:
                        self._unsynced += len(lines)
                    answer()
                else:
                    write_all(self.sink, sealed, written, lines)
                self._batch_seconds.observe(monotonic_time.monotonic() - started)
                self._batch_records.observe(len(sealed))
                self._since_checkpoint += len(sealed)
                self.last_error = None  # (a failed sync stays reported: ``sync_error``)
            except (SinkError, EngineError, OSError, AuditKeyError) as failure:
                error = failure
            except Exception as failure:  # a bug: held and reported like a sink failure, never fatal
                log.exception("audit writer failed on a batch of %d record(s)", len(batch))
                error = failure
            # written, the sync failed: the lines are in the file and are never written again
            # (their sequences would repeat); reported until the process restarts
            in_file = error is not None and (answered or isinstance(error, SyncError))
            if error is not None:
                self.metrics.sink_failures.labels(self.sink.name).inc()
                if in_file:
                    answer()  # ``group``: answered as a held record would be, never re-sent
                    if self._direct:  # in the file: synced with the next lines all the same
                        with self._state:
                            self._unsynced += len(sealed)
                    self._since_checkpoint += len(sealed)
                    self.last_error = None  # the write went through: what is held drains on
                    self.sync_error = str(error)
                else:
                    self.last_error = str(error)
                    self._hold()
            else:
                answer()
                if not self._direct and chain is not None:  # synced (direct: ``_sync_appended``)
                    self._vouch(chain.head)
            if not self._direct and self._checkpoint_due():  # direct: after the sync
                send_wakes(self._wakes)  # no request waits for a checkpoint's sync
                self._checkpoint("interval")
        if error is not None:
            send_wakes(self._wakes)  # a batch answered on a failure: woken before the logging
            held = self.buffered_total()
            if in_file:
                log.warning("audit sink %s failed to sync %d written record(s): %s",
                            self.sink.describe(), len(sealed), error)
            else:
                log.warning("audit sink %s failed, %d record(s) held: %s", self.sink.describe(), held, error)
        return error is None or in_file

    def _answer(self, batch: list[_Ticket], sealed: list[dict[str, Any]]) -> None:
        """The batch is written (and synced, unless the commit level is ``written``): off the
        queue, its requests woken."""
        with self._state:
            for ticket, record in zip(batch, sealed, strict=True):
                self._queue.popleft()
                ticket.sealed = record
                ticket.settle(self._wakes)
            self._attempts += 1
            self.metrics.buffered.set(len(self._queue))
            self._state.notify_all()

    def _hold(self) -> None:
        """The batch failed: everyone waiting is answered, their records held, in order."""
        with self._state:
            for ticket in self._queue:
                ticket.settle(self._wakes)
            self._attempts += 1
            self.metrics.buffered.set(len(self._queue))
            self._state.notify_all()

    # --- checkpoints ----------------------------------------------------------------

    def _taken_over(self, head: Head | None) -> Head | None:
        """What a checkpoint may name of the chain this writer read from its sink (``head``;
        None: a chain of its own): that head, once the file is synced (a process killed before
        its sync left its last lines in the page cache only); nothing of it when that sync
        fails (reported as any failed sync). Under ``_io``."""
        if head is None:
            return Head(self.writer)
        sync = getattr(self.sink, "sync_appended", None)
        if sync is not None:
            try:
                sync()
            except (SinkError, OSError) as error:
                self._written_with(error)
                return None
        return head

    def _vouch(self, head: Head) -> None:
        """``head``'s lines were synced: a checkpoint may name it, unless a sync failed before
        (``sync_error``: the lines of that sync are not known to be on the disk, and every
        head after them counts them). Under ``_io``."""
        if self.sync_error is None:
            self._synced = head

    def _vouched(self) -> tuple[int, str] | None:
        """What a checkpoint would name now: the (sequence, hash) of ``_synced``'s last record;
        None before there is one."""
        at = self._synced
        return None if at is None or at.sequence == 0 else (at.sequence - 1, at.prev_hash)

    def _news(self) -> bool:
        """A checkpoint would name a head no checkpoint named yet (not so once a failed sync
        holds ``_synced`` back: the writer then has no checkpoint to wait for)."""
        head, last = self._vouched(), self._checkpointed
        return head is not None and (last is None or last[0] != head)

    def _checkpoint_if_due(self) -> None:
        if self._checkpoint_due():
            self._checkpoint("interval")

    def _checkpoint_due(self) -> bool:
        cp = self._checkpointing
        if cp is None or not self._since_checkpoint or not self._news():
            return False
        moment = cp.monotonic()
        if moment < self._checkpoint_retry_at:  # a failing store is not retried on every record
            return False
        return self._since_checkpoint >= cp.every_records or moment - self._checkpoint_at >= cp.every_s

    def _checkpoint(self, reason: str) -> None:
        """Write the head (last sequence and hash) to the checkpoint store, unless it is
        already there: a ``shutdown`` checkpoint is written even when an interval one holds
        the same head (it says the writer stopped cleanly), never twice. A failure is logged
        and reported by ``status``, never raised."""
        cp = self._checkpointing
        head = self._vouched()
        if cp is None or self._chain is None or head is None:
            return
        last = self._checkpointed
        if last is not None and last[0] == head and (reason != "shutdown" or last[1] == "shutdown"):
            return
        checkpoint: dict[str, Any] = {
            "kind": "checkpoint",
            "log": self.name,
            "writer": self.writer,
            "sequence": head[0],
            "hash": head[1],
            "reason": reason,
        }
        if cp.clock is not None:
            checkpoint["time"] = iso(cp.clock())
        try:
            cp.store.write(seal_checkpoint(checkpoint, self._chain.keys))
        except (SinkError, EngineError, OSError) as error:
            self.checkpoint_error = f"checkpoints to {cp.store.describe()} failing: {error}"
            log.warning("audit %s", self.checkpoint_error)
            self._checkpoint_retry_at = cp.monotonic() + min(cp.every_s, RETRY_CHECKPOINT_S)
            return
        self.checkpoint_error = None
        self._checkpointed = (head, reason)
        self._since_checkpoint = self._chain.head.sequence - (head[0] + 1)  # direct: appended since
        self._checkpoint_at = cp.monotonic()

    def checkpoint(self, reason: str = "interval", *, due_only: bool = False) -> None:
        """Checkpoint the head now (``due_only``: if due, and only if the writer is not busy
        writing: it checkpoints after its batch itself, and ``/readyz`` must not wait on a disk)."""
        if not self._io.acquire(blocking=not due_only):
            return
        try:
            if due_only:
                self._checkpoint_if_due()
            else:
                self._checkpoint(reason)
        finally:
            self._io.release()

    def quiesce(self) -> None:
        """Return once the writer is done with the batch it is on, its sync and any checkpoint
        it fell due for included (a request is answered before those); in direct mode, once
        what was appended is synced too."""
        with self._io:
            pass
        with self._state:
            while (self._unsynced or self._syncing) and self._running():
                self._state.wait(timeout=WAIT_S)
        with self._io:
            pass

    # --- reading --------------------------------------------------------------------

    def buffered_total(self) -> int:
        """Records not written yet (queued, or held by a failing sink)."""
        with self._state:
            return len(self._queue)

    def pending(self) -> list[dict[str, Any]]:
        with self._state:
            return [ticket.record for ticket in self._queue]

    def scan(self) -> Iterator[dict[str, Any]]:
        """Written records, then queued ones (not yet sealed)."""
        yield from self.sink.scan()
        yield from self.pending()

    def select(
        self, request_id: str | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> Iterator[dict[str, Any]]:
        """The records with ``request_id`` (when given) and ``time`` in ``[since, until)``,
        written then queued; the sink narrows the read where it can."""
        written = self.sink.select(request_id=request_id, since=since, until=until)
        for record in itertools.chain(written, self.pending()):
            if (request_id is None or record.get("request_id") == request_id) and _within(
                record.get("time"), since, until
            ):
                yield record


def _within(value: Any, since: datetime | None, until: datetime | None) -> bool:
    if since is None and until is None:
        return True
    if not isinstance(value, str):
        return False
    moment = parse_time(value)
    return (since is None or moment >= since) and (until is None or moment < until)
