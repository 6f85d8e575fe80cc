"""The arguments of ``mace runs [abandon]``; `infrastructure.cli.runs` runs them."""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def add_runs_arguments(runs: argparse.ArgumentParser) -> None:
    add_tenant_option(runs, default=None, absent="default: every tenant")
    runs.add_argument("--json", action="store_true", help="canonical JSON lines")
    runs.set_defaults(handler="infrastructure.cli.runs:list_open_runs")
    actions = runs.add_subparsers(dest="runs_command")
    abandon = actions.add_parser(
        "abandon", help="close an open run whose emitter is gone; it never becomes a job"
    )
    abandon.add_argument("run_id", help="the open run's id (mace runs)")
    abandon.add_argument("--reason", required=True, help="why, in one line")
    add_tenant_option(abandon)
    abandon.add_argument("--json", action="store_true", help="print canonical JSON")
    abandon.set_defaults(handler="infrastructure.cli.runs:abandon_run")
