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
