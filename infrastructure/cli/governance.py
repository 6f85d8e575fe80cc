"""``mace governance``: force-continue requests, council votes, halts, clears and the log."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.governance import Actor, Motion
from domain.job import DEFAULT_TENANT
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.governance import ABANDONED, RUNNING, UNRESOLVED
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json


def _halt_tenant(args: argparse.Namespace) -> str | None:
    return None if args.store_wide else str(args.tenant)


def request_action(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        args,
        settings,
        lambda ledger, actor: ledger.governance.request_force_continue(
            args.job_id, args.reason, actor, tenant=args.tenant
        ),
        f"force-continue requested for job {args.job_id}",
    )


def vote_on(args: argparse.Namespace, settings: Settings) -> int:
    motion = Motion(args.action)
    return _act(
        args,
        settings,
        lambda ledger, actor: ledger.governance.vote(
            args.job_id, motion, args.vote, actor, tenant=args.tenant
        ),
        f"{args.vote.value} {motion.value} for job {args.job_id}",
    )


def halt_snapshot(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        args,
        settings,
        lambda ledger, actor: ledger.governance.halt_snapshot(
            args.snapshot_id, args.reason, actor, _halt_tenant(args)
        ),
        f"FORCE_HALT_REPLAY set on snapshot {args.snapshot_id} for {_whose(args)}",
    )


def clear_halt(args: argparse.Namespace, settings: Settings) -> int:
    return _act(
        args,
        settings,
        lambda ledger, actor: ledger.governance.clear_halt(
            args.snapshot_id, actor, _halt_tenant(args)
        ),
        f"FORCE_HALT_CLEAR on snapshot {args.snapshot_id} for {_whose(args)}",
    )


def _whose(args: argparse.Namespace) -> str:
    return "every tenant" if args.store_wide else f"tenant {args.tenant}"


def _act(
    args: argparse.Namespace,
    settings: Settings,
    command: Callable[[Ledger, Actor], dict[str, Any]],
    done: str,
) -> int:
    """Run one governance command as the acting identity; a rule it breaks is bad input.
    ``--json`` prints what it recorded, as the HTTP service answers the same action."""
    actor = acting_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        answer = command(ledger, actor)
    if args.json:
        emit_json(answer)
    else:
        print(f"{done} by {actor.actor_id}")
    return EXIT_OK


def print_log(args: argparse.Namespace, settings: Settings) -> int:
    if args.job_id is None and args.tenant is not None:
        raise InvalidInput(
            "--tenant names the tenant of JOB_ID: the whole log shows every tenant's"
        )
    with Ledger.open(settings, create=False) as ledger:
        entries = ledger.governance.log(args.job_id, tenant=args.tenant or DEFAULT_TENANT)
    for entry in entries:
        if args.json:
            emit_json(entry)
            continue
        rest = {k: v for k, v in entry.items() if k not in {"scope", "version", "event"}}
        # A request still without its result says so up front, not at the end of a long line.
        unanswered = (
            f" {entry['result']}" if entry.get("result") in {ABANDONED, RUNNING, UNRESOLVED} else ""
        )
        print(
            f"{entry['scope']} #{entry['version']} {entry['event']}{unanswered}"
            f" {canonical_json(rest).decode()}"
        )
    return EXIT_OK
