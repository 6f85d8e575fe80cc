"""The arguments of ``mace governance request|approve|reject|halt|clear|log``.

`infrastructure.cli.governance` runs them.
"""

from __future__ import annotations

import argparse

from domain.governance import Motion, Vote
from infrastructure.cli.common import add_tenant_option


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
    _json_option(request)
    request.set_defaults(handler="infrastructure.cli.governance:request_action")

    for name, vote, text in (
        ("approve", Vote.APPROVE, "council: approve a motion for a job"),
        ("reject", Vote.REJECT, "council: reject (or withdraw approval of) a motion for a job"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("job_id", help="the job the motion is for")
        parser.add_argument("--action", choices=motions, required=True, help="the motion")
        add_tenant_option(parser)
        _json_option(parser)
        parser.set_defaults(handler="infrastructure.cli.governance:vote_on", vote=vote)

    halt = actions.add_parser(
        "halt", help="record a security incident: halt a tenant's replays touching a snapshot"
    )
    halt.add_argument("snapshot_id", help="the snapshot whose replays stop")
    halt.add_argument("--reason", required=True, help="the incident, in one line")
    _halt_tenant_options(halt, "halt every tenant's replays (store_operator role only)")
    _json_option(halt)
    halt.set_defaults(handler="infrastructure.cli.governance:halt_snapshot")

    clear = actions.add_parser(
        "clear", help="council: lift a tenant's halt of a snapshot (FORCE_HALT_CLEAR)"
    )
    clear.add_argument("snapshot_id", help="the halted snapshot")
    _halt_tenant_options(clear, "lift a store-wide halt (council and store_operator roles)")
    _json_option(clear)
    clear.set_defaults(handler="infrastructure.cli.governance:clear_halt")

    log = actions.add_parser("log", help="print governance events, of one job or of all")
    log.add_argument("job_id", nargs="?", help="only this job's events (default: all)")
    add_tenant_option(log, default=None, absent="default: every tenant")
    log.add_argument("--json", action="store_true", help="canonical JSON lines")
    log.set_defaults(handler="infrastructure.cli.governance:print_log")


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print canonical JSON: what the HTTP service answers"
    )


def _halt_tenant_options(parser: argparse.ArgumentParser, store_wide: str) -> None:
    """Whose halt: ``--tenant T`` (default: the default tenant) or ``--store-wide``."""
    whose = parser.add_mutually_exclusive_group()
    add_tenant_option(whose)
    whose.add_argument("--store-wide", action="store_true", help=store_wide)
