"""The arguments of ``mace context`` and ``mace handoff``.

`infrastructure.cli.context` runs them.
"""

from __future__ import annotations

import argparse

from infrastructure.cli.common import add_tenant_option


def add_context_arguments(context: argparse.ArgumentParser) -> None:
    _request_options(context)
    context.set_defaults(handler="infrastructure.cli.context:emit_context")


def add_handoff_arguments(handoff: argparse.ArgumentParser) -> None:
    _request_options(handoff)
    handoff.add_argument(
        "--to", dest="to_agent", required=True, metavar="AGENT", help="the agent it is handed to"
    )
    handoff.add_argument("--from", dest="from_agent", metavar="AGENT", help="the agent handing it")
    handoff.add_argument("--note", help="why, in one line")
    handoff.set_defaults(handler="infrastructure.cli.context:emit_handoff")


def _request_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="what to look for in the memories")
    parser.add_argument(
        "--max-entries",
        type=int,
        default=10,
        metavar="N",
        help="the context holds at most N entries (10)",
    )
    add_tenant_option(parser)
    parser.add_argument("--json", action="store_true", help="print canonical JSON")
