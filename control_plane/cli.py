"""``govsearch``: the command line. Parsing and printing only; the work lives in the stages."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from control_plane import local_engine
from control_plane.audit.cli import add_audit_commands
from control_plane.cli_support import (
    CLOCK,
    EXIT_ENGINE_UNAVAILABLE,
    EXIT_FINDINGS,
    EXIT_INVALID_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    connect_engine,
    named_path,
    now_option,
    print_json,
    report_load_errors,
)
from control_plane.config import Settings, UnknownCatalogError, UnreadableConfigError, load_settings
from control_plane.engine import EngineError
from control_plane.lifecycle.cli import add_keys_commands, add_policy_actions

Command = Callable[[argparse.Namespace, Settings], int]


# --- engine ---------------------------------------------------------------------


def _data_dir(args: argparse.Namespace, settings: Settings) -> Path:
    return Path(args.data_dir or settings.engine.local.data_dir)


def cmd_engine_start(args: argparse.Namespace, settings: Settings) -> int:
    local = settings.engine.local
    nodes = args.nodes or local.nodes
    try:
        state = local_engine.start(
            port=args.port or local.port,
            data_dir=_data_dir(args, settings),
            heap=args.heap or (local.heap if nodes == 1 else local.cluster_heap),
            timeout_s=args.timeout or local.start_timeout_s,
            nodes=nodes,
            cluster_name=args.cluster_name,
        )
    except local_engine.LocalEngineError as error:
        raise CliError(str(error), EXIT_ENGINE_UNAVAILABLE) from error
    if state.members:
        print(" ".join(node.url for node in state.members))
    else:
        print(state.url)
    return 0


def cmd_engine_status(args: argparse.Namespace, settings: Settings) -> int:
    state = local_engine.read_state(_data_dir(args, settings))
    url = args.url or (state.url if state else settings.engine.url)
    health = local_engine.probe(url)
    report = {
        "url": url,
        "up": health is not None,
        "status": (health or {}).get("status"),
        "pid": state.pid if state else None,
        "nodes": (health or {}).get("number_of_nodes"),
        "pids": [node.pid for node in state.nodes] if state else [],
    }
    if args.json:
        print_json(report)
    else:
        print(f"{url}: {report['status'] if health else 'not answering'}")
    return EXIT_OK if health else EXIT_ENGINE_UNAVAILABLE


def cmd_engine_stop(args: argparse.Namespace, settings: Settings) -> int:
    state = local_engine.stop(_data_dir(args, settings))
    pids = " ".join(str(node.pid) for node in state.nodes) if state else ""
    print(f"stopped pid {pids}" if state else "no local engine was running")
    return 0


# --- catalog, policies, search ----------------------------------------------------


def cmd_load_catalog(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.bootstrap import resolve
    from control_plane.catalog.profile import load_profile
    from control_plane.catalog_loader import load_catalog

    # named here: missing is a usage error (2); configured: the configuration's problem (3)
    profile_path = (
        named_path(args.profile, "catalog profile") if args.profile
        else resolve(settings.catalog.profile)
    )
    file = named_path(args.file, "catalog file") if args.file else resolve(settings.catalog.file)
    profile = load_profile(profile_path)
    if not file.exists():
        raise CliError(
            f"catalog file not found: {file} (catalog.file of the configuration)", EXIT_INVALID_INPUT
        )
    report = load_catalog(connect_engine(settings), profile, file)  # bad lines: CatalogLoadError, 3
    print(
        f"{report.documents} products in {report.index} ({'reused' if report.reused else 'new'}),"
        f" alias {report.alias} moved; price statistics for {report.categories} categories"
    )
    return 0


def _request(args: argparse.Namespace) -> Any:
    from control_plane.service import SearchRequest

    return SearchRequest(
        intent=args.intent,
        cohorts=tuple(args.cohort or ()),
        market=args.market,
        user_id=args.user,
        size=getattr(args, "size", 10),
        explain=True,
    )


def _service(args: argparse.Namespace, settings: Settings, env: str = "live") -> Any:
    from control_plane.bootstrap import directory_service, profile_of
    from control_plane.service import SearchService

    directory = getattr(args, "policies", None)
    if directory:
        found = named_path(directory, "policy directory")  # before the engine: a usage error
        return directory_service(connect_engine(settings), settings, found)
    return SearchService(settings, connect_engine(settings), profile_of(settings), env=env)


def cmd_compile(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.api.answer import explanation_of

    service = _service(args, settings)
    request = _request(args)
    compiled = service.compile(request, now_option(args.now))
    dsl = service.render(compiled, request, "strict")
    result = {
        "policy_set_version": compiled.policy_set_version,
        "plan": json.loads(compiled.composition.plan.model_dump_json()),
        "explanation": explanation_of(compiled, "strict", dsl),
        "dsl": dsl,
    }
    if args.json:
        print_json(result)
    else:
        explanation = result["explanation"]
        print(
            f"policy set {compiled.policy_set_version[:12]}  residual: {explanation['residual']!r}"
        )
        for step in explanation["applied"]:
            print(f"  applied  {step['policy_id']}")
        for skipped in explanation["skipped"]:
            print(f"  skipped  {skipped['policy_id']}: {skipped['reason']}")
    return 0


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.api.answer import search_response

    service = _service(args, settings)
    request = _request(args)
    outcome = service.search(request, now_option(args.now))
    response = search_response("cli", request, outcome, service.profile)
    if args.json:
        print_json(response.model_dump(mode="json", exclude_none=True))
    else:
        print(
            f"{response.status} tier={response.tier} total={response.total}"
            f" policy_set={response.policy_set_version[:12]}"
        )
        for hit in response.hits:
            print(f"  {hit.id:>16}  {hit.price!s:>7}  {hit.title}  [{', '.join(hit.policies)}]")
            profile = service.profile  # the line above shows its id, price and title fields
            shown = {
                k: v for k, v in hit.display.items() if k not in (profile.id, profile.price, profile.title)
            }
            if shown:
                print(" " * 20 + "  ".join(f"{k}={v}" for k, v in shown.items()))
    return EXIT_OK if response.status == "ok" else EXIT_FINDINGS


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    import uvicorn

    from control_plane.api import create_app
    from control_plane.api.serving import bound_client_times, lean_log_records, log_config, run_workers
    from control_plane.api.wire_lane import WireLaneProtocol

    host, port = args.host or settings.api.host, args.port or settings.api.port
    workers = args.workers or os.cpu_count() or 1
    if workers > 1 and settings.audit.instance_id:
        raise CliError(
            f"audit.instance_id ({settings.audit.instance_id!r}) names one writer's chain, and"
            f" {workers} workers would all write under it (their records would break it): unset"
            " it (each worker then has an id of its own) or serve with --workers 1",
            EXIT_USAGE,
        )
    options: dict[str, Any] = {
        "log_level": "info", "log_config": log_config(), "access_log": settings.api.access_log,
        "http": WireLaneProtocol,
    }
    if workers == 1:
        lean_log_records()
        bound_client_times(settings.api)
        app = create_app(_service(args, settings), clock=CLOCK)
        uvicorn.run(app, host=host, port=port, **options)
        return EXIT_OK
    if args.config:  # the workers read their settings again, from the same file
        os.environ["GOVSEARCH_CONFIG"] = str(Path(args.config).resolve())
    os.environ["GOVSEARCH_CATALOG"] = settings.selected_catalog  # ... for the same catalog
    run_workers("control_plane.api.worker:build", workers=workers, host=host, port=port, **options)
    return EXIT_OK


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane import demo

    return demo.run(
        settings, host=args.host or settings.api.host, port=args.port or settings.api.port, clock=CLOCK
    )


def cmd_policy_check(args: argparse.Namespace, settings: Settings) -> int:
    """The policies and the tests of a directory: every problem of both, in one run."""
    from control_plane.bootstrap import profile_of, resolve
    from control_plane.lifecycle.suite import load_directory
    from control_plane.progress import terminal_bar
    from control_plane.shopper_language import field_types_of

    directory = named_path(args.dir, "policy directory") if args.dir else resolve(settings.policies.dir)
    profile = profile_of(settings)
    policy_set, suite = load_directory(
        directory, profile, field_types=field_types_of(profile),
        progress=terminal_bar("reading policies", sys.stderr),
    )
    print(
        f"{len(policy_set.policies)} policies, {len(suite.cases)} test cases,"
        f" version {policy_set.version}"
    )
    return EXIT_OK


def cmd_policy_publish(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane import policy_store
    from control_plane.bootstrap import publish_policies
    from control_plane.progress import terminal_bar

    directory = named_path(args.dir, "policy directory") if args.dir else settings.policies.dir
    bar = terminal_bar("publishing policies", sys.stderr)
    with policy_store.reporting(bar) if bar else contextlib.nullcontext():
        index, version = publish_policies(
            connect_engine(settings), settings, directory, args.env, clock=CLOCK,
            reading=terminal_bar("reading policies", sys.stderr),
        )
    print(f"policy set {version} is {args.env} ({index})")
    return EXIT_OK


def _add_request_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("intent", help="the intent string, e.g. 'cheap chocolate'")
    parser.add_argument("--cohort", action="append", help="a cohort of the shopper (repeatable)")
    parser.add_argument("--market", help="market code, e.g. us or fr")
    parser.add_argument("--user", help="user id, for the purchase-history boost")
    parser.add_argument("--now", help="evaluate at this ISO time (active windows)")
    parser.add_argument(
        "--policies", help="use this policy directory (its own version index; no environment moves)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_search_commands(commands: Any) -> None:
    load = commands.add_parser(
        "load-catalog", help="bulk-load a catalog into a new index and move its alias"
    )
    load.add_argument("--profile", help="catalog profile YAML (default: configuration)")
    load.add_argument("--file", help="products, one JSON object per line (default: configuration)")
    load.set_defaults(run=cmd_load_catalog)

    compile_ = commands.add_parser(
        "compile", help="match, compose and render an intent without running it"
    )
    _add_request_arguments(compile_)
    compile_.set_defaults(run=cmd_compile)

    search = commands.add_parser("search", help="run a governed search")
    _add_request_arguments(search)
    search.add_argument("--size", type=int, default=10)
    search.set_defaults(run=cmd_search)

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--workers", type=int, choices=range(1, 65), metavar="N",
        help="worker processes sharing the port, each with its own plan cache and audit writer"
        " (default: the number of CPUs)",
    )
    serve.set_defaults(run=cmd_serve, policies=None)

    demo = commands.add_parser(
        "demo", help="start the engine, load the demo data and serve the API"
    )
    demo.add_argument("--host")
    demo.add_argument("--port", type=int)
    demo.set_defaults(run=cmd_demo)

    policy = commands.add_parser(
        "policy",
        help="policy sets: check, test, lint, diff, apply, approve, promote, rollback, disable, ...",
    )
    actions = policy.add_subparsers(dest="policy_command", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="load and validate a policy directory; list every error"
    )
    check.add_argument("dir", nargs="?", help="policy directory (default: configuration)")
    check.set_defaults(run=cmd_policy_check)
    publish = actions.add_parser(
        "publish",
        help="operator bootstrap: write a directory and point an environment at it (no review;"
        " recorded)",
    )
    publish.add_argument("dir", nargs="?")
    publish.add_argument("--env", default="live", choices=["live", "staging"])
    publish.set_defaults(run=cmd_policy_publish)
    add_policy_actions(actions)


# --- parser ---------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="govsearch",
        description="Deterministic policy control plane for Elasticsearch and OpenSearch.",
    )
    parser.add_argument("--config", help="configuration file (default: ./govsearch.yaml)")
    parser.add_argument("--catalog", metavar="NAME", help=CATALOG_HELP)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    engine = commands.add_parser("engine", help="manage the embedded local OpenSearch node(s)")
    engine_commands = engine.add_subparsers(dest="engine_command", required=True, metavar="ACTION")
    start = engine_commands.add_parser(
        "start", help="start the node in the background and wait until healthy"
    )
    start.add_argument(
        "--port",
        type=int,
        help="HTTP port of the first node (default 9200; transport port+100; the next nodes take the"
        " next ports)",
    )
    start.add_argument(
        "--data-dir", help="where the nodes keep data and logs (default .govsearch/engine)"
    )
    start.add_argument(
        "--nodes",
        type=int,
        help="how many nodes form the cluster (default 1: single-node discovery; with more,"
        " indices get one replica and one node can be lost)",
    )
    start.add_argument(
        "--cluster-name",
        help="cluster name (default govsearch-local, or govsearch-local-PORT for several nodes)",
    )
    start.add_argument("--heap", help="JVM heap per node, e.g. 512m (default; 384m with --nodes)")
    start.add_argument(
        "--timeout", type=float, help="seconds to wait for a healthy cluster (default 180)"
    )
    start.set_defaults(run=cmd_engine_start)
    status = engine_commands.add_parser("status", help="exit 0 only when the engine answers")
    status.add_argument("--url", help="engine URL (default: the started node, else configuration)")
    status.add_argument("--data-dir")
    status.add_argument("--json", action="store_true", help="print a JSON report")
    status.set_defaults(run=cmd_engine_status)
    stop = engine_commands.add_parser("stop", help="stop the node(s) that 'engine start' started")
    stop.add_argument("--data-dir")
    stop.set_defaults(run=cmd_engine_stop)

    add_search_commands(commands)
    add_audit_commands(commands)
    add_keys_commands(commands)
    _add_catalog_option(parser)
    return parser


CATALOG_HELP = (
    "the named catalog of the configuration's 'catalogs' to use (its profile, products and"
    " policies; default: GOVSEARCH_CATALOG, else 'default_catalog', else the 'catalog' section)"
)


def _add_catalog_option(parser: argparse.ArgumentParser) -> None:
    """``--catalog NAME`` on every command, before or after the command's name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not any("--catalog" in a.option_strings for a in sub._actions):
                    sub.add_argument(
                        "--catalog", metavar="NAME", default=argparse.SUPPRESS, help=CATALOG_HELP
                    )
                _add_catalog_option(sub)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the exit status is one of :data:`control_plane.cli_support.EXIT_CODES`
    (argparse's own usage errors exit 2 as well). Bad input never ends in a traceback."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config, catalog=args.catalog)
        run: Command = args.run
        return run(args, settings)
    except Exception as error:  # known failures become a line and a status; bugs still raise
        code = _failure(error)
        if code is None:
            raise
        return code


def _failure(error: Exception) -> int | None:
    """Print a known failure on stderr and return its exit status; None for anything else."""
    import yaml

    from control_plane.catalog_loader import CatalogLoadError
    from control_plane.errors import PolicyLoadError
    from control_plane.lifecycle.suite import SuiteLoadError
    from control_plane.lifecycle.workflow import Refused

    if isinstance(error, CliError):
        print(f"govsearch: error: {error}", file=sys.stderr)
        return error.exit_code
    if isinstance(error, CatalogLoadError):  # load-catalog's and demo's catalog file
        print(f"govsearch: error: {error}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if isinstance(error, PolicyLoadError | SuiteLoadError):
        return report_load_errors(error)
    if isinstance(error, Refused):
        print(f"govsearch: refused ({error.code}): {error.message}", file=sys.stderr)
        return EXIT_REFUSED
    if isinstance(error, FileNotFoundError | UnknownCatalogError | UnreadableConfigError):
        print(f"govsearch: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if isinstance(error, ValueError | yaml.YAMLError):
        print(f"govsearch: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_INVALID_INPUT
    if isinstance(error, EngineError):
        print(f"govsearch: error: the engine failed: {error}", file=sys.stderr)
        return EXIT_ENGINE_UNAVAILABLE
    return None


def _one_line(error: Exception) -> str:
    """A YAML error's text on one line (PyYAML prints a snippet under its mark)."""
    text = str(error)
    return " ".join(line.strip() for line in text.splitlines() if line.strip()) or repr(error)


if __name__ == "__main__":
    sys.exit(main())
