"""The arguments of ``mace receipts list|show|verify|replay``.

`infrastructure.cli.receipts` runs them.
"""

from __future__ import annotations

import argparse

from domain.receipt import RECEIPT_ID_PATTERN, MemoryView
from infrastructure.cli.common import add_tenant_option

# The CLI spells the memory views with a hyphen, as options usually are.
MEMORY_VIEWS = {view.value.replace("_", "-"): view for view in MemoryView}


def add_receipts_arguments(receipts: argparse.ArgumentParser) -> None:
    actions = receipts.add_subparsers(dest="receipts_command", required=True)

    listing = actions.add_parser("list", help="the tenant's receipts in emission order")
    listing.add_argument("--parent", type=_receipt_id, metavar="ID", help="only replays of ID")
    listing.add_argument("--after", type=int, default=-1, metavar="N", help="after number N")
    listing.add_argument("--limit", type=int, default=100, metavar="N", help="at most N (1-500)")
    _common_options(listing)
    listing.set_defaults(handler="infrastructure.cli.receipts:list_receipts")

    show = actions.add_parser("show", help="print a receipt and its signature")
    show.add_argument("receipt_id", metavar="ID", help="the receipt's id")
    _common_options(show)
    show.set_defaults(handler="infrastructure.cli.receipts:show_receipt")

    verify = actions.add_parser("verify", help="check a receipt's signature (exit 1 unless valid)")
    verify.add_argument("receipt_id", metavar="ID", help="the receipt's id")
    _common_options(verify)
    verify.set_defaults(handler="infrastructure.cli.receipts:verify_receipt")

    replay = actions.add_parser(
        "replay", help="re-run a receipt's assembly under its frozen bundle; print the diff"
    )
    replay.add_argument("receipt_id", metavar="ID", help="the receipt to replay")
    replay.add_argument(
        "--memory",
        choices=sorted(MEMORY_VIEWS),
        default="current",
        help="the memories now (default) or as they stood when the receipt was emitted",
    )
    _common_options(replay)
    replay.set_defaults(handler="infrastructure.cli.receipts:replay_receipt")


def _common_options(parser: argparse.ArgumentParser) -> None:
    add_tenant_option(parser)
    parser.add_argument("--json", action="store_true", help="print canonical JSON")


def _receipt_id(text: str) -> str:
    if not RECEIPT_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a receipt id (rct- and 32 hex digits)")
    return text
