"""The arguments of ``mace verify``; `infrastructure.cli.verify` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path

from infrastructure.cli.common import add_tenant_option


def add_verify_arguments(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("job_id", nargs="?", help="the job to verify (with its snapshots)")
    verify.add_argument("--all", action="store_true", help="verify every stream in the store")
    add_tenant_option(verify, default=None, absent="default: default; --all checks every tenant")
    verify.add_argument(
        "--check-sequence",
        action="store_true",
        help="also check event_sequence_index order and seed-derived event ids",
    )
    verify.add_argument(
        "--check-retrievals",
        action="store_true",
        help="also check that every hit of each retrieval served from the tenant's memories is a"
        " memory the log held at the position the retrieval names",
    )
    verify.add_argument(
        "--checkpoint",
        type=Path,
        metavar="FILE",
        help="with --all: an exported checkpoint kept elsewhere that the store must extend"
        " (catches a store rolled back, truncated or rewritten)",
    )
    verify.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="with --all: a witness policy (log key, witness keys, quorum) the newest checkpoint"
        " must meet; its witnesses with a URL are asked (catches a store rolled back or its tail"
        " deleted after a witnessed checkpoint)",
    )
    verify.add_argument("--json", action="store_true", help="print canonical JSON")
    verify.set_defaults(handler="infrastructure.cli.verify:verify_command")
