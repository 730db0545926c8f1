"""``govsearch policy ...`` (the lifecycle) and ``govsearch keys ...``: parsing and printing.

Commands that change an environment or record a result authenticate with an API key
(``--api-key`` or ``GOVSEARCH_API_KEY``), exactly like the HTTP API: the same workflow,
the same roles, the same refusals. ``policy test DIR``, ``policy lint DIR`` and ``policy
diff --to DIR`` work on a local directory and need no key: they record nothing in the
history (test and diff write the directory's immutable version index, as any publish does).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from control_plane.cli_support import (
    CLOCK,
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    connect_engine,
    named_path,
    now_option,
    print_json,
    report_load_errors,
    time_option,
)
from control_plane.config import Settings, project_path


def _workflow(settings: Settings, engine: Any = None) -> Any:
    from control_plane.bootstrap import profile_of
    from control_plane.lifecycle.workflow import Workflow

    return Workflow(settings, engine or connect_engine(settings), profile_of(settings), clock=CLOCK)


def _principal(args: argparse.Namespace, workflow: Any) -> Any:
    from control_plane.lifecycle.keys import AuthError, KeyStore

    key = args.api_key or os.environ.get("GOVSEARCH_API_KEY")
    try:
        return KeyStore(workflow.engine, workflow.settings.auth.keys_index).authenticate(key)
    except AuthError as error:
        raise CliError(f"{error} (--api-key or GOVSEARCH_API_KEY)", EXIT_REFUSED) from error


def _refusals(run: Any) -> Any:
    """Turn workflow refusals and policy-load errors into CLI output and exit codes
    (:data:`control_plane.cli_support.EXIT_CODES`)."""

    def command(args: argparse.Namespace, settings: Settings) -> int:
        from control_plane.errors import PolicyLoadError
        from control_plane.lifecycle.suite import SuiteLoadError
        from control_plane.lifecycle.workflow import Refused

        try:
            code: int = run(args, settings)
            return code
        except Refused as refused:
            print(f"govsearch: refused ({refused.code}): {refused.message}", file=sys.stderr)
            return EXIT_REFUSED
        except (PolicyLoadError, SuiteLoadError) as error:
            return report_load_errors(error)

    return command


def _state(state: Any, as_json: bool) -> None:
    data = state.as_json()
    if as_json:
        print_json(data)
        return
    test = data["last_test"]
    print(f"version {data['version']}")
    print(f"  environments: {', '.join(data['environments']) or '-'}")
    print(f"  authors:      {', '.join(data['authors']) or '-'}")
    print(f"  tests:        {data['cases']} cases; last run: "
          + (f"{'passed' if test['passed'] else 'FAILED'} by {test['actor']} at {test['time']}"
             if test else "never"))
    print(f"  approvals:    {', '.join(a['principal'] for a in data['approvals']) or '-'}")


# --- local: test, lint, diff --------------------------------------------------------------


def _directory(args: argparse.Namespace, settings: Settings) -> Path:
    """``DIR`` when given (missing: a usage error), else the configured policy directory
    (missing: the loader's ``io_error``, invalid input): docs/cli.md."""
    if args.dir:
        return named_path(args.dir, "policy directory")
    return project_path(settings.policies.dir)


#: what ``--from``/``--to`` take that is not a directory: an environment, or a version (the
#: hex SHA-256 of a policy set) or a 12+ character prefix of one
_VERSION = re.compile(r"[0-9a-f]{12,64}")
#: ``policy diff``'s intents when ``--queries`` names none
QUERIES = "policies/regression/queries.txt"


def _diff_side(value: str) -> Path | str:
    """A ``--from``/``--to`` value: a policy directory, else an environment or a version; a
    value that is none of them names a directory that is not there (a usage error)."""
    path = project_path(value)
    if path.is_dir():
        return path
    if value in ("live", "staging") or _VERSION.fullmatch(value):
        return value
    raise CliError(
        f"policy directory not found: {value} (nor is it a version, live or staging)", EXIT_USAGE
    )


def cmd_test(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.bootstrap import directory_service
    from control_plane.lifecycle.runner import run_suite, without_plan_cache
    from control_plane.lifecycle.suite import load_suite

    if args.version:
        workflow = _workflow(settings)
        report = workflow.test(_principal(args, workflow), args.version, time_option(args.now))
    else:
        directory = _directory(args, settings)
        # pinned and uncached: the suite runs on this service, its set loaded once
        service = directory_service(connect_engine(settings), without_plan_cache(settings), directory)
        suite = load_suite(directory)
        try:
            report = run_suite(service, suite, now=now_option(args.now))
        finally:
            service.close()
    if args.json:
        print_json(report.as_json())
    else:
        print(report.human())
    return EXIT_OK if report.passed else EXIT_FINDINGS


def cmd_lint(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.lifecycle import lint

    horizon = timedelta(days=args.horizon_days) if args.horizon_days else lint.DEFAULT_HORIZON
    if args.version:
        findings = _workflow(settings).lint(args.version, now=time_option(args.now), horizon=horizon)
    else:
        from control_plane.bootstrap import profile_of
        from control_plane.lifecycle.suite import load_directory

        directory = _directory(args, settings)
        profile = profile_of(settings)  # the configured catalog's profile names its mapping
        mapping = profile.load_mapping()
        locations: dict[str, str] = {}
        policy_set, suite = load_directory(  # does not load: exit 3
            directory, profile, field_types=lint.mapping_fields_of(mapping), locations=locations
        )
        findings = lint.lint(
            policy_set, mapping_fields=lint.mapping_fields_of(mapping),
            now=now_option(args.now), locations=locations,
            tested_policy_ids=None if args.no_tests else suite.policy_ids(),
            profile=profile, cases=suite.cases, horizon=horizon,
        )
    if args.json:
        print_json({"findings": [f.as_json() for f in findings]})
    else:
        for finding in findings:
            print(f"{finding.location}: {finding.severity}: {finding.code}: {finding.message}")
        errors = sum(f.severity == "error" for f in findings)
        print(f"{len(findings)} findings, {errors} errors")
    return EXIT_FINDINGS if lint.has_errors(findings) else EXIT_OK


def cmd_diff(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.bootstrap import directory_service
    from control_plane.lifecycle import regression
    from control_plane.service import SearchService

    sides = _diff_side(args.from_), _diff_side(args.to)  # before the engine: usage errors
    queries = named_path(args.queries, "queries file") if args.queries else project_path(QUERIES)
    workflow = _workflow(settings)
    requests = regression.load_queries(queries)
    now = now_option(args.now)

    def service_for(target: Path | str, default_env: str) -> SearchService:
        if isinstance(target, Path):
            return directory_service(workflow.engine, settings, target)
        index = workflow.index_of(workflow.resolve_version(target, default_env))
        return SearchService(settings, workflow.engine, workflow.profile, index=index)

    before, after = service_for(sides[0], "live"), service_for(sides[1], "staging")
    try:
        result = regression.behaviour_diff(before, after, requests, now=now, top=args.top)
    finally:
        before.close()
        after.close()
    if args.json:
        print_json(result.as_json())
    else:
        print(result.human())
    return 0


# --- workflow -------------------------------------------------------------------------------


def cmd_apply(args: argparse.Namespace, settings: Settings) -> int:
    directory = named_path(args.dir, "policy directory")  # a usage error before the key is asked
    workflow = _workflow(settings)
    state = workflow.apply_directory(_principal(args, workflow), directory, args.reason)
    _state(state, args.json)
    return 0


def cmd_approve(args: argparse.Namespace, settings: Settings) -> int:
    workflow = _workflow(settings)
    _state(workflow.approve(_principal(args, workflow), args.version, args.comment), args.json)
    return 0


def cmd_promote(args: argparse.Namespace, settings: Settings) -> int:
    workflow = _workflow(settings)
    principal = _principal(args, workflow)
    _state(workflow.promote(principal, args.version, args.reason, args.reenable or ()), args.json)
    return 0


def cmd_rollback(args: argparse.Namespace, settings: Settings) -> int:
    workflow = _workflow(settings)
    _state(workflow.rollback(_principal(args, workflow), args.to, args.reason), args.json)
    return 0


def cmd_disable(args: argparse.Namespace, settings: Settings) -> int:
    workflow = _workflow(settings)
    _state(workflow.disable(_principal(args, workflow), args.policy_id, args.reason), args.json)
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    workflow = _workflow(settings)
    _state(workflow.version_state(args.version or "staging"), args.json)
    return 0


def cmd_export(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.lifecycle.export import export_policy_set

    workflow = _workflow(settings)
    environment = workflow.environment(args.env)
    try:
        written = export_policy_set(
            environment.policy_set,
            args.dir,
            suite=workflow.suite_in(args.env),
            files=workflow.files_of(environment.version),
        )
    except FileExistsError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    print(f"{args.env} ({environment.version}): {len(written)} files written to {args.dir}")
    return 0


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    events = _workflow(settings).history(
        env=args.env, action=args.action, policy_id=args.policy, version=args.version,
        outcome=None if args.refusals else "done", limit=args.limit,
    )
    if args.json:
        print_json({"events": [e.as_json() for e in events]})
        return 0
    for event in events:
        print(_history_line(event.as_json()))
    return 0


def _history_line(event: dict[str, Any]) -> str:
    """One event as a line: when, who, what, where, which version, then what changed and
    why; a refusal says so with its code, an event written by another process than the one
    that made the move (ADR 0053) says who wrote it and when."""
    details = event["details"] or {}
    what = (event["diff"] or {}).get("summary") or ""
    if event["action"] == "test" and details:
        total, failed = details.get("total", 0), details.get("failed", 0)
        what = f"{'passed' if details.get('passed') else 'FAILED'} {total - failed}/{total} cases"
    reason = event["reason"] or ""
    what = f"{what}; reason: {reason}" if what and reason and reason != what else what or reason
    if event["outcome"] == "refused":
        what = f"REFUSED {event['code']}: {what}"
    recovered = details.get("recovered")
    if recovered:
        what = f"RECOVERED by {recovered.get('by')} at {recovered.get('at')}: {what}"
    return (
        f"{event['time']}  {event['actor']:<12} {event['action']:<9} {event['env'] or '-':<7}"
        f" {(event['version'] or '-')[:12]:<12}  {what}"
    )


def cmd_intents(args: argparse.Namespace, settings: Settings) -> int:
    entries = _workflow(settings).move_intents(env=args.env, state=args.state, limit=args.limit)
    if args.json:
        print_json({"intents": [entry.as_json() for entry in entries]})
        return 0
    for entry in entries:
        data = entry.as_json()
        event = data["event"]
        if data["closed"]:
            why = f"{data['state'].upper()}: {data['closed'].get('note')}"
        else:
            owner = data["owner"]
            why = (f"{data['state'].upper()} ({data['marker'] or 'no marker'}): owner"
                   f" {owner.get('host')} pid {owner.get('pid')} until {data['expires']}")
        print(
            f"{event['time']}  {event['actor']:<12} {event['action']:<9} {data['env']:<7}"
            f" {(event['version'] or '-')[:12]:<12}  {why}"
        )
    return 0


def cmd_suggest(args: argparse.Namespace, settings: Settings) -> int:
    from control_plane.audit.recorder import Recorder
    from control_plane.lifecycle import suggest, suggest_llm
    from control_plane.loader import dump_policy_yaml

    workflow = _workflow(settings)
    principal = None if args.dry_run else _principal(args, workflow)
    records = Recorder.from_settings(settings, workflow.engine, clock=CLOCK).decision_records(None, None)
    signals = suggest.mine(records)
    existing = workflow.environment("live").policy_set
    drafts = None
    if settings.llm.base_url:
        from openai import OpenAI

        client = OpenAI(
            base_url=settings.llm.base_url, api_key=settings.llm.api_key or "unused",
            timeout=settings.llm.timeout_s, max_retries=0,
        )
        try:
            drafts = suggest_llm.suggest_llm(
                signals, client=client, model=settings.llm.model, existing=existing,
                timeout_s=settings.llm.timeout_s,
            )
        except suggest_llm.SuggestionError as error:
            print(f"the model failed ({error}); deterministic suggestions instead", file=sys.stderr)
    if drafts is None:
        drafts = suggest.suggest_rules(
            signals, probe=suggest.catalog_probe(workflow.engine, workflow.profile), existing=existing
        )
    print(f"{len(signals)} signals in the decision log; {len(drafts)} suggested policies", file=sys.stderr)
    for draft in drafts:
        print(f"---\n{dump_policy_yaml(draft)}", end="")
    if args.dry_run or not drafts:
        return 0
    state = workflow.suggest(principal, drafts, f"{len(drafts)} suggestions from {len(signals)} signals")
    if state is None:
        print("every suggestion is in staging already", file=sys.stderr)
        return 0
    print(f"staging is now {state.version}: test, review and promote it like any change", file=sys.stderr)
    return 0


# --- keys ---------------------------------------------------------------------------------


def _keys(settings: Settings) -> Any:
    from control_plane.lifecycle.keys import KeyStore

    return KeyStore(connect_engine(settings), settings.auth.keys_index)


def cmd_keys_create(args: argparse.Namespace, settings: Settings) -> int:
    store = _keys(settings)
    try:
        key, principal = store.create(args.principal, args.role, CLOCK(), args.label)
    except ValueError as error:
        raise CliError(str(error), EXIT_USAGE) from error
    print(key)
    print(f"{principal.name} ({', '.join(sorted(principal.roles))}), key id {principal.key_id};"
          " the key is shown once: store it now", file=sys.stderr)
    return 0


def cmd_keys_list(args: argparse.Namespace, settings: Settings) -> int:
    entries = _keys(settings).list()
    if args.json:
        print_json(entries)
    for entry in [] if args.json else entries:
        state = f"revoked {entry['revoked_at']}" if entry.get("revoked_at") else "active"
        print(f"{entry['key_id']}  {entry['principal']:<14} {','.join(entry['roles']):<24} {state}")
    return 0


def cmd_keys_revoke(args: argparse.Namespace, settings: Settings) -> int:
    if not _keys(settings).revoke(args.key_id, CLOCK()):
        raise CliError(f"no key with id {args.key_id}")
    print(f"revoked {args.key_id}")
    return 0


# --- parser -------------------------------------------------------------------------------


def _keyed(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-key", help="API key (default: $GOVSEARCH_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_policy_actions(actions: Any) -> None:
    test = actions.add_parser(
        "test", help="run the policy tests of a directory (or of a registered version, recorded)"
    )
    test.add_argument("dir", nargs="?", help="policy directory (default: configuration)")
    test.add_argument("--version", help="test this registered version or environment instead (needs a key)")
    test.add_argument(
        "--now", help="run cases that pin no 'now' at this ISO time (default: now); pinned cases keep theirs"
    )
    _keyed(test)
    test.set_defaults(run=_refusals(cmd_test))

    lint = actions.add_parser("lint", help="static analysis: every finding with code, severity, location")
    lint.add_argument("dir", nargs="?", help="policy directory (default: configuration)")
    lint.add_argument("--version", help="lint this registered version or environment instead")
    lint.add_argument("--now", help="evaluate windows at this ISO time (default: now)")
    lint.add_argument(
        "--horizon-days", type=int, metavar="DAYS",
        help="test_unpinned_window: how far ahead of now a window edge makes a test case that pins"
        " no 'now' time-dependent (default: 365)",
    )
    lint.add_argument("--no-tests", action="store_true", help="do not report untested policies")
    lint.add_argument("--json", action="store_true", help="print JSON")
    lint.set_defaults(run=_refusals(cmd_lint))

    diff = actions.add_parser(
        "diff", help="replay intents on two versions; list every plan or top-results change"
    )
    diff.add_argument("--from", dest="from_", default="live", metavar="FROM",
                      help="DIR, VERSION, live or staging (default live)")
    diff.add_argument("--to", default="staging", metavar="TO",
                      help="DIR, VERSION, staging or live (default staging)")
    diff.add_argument(
        "--queries",
        help=f"intents: .txt (one per line) or .yaml/.json (list of requests) (default: {QUERIES})",
    )
    diff.add_argument("--now", help="evaluate both sides at this ISO time (default: now)")
    diff.add_argument("--top", type=int, default=10, help="compare this many top results (default 10)")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.set_defaults(run=_refusals(cmd_diff))

    apply = actions.add_parser("apply", help="write a policy directory (with its tests) to staging")
    apply.add_argument("dir")
    apply.add_argument("--env", default="staging", choices=["staging"],
                       help="only staging: live changes through promote")
    apply.add_argument("--reason")
    _keyed(apply)
    apply.set_defaults(run=_refusals(cmd_apply))

    approve = actions.add_parser("approve", help="approve a version (not your own)")
    approve.add_argument("version", nargs="?", help="VERSION (12+ characters) or staging (default)")
    approve.add_argument("--comment")
    _keyed(approve)
    approve.set_defaults(run=_refusals(cmd_approve))

    promote = actions.add_parser("promote", help="make a tested, approved version live")
    promote.add_argument("version", nargs="?", help="VERSION or staging (default)")
    promote.add_argument("--reason")
    promote.add_argument("--reenable", action="append", metavar="ID",
                         help="a policy disabled on live by the kill switch that this version may turn"
                         " back on (repeatable)")
    _keyed(promote)
    promote.set_defaults(run=_refusals(cmd_promote))

    rollback = actions.add_parser("rollback", help="restore a version that was live before")
    rollback.add_argument("--to", help="VERSION (default: the one live before the current one)")
    rollback.add_argument("--reason")
    _keyed(rollback)
    rollback.set_defaults(run=_refusals(cmd_rollback))

    disable = actions.add_parser("disable", help="kill switch: disable a policy on live now")
    disable.add_argument("policy_id")
    disable.add_argument("--reason", required=True)
    _keyed(disable)
    disable.set_defaults(run=_refusals(cmd_disable))

    status = actions.add_parser("status", help="a version's authors, tests, approvals, environments")
    status.add_argument("version", nargs="?", help="VERSION, staging (default) or live")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=_refusals(cmd_status))

    export = actions.add_parser("export", help="write an environment back to a policy directory")
    export.add_argument("dir", help="a new (or empty) directory")
    export.add_argument("--env", default="live", choices=["live", "staging"])
    export.set_defaults(run=_refusals(cmd_export))

    history = actions.add_parser("history", help="every version change: who, when, why, what")
    history.add_argument("--env", choices=["live", "staging"])
    history.add_argument("--action")
    history.add_argument("--policy", help="only changes touching this policy id")
    history.add_argument("--version")
    history.add_argument("--refusals", action="store_true", help="include refused actions")
    history.add_argument("--limit", type=int, default=50)
    history.add_argument("--json", action="store_true", help="print JSON")
    history.set_defaults(run=_refusals(cmd_history))

    intents = actions.add_parser(
        "intents",
        help="environment moves no history event names: in flight, dropped (never made),"
        " withdrawn (taken back)",
    )
    intents.add_argument("--env", choices=["live", "staging"])
    intents.add_argument(
        "--state", choices=["open", "dropped", "withdrawn", "recorded"],
        help="only intents in this state (default: open, dropped and withdrawn)",
    )
    intents.add_argument("--limit", type=int, default=50)
    intents.add_argument("--json", action="store_true", help="print JSON")
    intents.set_defaults(run=_refusals(cmd_intents))

    suggest = actions.add_parser(
        "suggest", help="draft policies from the decision log into staging (origin llm or rules)"
    )
    suggest.add_argument("--dry-run", action="store_true", help="print the drafts only")
    _keyed(suggest)
    suggest.set_defaults(run=_refusals(cmd_suggest))


def add_keys_commands(commands: Any) -> None:
    keys = commands.add_parser("keys", help="API keys: create, list, revoke (direct engine access)")
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a key; print it once")
    create.add_argument("--principal", required=True, help="who the key identifies")
    create.add_argument("--role", action="append", required=True,
                        help="search, author, approver, auditor or admin (repeatable)")
    create.add_argument("--label", help="a note, e.g. 'merchandising UI'")
    create.set_defaults(run=cmd_keys_create)
    listing = actions.add_parser("list", help="list keys (never their secrets)")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_keys_list)
    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.add_argument("key_id")
    revoke.set_defaults(run=cmd_keys_revoke)
