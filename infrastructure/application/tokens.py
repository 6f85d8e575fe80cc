"""Who may call the HTTP service: bearer tokens from a file, kept only as SHA-256 hashes.

``MACE_TOKENS_FILE`` holds ``{"tokens": [{"sha256", "actor_id", "roles", "tenant"[,
"expires_at"]}, ...]}``. A token with ``expires_at`` (UTC) is refused from that instant on, and
the dashboard sessions signed in with it end; an entry without it (every file written before
tokens could expire) never expires. The event log never holds a token or its hash. A presented
token is hashed and compared with every entry in constant time, so neither a match nor its
position shows in the response time. Tokens are random (``mace token new`` makes 256-bit
ones), so an unsalted hash is enough to keep the file useless to a reader. A token's id is the
first 16 hex digits of its hash: derived, so files written before ids existed have them too, and
naming it shows nothing of the token.

The service watches the file (`WatchedTokensFile`), so revoking or adding a token needs no
restart. ``mace token`` rewrites it whole (a new file renamed over the old one, mode 0600) under a
lock, so concurrent changes are not lost and a reader never sees half a file.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from threading import Lock
from typing import Annotated, Final, Protocol

import orjson
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.governance import Actor, GovernanceError, Role
from domain.job import validate_tenant
from domain.validation_messages import first_problem
from infrastructure.storage.settings import Settings

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
TOKEN_ID_DIGITS: Final = 16

log = logging.getLogger(__name__)


class TokensFileError(InvalidInput):
    """A tokens file that cannot be used; the message names the file and what is wrong."""


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: Sha256Hex
    actor_id: str
    roles: list[Role] = Field(min_length=1)
    tenant: str
    # From when the token is refused; None: never (entries written before tokens could expire).
    expires_at: AwareDatetime | None = None

    @property
    def token_id(self) -> str:
        return self.sha256[:TOKEN_ID_DIGITS]


class TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a token names: an actor acting for one tenant."""

    actor: Actor
    tenant: str


class TokenRefused(Exception):
    """A presented token that names no caller now: unknown, revoked or expired (401)."""

    def __init__(self, message: str, expired_at: datetime | None = None) -> None:
        super().__init__(message)
        self.expired_at = expired_at


@dataclass(frozen=True, slots=True)
class TokenHolder:
    """What a token in the file stands for: its caller, the hash it is known by, its expiry."""

    principal: Principal
    sha256: bytes = field(repr=False)
    expires_at: datetime | None

    def expired(self, now: float) -> bool:
        """Whether the token is refused at ``now`` (seconds since the epoch)."""
        return self.expires_at is not None and now >= self.expires_at.timestamp()


def accepted(tokens: Tokens, token: str, now: float) -> TokenHolder:
    """The holder of ``token`` if the service takes it at ``now``; else `TokenRefused`, saying
    why in words that show nothing of the token."""
    holder = tokens.holder(token)
    if holder is None:
        raise TokenRefused("the bearer token is not valid")
    if holder.expired(now):
        assert holder.expires_at is not None
        expired = utc_text(holder.expires_at)
        raise TokenRefused(f"the bearer token expired at {expired}", holder.expires_at)
    return holder


def utc_text(instant: datetime) -> str:
    """An instant as the tokens file and ``mace token list`` write it: ISO-8601, UTC, seconds."""
    return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_id_of(token: str) -> str:
    return token_hash(token).hex()[:TOKEN_ID_DIGITS]


class Tokens(Protocol):
    """What the service asks of its tokens: who a token names, how many, whether usable."""

    def holder(self, token: str) -> TokenHolder | None:
        """The entry of ``token`` (expired or not), or None."""
        ...

    def holder_of(self, sha256: bytes) -> TokenHolder | None:
        """The entry of the token with this hash, if the file still lists it (a session's)."""
        ...

    def __len__(self) -> int: ...

    def problem(self) -> str | None:
        """Why no token can be accepted now (None: they can)."""
        ...


class TokenBook:
    def __init__(self, entries: list[TokenEntry]) -> None:
        self._entries = [
            TokenHolder(_principal(e), bytes.fromhex(e.sha256), e.expires_at) for e in entries
        ]

    @classmethod
    def load(cls, path: Path) -> TokenBook:
        return cls(read_tokens_file(path).tokens)

    def __len__(self) -> int:
        return len(self._entries)

    def problem(self) -> str | None:
        return None

    def holder(self, token: str) -> TokenHolder | None:
        return self.holder_of(token_hash(token))

    def holder_of(self, sha256: bytes) -> TokenHolder | None:
        """The entry of this hash, or None; every entry is compared, in constant time."""
        found: TokenHolder | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.sha256, sha256):
                found = entry
        return found


def _principal(entry: TokenEntry) -> Principal:
    try:
        actor = Actor.of(entry.actor_id, [role.value for role in entry.roles])
        return Principal(actor, validate_tenant(entry.tenant))
    except (GovernanceError, ValueError) as exc:
        raise TokensFileError(f"token for {entry.actor_id!r}: {exc}") from None


def configured_tokens_file(settings: Settings, given: Path | None = None) -> Path:
    """The tokens file a command works on: ``given`` (its ``--file``), else MACE_TOKENS_FILE."""
    path = given or settings.tokens_file
    if path is None:
        msg = "set MACE_TOKENS_FILE (the service's bearer tokens; see 'mace token new')"
        raise TokensFileError(msg)
    return path


