"""``mace serve`` (the HTTP service) and ``mace token new|list|revoke`` (its bearer tokens)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from domain.job import DEFAULT_TENANT
from infrastructure.api.app import create_app
from infrastructure.api.tokens import (
    TokensFileError,
    WatchedTokensFile,
    add_token,
    read_tokens_file,
    revoke_token,
    token_id_of,
)
from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import EXIT_OK, UsageError, emit_json
from infrastructure.storage.settings import Settings


def add_parsers(commands: Any) -> None:
    serve = commands.add_parser("serve", help="run the HTTP service over the ledger")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    serve.set_defaults(handler=serve_http)

    token = commands.add_parser("token", help="manage the HTTP service's bearer tokens")
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


def tokens_path(settings: Settings, given: Path | None = None) -> Path:
    path = given or settings.tokens_file
    if path is None:
        raise UsageError("set MACE_TOKENS_FILE (the service's bearer tokens; see 'mace token new')")
    return path


def serve_http(args: argparse.Namespace, settings: Settings) -> int:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: expected 1-65535")
    try:
        tokens = WatchedTokensFile(tokens_path(settings), settings.tokens_reload_seconds)
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    with Ledger.open(settings) as ledger:
        app = create_app(settings, tokens, ledger)
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return EXIT_OK


def new_token(args: argparse.Namespace, settings: Settings) -> int:
    path = tokens_path(settings, args.file)
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    with _tokens_file(path):
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
    path = tokens_path(settings, args.file)
    with _tokens_file(path):
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
    path = tokens_path(settings, args.file)
    with _tokens_file(path):
        revoked = revoke_token(path, args.token_id)
    print(f"revoked token {revoked.token_id} of {revoked.actor_id} (tenant {revoked.tenant})")
    return EXIT_OK


@contextmanager
def _tokens_file(path: Path) -> Iterator[None]:
    """A tokens file that cannot be read, written or changed so is a usage error (exit 2)."""
    try:
        yield
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write tokens file {path}: {exc.strerror}") from None
