"""The arguments of ``mace fork``; `infrastructure.cli.fork` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def _iteration(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"{value!r}: expected an iteration number, 0 or more")
    return int(value)


def add_fork_arguments(fork: argparse.ArgumentParser) -> None:
    fork.add_argument("job_id", help="the recorded job to fork")
    fork.add_argument(
        "--at",
        type=_iteration,
        required=True,
        metavar="ITERATION",
        help="keep the iterations before this one as recorded; re-run it and the rest",
    )
    fork.add_argument(
        "--input",
        dest="text",
        metavar="TEXT",
        help="iteration ITERATION's input in place of the recorded one (later ones keep theirs)",
    )
    fork.add_argument(
        "--with",
        dest="changes",
        action="append",
        default=[],
        metavar="KEY=ID",
        help="re-run under this snapshot (router, selfrep, brainstate, privacy, governance)"
        " instead of the declared one; repeatable",
    )
    add_tenant_option(fork)
    fork.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    fork.set_defaults(handler="infrastructure.cli.fork:fork_job")
