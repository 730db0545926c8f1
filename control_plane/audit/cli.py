"""``govsearch audit show REQUEST_ID | verify [--sink FILE | --engine [--index I]] [--log L]
[--key-file F ...] [--no-key] [--checkpoints F] | replay REQUEST_ID [--version V]``. ``show`` and
``replay`` read the configured sink (``audit.sink``); ``verify`` reads the configured sink too,
unless ``--sink`` or ``--engine`` says otherwise, with the configured key ring and checkpoints.
``verify`` exits 0 (all vouched for), 5 (broken), 7 (unvouched: no key, no checkpoints, a
writer without one) or 1 (no log, unusable key): docs/cli.md."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from control_plane.cli_support import (
    CLOCK,
    EXIT_AUDIT_BROKEN,
    EXIT_AUDIT_INCOMPLETE,
    EXIT_OK,
    CliError,
    connect_engine,
    print_json,
)
from control_plane.config import Settings

if TYPE_CHECKING:
    from control_plane.audit.verify import Report


def _recorder(settings: Settings) -> Any:
    from control_plane.audit.recorder import Recorder

    engine = connect_engine(settings) if settings.audit.sink == "engine" else None
    return Recorder.from_settings(settings, engine, clock=CLOCK)


def _find(settings: Settings, request_id: str) -> dict[str, Any]:

    record: dict[str, Any] | None = _recorder(settings).find(request_id)
    if record is None:
        raise CliError(f"no decision is recorded for request {request_id!r}")
    return record


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    print_json(_find(settings, args.request_id))
    return 0


def _verify_keys(args: argparse.Namespace, settings: Settings) -> Any:
    """The key ring to check MACs with: ``--key-file`` files, else the configured ring
    (``audit.key_file`` when it exists, ``audit.key``); None with ``--no-key`` or no key."""
    from control_plane.audit.keys import AuditKeyError, KeyRing, load_key_ring, read_key_file

    try:
        if args.no_key:
            return None
        if args.key_file:
            ring = KeyRing()
            for file in args.key_file:
                ring = ring.merged(read_key_file(file))
            return ring
        audit = settings.audit
        if not Path(audit.key_file).is_file() and not audit.key:
            return None
        return load_key_ring(audit.key_file, audit.key, generate=False)
    except AuditKeyError as error:
        raise CliError(str(error)) from error


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.audit.checkpoints import CheckpointStore, FileCheckpoints, checkpoint_store
    from control_plane.audit.sinks import EngineSink, JsonlSink
    from control_plane.audit.verify import verify_lines

    keys = _verify_keys(args, settings)
    lines: Iterable[tuple[int, str]]
    store: CheckpointStore
    events = args.log == "events"
    if args.engine or (settings.audit.sink == "engine" and not args.sink):
        engine = connect_engine(settings)
        index = args.index or settings.audit.index
        sink = EngineSink(engine, index + "-events" if events and not args.index else index)
        if not sink.engine.index_exists(sink.index):
            raise CliError(f"no audit index at {sink.describe()}")
        # documents in (writer, sequence) order, numbered from 1: the "line" of a break
        lines = ((n, json.dumps(r)) for n, r in enumerate(sink.scan(), start=1))
        where, unit = sink.describe(), "record"
        engine_audit = settings.audit.model_copy(update={"sink": "engine", "index": index})
        store = checkpoint_store(engine_audit, engine)
    else:
        configured = Path(settings.audit.path)
        default = configured.with_name("events.jsonl") if events else configured
        path = Path(args.sink) if args.sink else default
        if not path.is_file():
            raise CliError(f"no audit log at {path}")
        lines, where, unit = JsonlSink(path).lines(), str(path), "line"
        store = (
            FileCheckpoints(settings.audit.checkpoint_path)
            if settings.audit.checkpoint_path
            else FileCheckpoints(path.with_name("checkpoints.jsonl"))
        )
    if args.checkpoints:
        store = FileCheckpoints(args.checkpoints)
    checkpoints = list(store.scan()) if store.exists() else None
    report = verify_lines(lines, keys=keys, checkpoints=checkpoints, log=args.log)
    if args.json:
        print_json({**report.as_json(), "log": where, "checkpoint_store": store.describe()})
        return _exit_status(report)
    if report.broken is None:
        print(f"OK: {report.records} records in {where}")
    else:
        for b in report.problems[:20]:
            if b.line is None:
                print(f"BROKEN: {b.problem}: {b.detail}")
            else:
                print(f"BROKEN at {unit} {b.line} (request {b.request_id}, writer {b.writer}): "
                      f"{b.problem}: {b.detail}")
        print(f"  {report.records} records verified before it")
    if keys is None:
        print("  MACs NOT checked (no key): a forged or re-chained record cannot be told apart")
    else:
        print(f"  MACs checked with key(s) {', '.join(sorted(keys.keys))}")
    if checkpoints is None:
        print(f"  no checkpoints at {store.describe()}: a cut tail cannot be found")
    else:
        print(f"  checkpoints: {store.describe()}")
    for writer, seen in sorted(report.writers.items()):
        span = f"seq {seen.first}..{seen.last}" if seen.records else "no records"
        if seen.checkpoint_status == "ok":
            anchor = f"checkpoint at seq {seen.checkpoint} ({seen.checkpoint_reason}) ok"
            if seen.after_checkpoint:
                anchor += f", {seen.after_checkpoint} record(s) after it"
        elif seen.checkpoint_status == "missing":
            anchor = "NO CHECKPOINT"
        elif seen.checkpoint_status == "unchecked":
            anchor = "checkpoint not checked"
        else:
            anchor = f"checkpoint at seq {seen.checkpoint}: {seen.checkpoint_status.upper()}"
        print(f"  writer {writer}: {seen.records} records, {span}, {anchor}")
    for writer, (sequence, digest) in sorted(report.heads.items()):
        print(f"  head {writer}: sequence {sequence} hash {digest}")
    if report.torn:
        cut = ", ".join(map(str, report.torn))
        print(f"  TORN: line(s) {cut}: a record cut short (a writer killed mid-write), not a record")
    if report.ok and not report.complete:
        print("INCOMPLETE: no break found, but not everything is vouched for (exit status 7)")
    return _exit_status(report)


def cmd_replay(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.audit.replay import ReplayRefused, replay
    from control_plane.cli import _service

    record = _find(settings, args.request_id)
    args.policies = None
    service = _service(args, settings)
    try:
        result = replay(service, record, args.version)
    except ReplayRefused as refused:
        raise CliError(f"{refused.code}: {refused}") from refused
    finally:
        service.close()
    if args.json:
        print_json(result)
        return 0
    print(
        f"original {result['original']['policy_set_version'][:12]}"
        f" (reproduced: {result['original']['reproduced']})"
        f" -> replayed {result['replayed']['policy_set_version'][:12]}"
    )
    if result["identical"]:
        print("  identical plans")
    for change in result["diff"]:
        print(f"  {change['field']}: {json.dumps(change['before'])} -> {json.dumps(change['after'])}")
    return 0


def add_audit_commands(commands: Any) -> None:
    audit = commands.add_parser("audit", help="decision records: show, verify the chain, replay")
    actions = audit.add_subparsers(dest="audit_command", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="print the decision record of a request")
    show.add_argument("request_id")
    show.set_defaults(run=cmd_show)
    verify = actions.add_parser(
        "verify",
        help="check the chain, the MACs and the checkpoints; list the writers",
        description="Exit codes: 0 every record verified with the key and every writer matches a"
        " checkpoint; 5 broken (tampered, truncated); 7 no break found but not everything"
        " vouched for (no key, no checkpoints, a writer without one, or a torn line: a record cut"
        " short); 1 no log or unusable key.",
    )
    verify.add_argument("--sink", help="a JSONL audit file (default: configuration)")
    verify.add_argument("--engine", action="store_true", help="verify the engine audit index instead")
    verify.add_argument("--index", help="audit index (default: configuration)")
    verify.add_argument("--log", choices=["decisions", "events"], default="decisions",
                        help="which log: decision records (default) or outcome events")
    verify.add_argument("--key-file", action="append", metavar="FILE",
                        help="a key ring file (KEY_ID:SECRET lines); repeatable"
                        " (default: audit.key_file and audit.key)")
    verify.add_argument("--no-key", action="store_true",
                        help="do not check MACs (what anyone without the key can still check)")
    verify.add_argument("--checkpoints", metavar="FILE",
                        help="a checkpoint file (default: audit.checkpoint_path, checkpoints.jsonl"
                        " beside the log, or the <index>-checkpoints index)")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=cmd_verify)
    replay = actions.add_parser("replay", help="re-run a recorded intent; diff the plans")
    replay.add_argument("request_id")
    replay.add_argument("--version", help="policy-set version to replay against (default: live)")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(run=cmd_replay)


def _exit_status(report: Report) -> int:
    """0 when every record is vouched for, 5 on a break, 7 when nothing broke but something
    could not be vouched for (no key, no checkpoints, a writer without one, a torn line)."""
    if not report.ok:
        return EXIT_AUDIT_BROKEN
    return EXIT_OK if report.complete else EXIT_AUDIT_INCOMPLETE
