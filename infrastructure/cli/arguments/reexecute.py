"""The arguments of ``mace reexecute``; `infrastructure.cli.reexecute` runs them."""

from __future__ import annotations

import argparse

from domain.replay_access import ReplayMode
from infrastructure.cli.common import add_tenant_option


def add_reexecute_arguments(reexecute: argparse.ArgumentParser) -> None:
    reexecute.add_argument("job_id", help="the recorded job to re-execute the code against")
    reexecute.add_argument(
        "--agent",
        required=True,
        metavar="MODULE:CALLABLE",
        help="the agent's code: a callable taking (harness, input) and returning the final"
        " answer, imported with the current directory on the path",
    )
    reexecute.add_argument(
        "--input",
        metavar="TEXT",
        help="the input the code is given (default: the recorded run's input)",
    )
    reexecute.add_argument(
        "--mode",
        choices=[ReplayMode.REEXECUTE.value, ReplayMode.PRODUCTION.value],
        default=ReplayMode.REEXECUTE.value,
        help="reexecute (default; a sandbox, declared mocks allowed) or production (only what"
        " the run persisted)",
    )
    add_tenant_option(reexecute)
    reexecute.add_argument(
        "--json", action="store_true", help="print the recorded report as canonical JSON"
    )
    reexecute.set_defaults(handler="infrastructure.cli.reexecute:reexecute_job")
