"""``mace replay JOB --as-of POINT [--compare-to POINT]``: the job's retrievals and SEM reads
served from the tenant's memory as it stood at a point of the log, or at two and diffed
(`AsOfService`); recorded, never authoritative."""

from __future__ import annotations

import argparse

from domain.as_of import parse_point
from domain.errors import InvalidInput
from domain.governance import Actor
from domain.job import DEFAULT_TENANT
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli import counterfactuals
from projections.as_of import render_text


def as_of_job(args: argparse.Namespace, settings: Settings, actor: Actor) -> int:
    """Exit 0 when nothing differs as of the point(s), 1 when something does or the record
    said nothing; bad points are exit 2 before anything is recorded."""
    if args.as_of is None:
        raise InvalidInput(
            "--compare-to needs --as-of: name the point it is compared with (--as-of N"
            " --compare-to M)"
        )
    as_of = parse_point(args.as_of, "--as-of")
    compare_to = None if args.compare_to is None else parse_point(args.compare_to, "--compare-to")
    with Ledger.open(settings, create=False) as ledger:
        result = ledger.whatif_as_of.run(
            args.job_id,
            as_of,
            actor,
            tenant=args.tenant or DEFAULT_TENANT,
            compare_to=compare_to,
        )
    report = result.report
    return counterfactuals.shown(result, args.json, render_text(report), report["kind"])
