"""``mace token new|list|revoke``: the HTTP service's bearer tokens, in their file."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.settings import Settings
from infrastructure.application.tokens import (
    TokenEntry,
    TokensFileError,
    configured_tokens_file,
    issue_token,
    read_tokens_file,
    revoke_token,
    utc_text,
)
from infrastructure.cli.common import emit_json

DURATION: Final = re.compile(r"(\d{1,9})([smhd])")
UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def new_token(args: argparse.Namespace, settings: Settings) -> int:
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    expires_at = _expiry(args.expires_in, args.expires_at, datetime.now(UTC))
    with _tokens_file(settings, args.file) as path:
        token, stored = issue_token(path, args.actor, roles, args.tenant, expires_at)
    entry = _row(stored)
    if args.json:
        emit_json({"token": token, **entry})
        return EXIT_OK
    print(token)
    # Standard output holds the token alone, for TOKEN=$(mace token new ...).
    until = "never expires" if entry["expires_at"] is None else f"expires {entry['expires_at']}"
    print(
        f"mace: token {entry['id']} for {args.actor} (tenant {args.tenant}), {until};"
        f" 'mace token revoke {entry['id']}' removes it",
        file=sys.stderr,
    )
    return EXIT_OK


def _expiry(expires_in: str | None, expires_at: str | None, now: datetime) -> datetime | None:
    """When a new token is to expire (None: never), from ``--expires-in`` or ``--expires-at``;
    `InvalidInput` naming the option for anything else, or for an instant already past."""
    if expires_in is not None:
        found = DURATION.fullmatch(expires_in)
        if found is None:
            msg = f"--expires-in {expires_in!r}: expected a whole number and a unit s, m, h or d"
            raise InvalidInput(msg + " (e.g. 30d)")
        seconds = int(found[1]) * UNIT_SECONDS[found[2]]
        if seconds == 0:
            raise InvalidInput(f"--expires-in {expires_in!r}: expected a duration above zero")
        return now + timedelta(seconds=seconds)
    if expires_at is None:
        return None
    try:
        instant = datetime.fromisoformat(expires_at)
    except ValueError:
        instant = None
    if instant is None or instant.tzinfo is None:
        msg = f"--expires-at {expires_at!r}: expected an ISO-8601 instant with its offset"
        raise InvalidInput(msg + " (e.g. 2027-01-31T18:00:00Z)")
    if instant <= now:
        raise InvalidInput(f"--expires-at {expires_at!r}: already past")
    return instant


def _row(entry: TokenEntry) -> dict[str, Any]:
    """A token as ``mace token`` shows it: never the token nor its hash."""
    return {
        "id": entry.token_id,
        "actor_id": entry.actor_id,
        "roles": [r.value for r in entry.roles],
        "tenant": entry.tenant,
        "expires_at": None if entry.expires_at is None else utc_text(entry.expires_at),
    }


def list_tokens(args: argparse.Namespace, settings: Settings) -> int:
    with _tokens_file(settings, args.file) as path:
        rows = [_row(e) for e in read_tokens_file(path).tokens]
    if args.json:
        emit_json({"tokens": rows})
        return EXIT_OK
    for row in rows:
        until = "never expires" if row["expires_at"] is None else f"expires {row['expires_at']}"
        print(f"{row['id']} {row['actor_id']} {','.join(row['roles'])} {row['tenant']} {until}")
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
