"""The arguments of ``mace replay``; `infrastructure.cli.replay` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path

from domain.replay_access import ReplayMode
from infrastructure.cli.arguments.bundles import add_public_key_option
from infrastructure.cli.common import add_tenant_option


def add_replay_arguments(replay: argparse.ArgumentParser) -> None:
    replay.add_argument("job_id", nargs="?", help="the job to replay (optional with --bundle)")
    replay.add_argument(
        "--bundle",
        type=Path,
        metavar="FILE",
        help="replay from a run bundle (mace export): no store is opened and nothing is recorded",
    )
    add_public_key_option(replay)
    replay.add_argument(
        "--mode",
        choices=[m.value for m in ReplayMode],
        default=ReplayMode.AUDIT.value,
        help="audit (default, read-only), reexecute (sandbox, mocks allowed) or production",
    )
    replay.add_argument(
        "--force-continue",
        action="store_true",
        help="go on past divergences (needs an admin request and a council approval)",
    )
    replay.add_argument("--report-dir", type=Path, help="write replay_report.json and .md here")
    add_tenant_option(replay, default=None, absent="default: default, or the bundle's own tenant")
    replay.add_argument(
        "--mock",
        action="append",
        default=[],
        metavar="AGENT=FILE",
        help="reexecute only: answer AGENT with the reply in FILE ({text, claims, evidence})",
    )
    replay.add_argument(
        "--with",
        dest="changes",
        action="append",
        default=[],
        metavar="KEY=ID",
        help="what-if: re-run the job under this snapshot (router, selfrep, brainstate, privacy,"
        " governance) or policy=BUNDLE_HASH instead of the declared one; repeatable, recorded,"
        " never authoritative (exit 0 nothing changed, 1 a decision changed)",
    )
    replay.add_argument(
        "--as-of",
        metavar="POINT",
        help="as-of: serve the job's retrievals and SEM reads from the tenant's memory as it stood"
        " at POINT (N or checkpoint:N, a checkpoint; position:N, a log position); recorded, never"
        " authoritative (exit 0 nothing differs, 1 something does)",
    )
    replay.add_argument(
        "--compare-to",
        metavar="POINT",
        help="with --as-of: serve them at this point too and diff the two (hit sets, scores"
        " within epsilon; data drift apart from policy drift)",
    )
    replay.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    replay.set_defaults(handler="infrastructure.cli.replay:replay_job")
