"""``mace serve`` (the HTTP service) and ``mace token new`` (a caller's bearer token)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import uvicorn

from domain.job import DEFAULT_TENANT
from infrastructure.api.app import create_app
from infrastructure.api.tokens import TokenBook, TokensFileError, add_token
from infrastructure.cli.common import EXIT_OK, UsageError
from infrastructure.ledger import Ledger
from infrastructure.settings import Settings


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
    new.add_argument("--file", type=Path, help="tokens file (default: MACE_TOKENS_FILE)")
    new.set_defaults(handler=new_token)


def tokens_path(settings: Settings, given: Path | None = None) -> Path:
    path = given or settings.tokens_file
    if path is None:
        raise UsageError("set MACE_TOKENS_FILE (the service's bearer tokens; see 'mace token new')")
    return path


def serve_http(args: argparse.Namespace, settings: Settings) -> int:
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port}: expected 1-65535")
    try:
        tokens = TokenBook.load(tokens_path(settings))
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    with Ledger.open(settings) as ledger:
        app = create_app(settings, tokens, ledger)
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return EXIT_OK


def new_token(args: argparse.Namespace, settings: Settings) -> int:
    path = tokens_path(settings, args.file)
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    try:
        token = add_token(path, args.actor, roles, args.tenant)
    except TokensFileError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write tokens file {path}: {exc.strerror}") from None
    print(token)
    return EXIT_OK
