"""``mace token new|list|revoke``: the HTTP service's bearer tokens, in their file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.settings import Settings
from infrastructure.application.tokens import (
    TokensFileError,
    add_token,
    configured_tokens_file,
    read_tokens_file,
    revoke_token,
    token_id_of,
)
from infrastructure.cli.common import emit_json


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
        raise InvalidInput(str(exc)) from None
    try:
        yield path
    except TokensFileError as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot write tokens file {path}: {exc.strerror}") from None
