"""``govsearch``: the command line. Parsing and printing only; the work lives in the stages."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from control_plane import local_engine
from control_plane.config import Settings, load_settings

Command = Callable[[argparse.Namespace, Settings], int]


class CliError(Exception):
    """A one-line reason, printed as ``govsearch: error: ...`` with exit code 1."""


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False))


# --- engine ---------------------------------------------------------------------


def _data_dir(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.data_dir or settings.engine.local.data_dir)


def cmd_engine_start(args: argparse.Namespace, settings: Settings) -> int:
    local = settings.engine.local
    try:
        state = local_engine.start(
            port=args.port or local.port,
            data_dir=_data_dir(args, settings),
            heap=args.heap or local.heap,
            timeout_s=args.timeout or local.start_timeout_s,
        )
    except local_engine.LocalEngineError as error:
        raise CliError(str(error)) from error
    print(state.url)
    return 0


def cmd_engine_status(args: argparse.Namespace, settings: Settings) -> int:
    state = local_engine.read_state(_data_dir(args, settings))
    url = args.url or (state.url if state else settings.engine.url)
    health = local_engine.probe(url)
    report = {"url": url, "up": health is not None, "status": (health or {}).get("status"),
              "pid": state.pid if state else None}
    if args.json:
        _print_json(report)
    else:
        print(f"{url}: {report['status'] if health else 'not answering'}")
    return 0 if health else 1


def cmd_engine_stop(args: argparse.Namespace, settings: Settings) -> int:
    state = local_engine.stop(_data_dir(args, settings))
    print(f"stopped pid {state.pid}" if state else "no local engine was running")
    return 0


# --- parser ---------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="govsearch",
        description="Deterministic policy control plane for Elasticsearch and OpenSearch.",
    )
    parser.add_argument("--config", help="configuration file (default: ./govsearch.yaml)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    engine = commands.add_parser("engine", help="manage the embedded local OpenSearch node")
    engine_commands = engine.add_subparsers(dest="engine_command", required=True, metavar="ACTION")
    start = engine_commands.add_parser("start", help="start the node in the background and wait until healthy")
    start.add_argument("--port", type=int, help="HTTP port (default 9200; transport uses port+100)")
    start.add_argument("--data-dir", help="where the node keeps data and logs (default .govsearch/engine)")
    start.add_argument("--heap", help="JVM heap, e.g. 512m (default)")
    start.add_argument("--timeout", type=float, help="seconds to wait for a healthy cluster (default 180)")
    start.set_defaults(run=cmd_engine_start)
    status = engine_commands.add_parser("status", help="exit 0 only when the engine answers")
    status.add_argument("--url", help="engine URL (default: the started node, else configuration)")
    status.add_argument("--data-dir")
    status.add_argument("--json", action="store_true", help="print a JSON report")
    status.set_defaults(run=cmd_engine_status)
    stop = engine_commands.add_parser("stop", help="stop the node that 'engine start' started")
    stop.add_argument("--data-dir")
    stop.set_defaults(run=cmd_engine_stop)

    for register in EXTENSIONS:
        register(commands)
    return parser


#: functions that add further commands (search, policy, audit, ...), in order
EXTENSIONS: list[Callable[[Any], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config)
        run: Command = args.run
        return run(args, settings)
    except CliError as error:
        print(f"govsearch: error: {error}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError) as error:
        print(f"govsearch: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
