"""The arguments of ``mace run``, ``mace events`` and ``mace jobs``.

`infrastructure.cli.jobs` runs them.
"""

from __future__ import annotations

import argparse

from domain.job import CaptureMode
from infrastructure.cli.common import add_snapshot_option, add_tenant_option
from projections.job_search import STATUSES
from projections.job_summaries import LISTING_LIMIT, LISTING_MAX_LIMIT


def add_run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("text", help="the job's input")
    run.add_argument("--seed", required=True, help="the job seed (integer or string)")
    run.add_argument("--job-id", help="default: derived from the seed, input and job counter")
    run.add_argument(
        "--capture",
        choices=[m.value for m in CaptureMode],
        help="how much agent I/O to keep (default prompts_only, seed 003, but full_io for a job"
        " that changes SEM, seed 000 section 12; full_io keeps responses too, and only a full_io"
        " job replays in production mode)",
    )
    run.add_argument("--user", default="default", help="whose profile facts the job may use")
    add_snapshot_option(run)
    add_tenant_option(run)
    run.add_argument("--json", action="store_true", help="print canonical JSON")
    run.set_defaults(handler="infrastructure.cli.jobs:run_job")


def add_events_arguments(events: argparse.ArgumentParser) -> None:
    events.add_argument(
        "job_id",
        help="the job whose events to print, or one fact's address (mace://<tenant>/job/<job>/event/<n>)",
    )
    events.add_argument("--type", dest="event_type", help="only events of this type")
    add_tenant_option(events)
    events.add_argument("--json", action="store_true", help="canonical JSON lines")
    events.set_defaults(handler="infrastructure.cli.jobs:job_events")


def add_jobs_arguments(listing: argparse.ArgumentParser) -> None:
    listing.add_argument(
        "--non-replayable",
        action="store_true",
        help="only jobs production replay cannot redo: --replayable no or open",
    )
    # Plain strings: `parse_job_query` checks them, as it does the dashboard's and the API's.
    listing.add_argument("--job", metavar="PREFIX", help="only jobs whose id starts so")
    listing.add_argument("--status", help=f"only jobs of this status ({', '.join(STATUSES)})")
    listing.add_argument(
        "--replayable", help="only jobs production replay can redo (yes), cannot (no), or open"
    )
    listing.add_argument(
        "--error", metavar="CODE", help="only jobs whose latest replay failed with this code"
    )
    listing.add_argument(
        "--from",
        dest="replayed_from",
        metavar="T",
        help="only jobs whose latest replay was asked for at or after T (YYYY-MM-DD[THH:MM[:SS]Z])",
    )
    listing.add_argument(
        "--to",
        dest="replayed_to",
        metavar="T",
        help="... and at or before T (a day alone: its last second)",
    )
    add_tenant_option(listing, default=None, absent="default: every tenant")
    listing.add_argument(
        "--limit",
        type=int,
        default=LISTING_LIMIT,
        help=f"jobs a page shows, 1 to {LISTING_MAX_LIMIT} ({LISTING_LIMIT})",
    )
    listing.add_argument(
        "--offset", type=int, default=0, help="jobs to skip before the page starts (0)"
    )
    listing.add_argument(
        "--json", action="store_true", help='print canonical JSON: {"jobs": [...], "total": N}'
    )
    listing.set_defaults(handler="infrastructure.cli.jobs:list_jobs")
