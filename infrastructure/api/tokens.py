"""Who may call the HTTP service: bearer tokens from a file, kept only as SHA-256 hashes.

``MACE_TOKENS_FILE`` holds ``{"tokens": [{"sha256", "actor_id", "roles", "tenant"}, ...]}``. The
event log never holds a token or its hash. A presented token is hashed and compared with every
entry in constant time, so neither a match nor its position shows in the response time. Tokens
are random (``mace token new`` makes 256-bit ones), so an unsalted hash is enough to keep the
file useless to a reader.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from domain.canonical import canonical_json
from domain.governance import Actor, GovernanceError, Role
from domain.job import validate_tenant
from domain.validation_messages import first_problem

Sha256Hex = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class TokensFileError(ValueError):
    """A tokens file that cannot be used; the message names the file and what is wrong."""


class TokenEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: Sha256Hex
    actor_id: str
    roles: list[Role] = Field(min_length=1)
    tenant: str


class TokensFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry]


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller a token names: an actor acting for one tenant."""

    actor: Actor
    tenant: str


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class TokenBook:
    def __init__(self, entries: list[TokenEntry]) -> None:
        self._entries = [(bytes.fromhex(e.sha256), _principal(e)) for e in entries]

    @classmethod
    def load(cls, path: Path) -> TokenBook:
        return cls(read_tokens_file(path).tokens)

    def __len__(self) -> int:
        return len(self._entries)

    def principal(self, token: str) -> Principal | None:
        """The caller this token names, or None; every entry is compared, in constant time."""
        presented = token_hash(token)
        found: Principal | None = None
        for stored, principal in self._entries:
            if hmac.compare_digest(stored, presented):
                found = principal
        return found


def _principal(entry: TokenEntry) -> Principal:
    try:
        actor = Actor.of(entry.actor_id, [role.value for role in entry.roles])
        return Principal(actor, validate_tenant(entry.tenant))
    except (GovernanceError, ValueError) as exc:
        raise TokensFileError(f"token for {entry.actor_id!r}: {exc}") from None


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
    hashes = [entry.sha256 for entry in parsed.tokens]
    if len(set(hashes)) != len(hashes):
        raise TokensFileError(f"tokens file {path} lists the same token twice")
    for entry in parsed.tokens:
        try:
            _principal(entry)
        except TokensFileError as exc:
            raise TokensFileError(f"tokens file {path}: {exc}") from None
    return parsed


def add_token(path: Path, actor_id: str, roles: list[str], tenant: str) -> str:
    """Make a new random token for an actor, store its hash in ``path``; return the token."""
    entries = read_tokens_file(path).tokens if path.exists() else []
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
    )
    data = TokensFile(tokens=[*entries, entry]).model_dump(mode="json")
    temporary = path.with_name(path.name + ".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(canonical_json(data) + b"\n")
    temporary.replace(path)
    return token
