"""What ``mace replay``'s counterfactuals share (``--with``, ``--as-of``): they re-run a stored
job in audit mode, and print, record and exit alike."""

from __future__ import annotations

import argparse
import sys

from domain.errors import InvalidInput
from domain.replay_access import ReplayMode
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.whatif import WhatIfResult
from infrastructure.cli.common import emit_json
from projections.whatif import WhatIfVerdict


def of_stored_job(args: argparse.Namespace, option: str) -> None:
    """``option`` (``--with``, ``--as-of``) re-runs a stored job in audit mode: InvalidInput,
    naming the first, for an option that asks for anything else, or no JOB_ID."""
    given = [
        other
        for other, set_ in (
            ("--bundle", args.bundle is not None),
            ("--mode", args.mode != ReplayMode.AUDIT.value),
            ("--force-continue", args.force_continue),
            ("--mock", bool(args.mock)),
            ("--report-dir", args.report_dir is not None),
            ("--public-key", args.public_key is not None),
            ("--with", option != "--with" and bool(args.changes)),
        )
        if set_
    ]
    if given:
        raise InvalidInput(f"{option} re-runs a stored job in audit mode: it takes no {given[0]}")
    if args.job_id is None:
        raise InvalidInput(f"mace replay {option} needs JOB_ID")


def shown(result: WhatIfResult, as_json: bool, lines: list[str], what: str) -> int:
    """Print the recorded counterfactual (``lines``, or its answer as canonical JSON) and any
    error on stderr; exit 0 when nothing changed, 1 otherwise."""
    report = result.report
    if as_json:
        emit_json(result.answer())
    else:
        print("\n".join(lines))
        print(f"recorded: {what} record {result.record_id} (never authoritative)")
    if report["error"] is not None:
        print("mace: {code}: {message}".format(**report["error"]), file=sys.stderr)
    return EXIT_OK if result.verdict == WhatIfVerdict.UNCHANGED else EXIT_FAILED
