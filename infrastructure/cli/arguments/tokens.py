"""The arguments of ``mace token new|list|revoke``; `infrastructure.cli.tokens` runs them."""

from __future__ import annotations

import argparse
from pathlib import Path

from domain.job import DEFAULT_TENANT


def add_token_arguments(token: argparse.ArgumentParser) -> None:
    actions = token.add_subparsers(dest="token_command", required=True)
    new = actions.add_parser("new", help="make a token, store its hash, print it once")
    new.add_argument("--actor", required=True, help="who the token acts as")
    new.add_argument("--roles", required=True, help="comma-separated: operator,admin,...")
    new.add_argument("--tenant", default=DEFAULT_TENANT, help="whose jobs it sees (default)")
    expiry = new.add_mutually_exclusive_group()
    expiry.add_argument(
        "--expires-in", metavar="N{s,m,h,d}", help="refused this long from now, e.g. 30d, 12h"
    )
    expiry.add_argument(
        "--expires-at", metavar="INSTANT", help="refused from this ISO-8601 instant with offset"
    )
    new.add_argument("--json", action="store_true", help="print canonical JSON")
    _file_option(new)
    new.set_defaults(handler="infrastructure.cli.tokens:new_token")

    listing = actions.add_parser("list", help="the tokens' ids, actors, roles, tenants and expiry")
    _file_option(listing)
    listing.add_argument("--json", action="store_true", help="print canonical JSON")
    listing.set_defaults(handler="infrastructure.cli.tokens:list_tokens")

    revoke = actions.add_parser("revoke", help="remove a token (a running service stops taking it)")
    revoke.add_argument("token_id", metavar="ID", help="the token's id (mace token list)")
    _file_option(revoke)
    revoke.set_defaults(handler="infrastructure.cli.tokens:revoke_one")


def _file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", type=Path, help="tokens file (default: MACE_TOKENS_FILE)")
