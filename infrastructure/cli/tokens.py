"""``mace token new|list|revoke``: the HTTP service's bearer tokens, in their file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from domain.job import DEFAULT_TENANT
from infrastructure.cli.common import EXIT_OK, UsageError, emit_json
from infrastructure.storage.settings import Settings
from infrastructure.storage.tokens import (
    TokensFileError,
    add_token,
    configured_tokens_file,
    read_tokens_file,
    revoke_token,
    token_id_of,
)


def add_token_arguments(token: argparse.ArgumentParser) -> None:
    actions = token.add_subparsers(dest="token_command", required=True)
    new = actions.add_parser("new", help="make a token, store its hash, print it once")
    new.add_argument("--actor", required=True, help="who the token acts as")
    new.add_argument("--roles", required=True, help="comma-separated: operator,admin,...")
    new.add_argument("--tenant", default=DEFAULT_TENANT, help="whose jobs it sees (default)")
    _file_option(new)
    new.set_defaults(handler=new_token)

    listing = actions.add_parser("list", help="the tokens' ids, actors, roles and tenants")
    _file_option(listing)
    listing.add_argument("--json", action="store_true", help="print canonical JSON")
    listing.set_defaults(handler=list_tokens)

    revoke = actions.add_parser("revoke", help="remove a token (a running service stops taking it)")
    revoke.add_argument("token_id", metavar="ID", help="the token's id (mace token list)")
    _file_option(revoke)
    revoke.set_defaults(handler=revoke_one)


def _file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", type=Path, help="tokens file (default: MACE_TOKENS_FILE)")


def new_token(args: argparse.Namespace, settings: Settings) -> int:
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    with _tokens_file(settings, args.file) as path:
        token = add_token(path, args.actor, roles, args.tenant)
    print(token)
    # Standard output holds the token alone, for TOKEN=$(mace token new ...).
    token_id = token_id_of(token)
    print(
        f"mace: token {token_id} for {args.actor} (tenant {args.tenant});"
        f" 'mace token revoke {token_id}' removes it",
        file=sys.stderr,
    )
    return EXIT_OK


def list_tokens(args: argparse.Namespace, settings: Settings) -> int:
    with _tokens_file(settings, args.file) as path:
        entries = read_tokens_file(path).tokens
    rows = [
        {
            "id": e.token_id,
            "actor_id": e.actor_id,
            "roles": [r.value for r in e.roles],
            "tenant": e.tenant,
        }
        for e in entries
    ]
    if args.json:
        emit_json({"tokens": rows})
        return EXIT_OK
    for row in rows:
        print(f"{row['id']} {row['actor_id']} {','.join(row['roles'])} {row['tenant']}")
    return EXIT_OK


def revoke_one(args: argparse.Namespace, settings: Settings) -> int:
    with _tokens_file(settings, args.file) as path:
        revoked = revoke_token(path, args.token_id)
    print(f"revoked token {revoked.token_id} of {revoked.actor_id} (tenant {revoked.tenant})")
    return EXIT_OK


@contextmanager
def _tokens_file(settings: Settings, given: Path | None) -> Iterator[Path]:
    """The tokens file to work on (``--file``, else ``MACE_TOKENS_FILE``). One that is not set,
    or cannot be read, written or changed so, is a usage error (exit 2)."""
    try:
        path = configured_tokens_file(settings, given)
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    try:
        yield path
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write tokens file {path}: {exc.strerror}") from None
