"""The arguments of ``mace audit``; `infrastructure.cli.audit` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def add_audit_arguments(audit: argparse.ArgumentParser) -> None:
    add_tenant_option(audit, default=None, absent="default: every tenant's jobs")
    audit.add_argument(
        "--since",
        type=_at_least(0),
        default=0,
        metavar="N",
        help="only jobs whose first event comes after notification id N (default: 0, every job)",
    )
    audit.add_argument(
        "--workers",
        type=_at_least(1),
        default=1,
        metavar="N",
        help="processes reading the log side by side, each a range of streams (default: 1)",
    )
    audit.add_argument(
        "--with",
        dest="changes",
        action="append",
        default=[],
        metavar="KEY=ID",
        help="what-if: re-run every selected job under this snapshot (router, selfrep,"
        " brainstate, privacy, governance) or policy=BUNDLE_HASH; repeatable, recorded once,"
        " never authoritative (exit 0 nothing changed but what --expect lists, 1 otherwise)",
    )
    audit.add_argument(
        "--until",
        type=_at_least(1),
        metavar="N",
        help="with --with: only jobs whose first event is at or before notification id N"
        " (default: the head when the what-if begins)",
    )
    audit.add_argument(
        "--jobs",
        metavar="FILE",
        help="with --with: re-run these jobs (one id a line, of --tenant), not a window of the log",
    )
    audit.add_argument(
        "--expect",
        metavar="FILE",
        help="with --with: expected changes, JSON lines or a JSON list of {job_id, field} (the"
        " field a job changes first); only unexpected changes fail",
    )
    audit.add_argument("--json", action="store_true", help="print canonical JSON")
    audit.set_defaults(handler="infrastructure.cli.audit:audit_command")


def _at_least(least: int) -> argparse._ActionType:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse
