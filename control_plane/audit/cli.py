"""``govsearch audit show REQUEST_ID | verify [--sink FILE | --engine [--index I]] | replay REQUEST_ID
[--version V]``. ``show`` and ``replay`` read the configured sink (``audit.sink``); ``verify``
reads the configured sink too, unless ``--sink`` or ``--engine`` says otherwise."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from control_plane.cli_support import CLOCK, EXIT_AUDIT_BROKEN, CliError, connect_engine, print_json
from control_plane.config import Settings


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


def cmd_verify(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.audit.sinks import EngineSink, JsonlSink
    from control_plane.audit.verify import verify_lines

    lines: Iterable[tuple[int, str]]
    if args.engine or (settings.audit.sink == "engine" and not args.sink):
        sink = EngineSink(connect_engine(settings), args.index or settings.audit.index)
        if not sink.engine.index_exists(sink.index):
            raise CliError(f"no audit index at {sink.describe()}")
        # documents in (writer, sequence) order, numbered from 1: the "line" of a break
        lines = ((n, json.dumps(r)) for n, r in enumerate(sink.scan(), start=1))
        where, unit = sink.describe(), "record"
    else:
        path = Path(args.sink or settings.audit.path)
        if not path.is_file():
            raise CliError(f"no audit log at {path}")
        lines, where, unit = JsonlSink(path).lines(), str(path), "line"
    report = verify_lines(lines)
    if args.json:
        print_json(report.as_json())
    elif report.broken is None:
        print(f"OK: {report.records} records in {where}")
        for writer, (sequence, digest) in sorted(report.heads.items()):
            print(f"  head {writer}: sequence {sequence} hash {digest}")
    else:
        b = report.broken
        where_broken = f"{unit} {b.line} (request {b.request_id}, writer {b.writer})"
        print(f"BROKEN at {where_broken}: {b.problem}: {b.detail}")
        print(f"  {report.records} records verified before it")
    return 0 if report.ok else EXIT_AUDIT_BROKEN


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
    verify = actions.add_parser("verify", help="check the hash chain; report the first broken record")
    verify.add_argument("--sink", help="a JSONL audit file (default: configuration)")
    verify.add_argument("--engine", action="store_true", help="verify the engine audit index instead")
    verify.add_argument("--index", help="audit index (default: configuration)")
    verify.add_argument("--json", action="store_true")
    verify.set_defaults(run=cmd_verify)
    replay = actions.add_parser("replay", help="re-run a recorded intent; diff the plans")
    replay.add_argument("request_id")
    replay.add_argument("--version", help="policy-set version to replay against (default: live)")
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(run=cmd_replay)