def read_tokens_file(path: Path) -> TokensFile:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TokensFileError(f"cannot read tokens file {path}: {exc.strerror}") from None
    try:
        parsed = TokensFile.model_validate(orjson.loads(raw))
    except orjson.JSONDecodeError as exc:
        raise TokensFileError(f"tokens file {path} is not JSON: {exc}") from None
    except ValidationError as exc:
        raise TokensFileError(f"tokens file {path}: {first_problem(exc)}") from None
    _check_entries(path, parsed.tokens)
    return parsed


def _check_entries(path: Path, entries: list[TokenEntry]) -> None:
    hashes = [entry.sha256 for entry in entries]
    if len(set(hashes)) != len(hashes):
        raise TokensFileError(f"tokens file {path} lists the same token twice")
    ids = [entry.token_id for entry in entries]
    if len(set(ids)) != len(ids):
        raise TokensFileError(f"tokens file {path} lists two tokens with the same id")
    for entry in entries:
        try:
            _principal(entry)
        except TokensFileError as exc:
            raise TokensFileError(f"tokens file {path}: {exc}") from None


def add_token(
    path: Path,
    actor_id: str,
    roles: list[str],
    tenant: str,
    expires_at: datetime | None = None,
) -> str:
    """Make a new random token for an actor, store its hash in ``path``; return the token."""
    return issue_token(path, actor_id, roles, tenant, expires_at)[0]


def issue_token(
    path: Path,
    actor_id: str,
    roles: list[str],
    tenant: str,
    expires_at: datetime | None = None,
) -> tuple[str, TokenEntry]:
    """As `add_token`, with the entry stored for it. ``expires_at``: from when it is refused
    (kept in UTC, to the second; None: never)."""
    try:
        actor = Actor.of(actor_id, roles)
        validate_tenant(tenant)
    except ValueError as exc:  # GovernanceError among them
        raise TokensFileError(str(exc)) from None
    token = "mace_" + secrets.token_urlsafe(32)
    entry = TokenEntry(
        sha256=token_hash(token).hex(),
        actor_id=actor.actor_id,
        roles=[Role(r) for r in actor.roles],
        tenant=tenant,
        expires_at=None
        if expires_at is None
        else expires_at.astimezone(UTC).replace(microsecond=0),
    )
    with _changing(path) as entries:
        entries.append(entry)
    return token, entry


def revoke_token(path: Path, token_id: str) -> TokenEntry:
    """Remove the token with this id from ``path``; the entry removed."""
    with _changing(path) as entries:
        found = [entry for entry in entries if entry.token_id == token_id]
        if not found:
            msg = f"no token {token_id!r} in tokens file {path} (see 'mace token list')"
            raise TokensFileError(msg)
        entries.remove(found[0])
    return found[0]


@contextmanager
def _changing(path: Path) -> Iterator[list[TokenEntry]]:
    """The file's entries to change in place, then written whole; nothing if the block raises.

    A lock beside the file makes concurrent changes take turns (a revoke racing a new token
    must not bring the revoked one back); the new file is renamed over the old one, so the
    service reads either all of the old file or all of the new one.
    """
    lock = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = list(read_tokens_file(path).tokens) if path.exists() else []
        yield entries
        _check_entries(path, entries)
        # Entries that never expire are written as before tokens could expire, byte for byte.
        data = TokensFile(tokens=entries).model_dump(mode="json", exclude_none=True)
        temporary = path.with_name(path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)  # a stale temporary file keeps its own mode otherwise
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(canonical_json(data) + b"\n")
        temporary.replace(path)
    finally:
        os.close(lock)  # releases the lock


Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> Stamp | None:
    """What changes when the file does (inode, size, mtime, ctime); None if it cannot be seen."""
    try:
        seen = path.stat()
    except OSError:
        return None
    return (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)


class WatchedTokensFile:
    """The tokens in a file as it is now: re-read when it changed, looked at every ``interval`` s.

    Looking is a ``stat``; the file is read only when its inode, size, mtime or ctime changed.
    A file that cannot be read or is not valid makes the service accept no token at all until it
    is fixed (fail closed), with one log line per change: keeping the old tokens would keep a
    token working that someone meant to revoke by editing the file, and an outage is noticed
    where a revoked token still at work is not. ``mace token`` never writes such a file.
    """

    def __init__(
        self, path: Path, interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = path
        self._interval = interval
        self._clock = clock
        self._lock = Lock()
        self._seen = _stamp(path)
        self._book = TokenBook.load(path)  # unusable at start-up: refused (mace serve exits 2)
        self._problem: str | None = None
        self._looked = clock()

    def holder(self, token: str) -> TokenHolder | None:
        return self._current().holder(token)

    def holder_of(self, sha256: bytes) -> TokenHolder | None:
        return self._current().holder_of(sha256)

    def __len__(self) -> int:
        return len(self._current())

    def problem(self) -> str | None:
        self._current()
        return self._problem

    def _current(self) -> TokenBook:
        with self._lock:
            now = self._clock()
            if now - self._looked >= self._interval:
                self._looked = now
                stamp = _stamp(self.path)
                if stamp != self._seen:
                    self._seen = stamp
                    self._reload()
            return self._book

    def _reload(self) -> None:
        try:
            book = TokenBook.load(self.path)
        except TokensFileError as exc:
            self._book, self._problem = TokenBook([]), str(exc)
            log.warning("%s: no token is accepted until the tokens file is fixed", exc)
            return
        if self._problem is not None:
            log.warning("tokens file %s is usable again: %d token(s)", self.path, len(book))
        self._book, self._problem = book, None
