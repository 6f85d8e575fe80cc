"""``mace governance``: force-continue requests, council votes, halts, clears and the log."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from domain.canonical import canonical_json
from domain.governance import Actor, Motion, Vote
from domain.job import DEFAULT_TENANT
from infrastructure.application.governance import ABANDONED, RUNNING
from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import (
    EXIT_OK,
    UsageError,
    acting_actor,
    add_tenant_option,
    emit_json,
)
from infrastructure.storage.settings import Settings


def add_governance_arguments(governance: argparse.ArgumentParser) -> None:
    actions = governance.add_subparsers(dest="governance_command", required=True)
    motions = [m.value for m in Motion]

    request = actions.add_parser("request", help="admin: ask to force-continue a job's replays")
    request.add_argument("job_id", help="the job whose replays may go on past divergences")
    request.add_argument(
        "--action",
        choices=[Motion.FORCE_CONTINUE.value],
        required=True,
        help="the motion asked for",
    )
    request.add_argument("--reason", required=True, help="why, in one line")
    add_tenant_option(request)
    request.set_defaults(handler=request_action)

    for name, vote, text in (
        ("approve", Vote.APPROVE, "council: approve a motion for a job"),
        ("reject", Vote.REJECT, "council: reject (or withdraw approval of) a motion for a job"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("job_id", help="the job the motion is for")
        parser.add_argument("--action", choices=motions, required=True, help="the motion")
        add_tenant_option(parser)
        parser.set_defaults(handler=vote_on, vote=vote)

    halt = actions.add_parser(
        "halt", help="record a security incident: halt a tenant's replays touching a snapshot"
    )
    halt.add_argument("snapshot_id", help="the snapshot whose replays stop")
    halt.add_argument("--reason", required=True, help="the incident, in one line")
    _halt_tenant_options(halt, "halt every tenant's replays (store_operator role only)")
    halt.set_defaults(handler=halt_snapshot)

    clear = actions.add_parser(
        "clear", help="council: lift a tenant's halt of a snapshot (FORCE_HALT_CLEAR)"
    )
    clear.add_argument("snapshot_id", help="the halted snapshot")
    _halt_tenant_options(clear, "lift a store-wide halt (council and store_operator roles)")
    clear.set_defaults(handler=clear_halt)

    log = actions.add_parser("log", help="print governance events, of one job or of all")
    log.add_argument("job_id", nargs="?", help="only this job's events (default: all)")
    add_tenant_option(log, default=None)
    log.add_argument("--json", action="store_true", help="canonical JSON lines")
    log.set_defaults(handler=print_log)


def _halt_tenant_options(parser: argparse.ArgumentParser, store_wide: str) -> None:
    """Whose halt: ``--tenant T`` (default: the default tenant) or ``--store-wide``."""
    whose = parser.add_mutually_exclusive_group()
    add_tenant_option(whose)
    whose.add_argument("--store-wide", action="store_true", help=store_wide)


def _halt_tenant(args: argparse.Namespace) -> str | None:
    return None if args.store_wide else str(args.tenant)


def request_action(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        settings,
        lambda ledger, actor: ledger.governance.request_force_continue(
            args.job_id, args.reason, actor, tenant=args.tenant
        ),
        f"force-continue requested for job {args.job_id}",
    )


def vote_on(args: argparse.Namespace, settings: Settings) -> int:
    motion = Motion(args.action)
    return _act(
        settings,
        lambda ledger, actor: ledger.governance.vote(
            args.job_id, motion, args.vote, actor, tenant=args.tenant
        ),
        f"{args.vote.value} {motion.value} for job {args.job_id}",
    )


def halt_snapshot(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        settings,
        lambda ledger, actor: ledger.governance.halt_snapshot(
            args.snapshot_id, args.reason, actor, _halt_tenant(args)
        ),
        f"FORCE_HALT_REPLAY set on snapshot {args.snapshot_id} for {_whose(args)}",
    )


def clear_halt(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        settings,
        lambda ledger, actor: ledger.governance.clear_halt(
            args.snapshot_id, actor, _halt_tenant(args)
        ),
        f"FORCE_HALT_CLEAR on snapshot {args.snapshot_id} for {_whose(args)}",
    )


def _whose(args: argparse.Namespace) -> str:
    return "every tenant" if args.store_wide else f"tenant {args.tenant}"


def _act(settings: Settings, command: Callable[[Ledger, Actor], None], done: str) -> int:
    """Run one governance command as the acting identity; a rule it breaks is bad input."""
    actor = acting_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        try:
            command(ledger, actor)
        except ValueError as exc:  # GovernanceError among them
            raise UsageError(str(exc)) from None
    print(f"{done} by {actor.actor_id}")
    return EXIT_OK


def print_log(args: argparse.Namespace, settings: Settings) -> int:
    if args.job_id is None and args.tenant is not None:
        raise UsageError("--tenant names the tenant of JOB_ID: the whole log shows every tenant's")
    with Ledger.open(settings, create=False) as ledger:
        try:
            entries = ledger.governance.log(args.job_id, tenant=args.tenant or DEFAULT_TENANT)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    for entry in entries:
        if args.json:
            emit_json(entry)
            continue
        rest = {k: v for k, v in entry.items() if k not in {"scope", "version", "event"}}
        # A request still without its result says so up front, not at the end of a long line.
        unanswered = f" {entry['result']}" if entry.get("result") in {ABANDONED, RUNNING} else ""
        print(
            f"{entry['scope']} #{entry['version']} {entry['event']}{unanswered}"
            f" {canonical_json(rest).decode()}"
        )
    return EXIT_OK
