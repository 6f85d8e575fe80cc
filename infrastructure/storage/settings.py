"""Configuration from the environment, and the one URL that chooses where the ledger lives.

``MACE_STORE`` is ``sqlite:///path/to/file.db`` (default ``sqlite:///./mace.db``) or
``postgresql://user:password@host:port/dbname[?schema=name]``. It is translated into the
environment eventsourcing reads (``PERSISTENCE_MODULE``, ``SQLITE_DBNAME``, ``POSTGRES_*``), with
``POSTGRES_ENABLE_DB_FUNCTIONS`` pinned off: the database-function insert path gives up the
guarantee that notification order equals commit order. The ledger stores through its own
recorders (`LedgerPostgresRecorder`, `LedgerSQLiteRecorder`): eventsourcing's, with large saves
written in chunks on PostgreSQL and a checkpoint's index rows written in its save's transaction.

``MACE_READ_STORE`` (same forms, unset by default) names a replica or copy of that ledger where
read-only work reads (`LedgerStore.open_read_store`): parsed as a read-only store, whose
connections the database itself keeps from writing (SQLite ``mode=ro``, PostgreSQL
``default_transaction_read_only``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from domain.errors import InvalidInput

DEFAULT_STORE = "sqlite:///./mace.db"
# ``?schema=``: a plain PostgreSQL identifier (at most 63 bytes, what the server keeps of a name),
# so no name reaches SQL that the server would read as anything but one schema.
SCHEMA_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
READ_ONLY_FACTORY: Final = (
    "infrastructure.storage.backends.read_only_postgres:ReadOnlyPostgresFactory"
)
FACTORY: Final = "infrastructure.storage.backends.postgres_pool:LedgerPostgresFactory"
CONNECT_TIMEOUT: Final = 5
"""Seconds (``MACE_CONNECT_TIMEOUT``) that connecting to a PostgreSQL store, or waiting for a
pooled connection to it, may take before the store is unavailable."""


class SettingsError(InvalidInput):
    """A setting that cannot be used, named in the message."""


def setting_of(*, read_only: bool) -> str:
    """The variable a store of this kind is configured by, as messages name it."""
    return "MACE_READ_STORE" if read_only else "MACE_STORE"


@dataclass(frozen=True)
class SQLiteStore:
    path: Path
    # A read store (MACE_READ_STORE): opened read-only, so SQLite refuses any write to it.
    read_only: bool = False

    @property
    def setting(self) -> str:
        return setting_of(read_only=self.read_only)

    def eventsourcing_env(self) -> dict[str, str]:
        # eventsourcing opens the database name as a URI: mode=ro makes every connection read-only.
        dbname = f"{self.path.resolve().as_uri()}?mode=ro" if self.read_only else str(self.path)
        return {
            "PERSISTENCE_MODULE": "eventsourcing.sqlite",
            "SQLITE_DBNAME": dbname,
            "APPLICATION_RECORDER_TOPIC": (
                "infrastructure.storage.backends.sqlite_recorder:LedgerSQLiteRecorder"
            ),
        }

    def describe(self) -> str:
        return f"sqlite:///{self.path}"

    def development_file(self, suffix: str) -> Path:
        """Where development use keeps a key made for this store: beside its file."""
        return self.path.with_name(self.path.name + suffix)


@dataclass(frozen=True)
class PostgresStore:
    host: str
    port: int
    user: str
    password: str
    dbname: str
    schema: str
    # A read store (MACE_READ_STORE): every session it opens is read-only, so the server refuses
    # any write to it (as a hot standby does anyway).
    read_only: bool = False
    connect_timeout: int = CONNECT_TIMEOUT

    @property
    def setting(self) -> str:
        return setting_of(read_only=self.read_only)

    def eventsourcing_env(self) -> dict[str, str]:
        return {
            "PERSISTENCE_MODULE": READ_ONLY_FACTORY if self.read_only else FACTORY,
            "POSTGRES_CONNECT_TIMEOUT": str(self.connect_timeout),
            "POSTGRES_HOST": self.host,
            "POSTGRES_PORT": str(self.port),
            "POSTGRES_USER": self.user,
            "POSTGRES_PASSWORD": self.password,
            "POSTGRES_DBNAME": self.dbname,
            "POSTGRES_SCHEMA": self.schema,
            "POSTGRES_ENABLE_DB_FUNCTIONS": "n",
            # Fails closed on a row whose state was set to NULL (eventsourcing's would crash),
            # and writes large saves in chunks (eventsourcing's never finished them).
            "APPLICATION_RECORDER_TOPIC": (
                "infrastructure.storage.backends.postgres_recorder:LedgerPostgresRecorder"
            ),
        }

    def development_file(self, suffix: str) -> None:
        """None: a key for a shared server is configured, never made on one client's disk."""
        return None

    def describe(self) -> str:
        # The password stays out of anything we print; a schema is part of where the store is.
        where = f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}"
        return f"{where}?schema={self.schema}" if self.schema else where

    def __repr__(self) -> str:
        return (
            f"PostgresStore({self.describe()!r}, schema={self.schema!r},"
            f" read_only={self.read_only!r})"
        )


Store = SQLiteStore | PostgresStore


def parse_store(url: str, *, read_only: bool = False) -> Store:
    """Parse a MACE_STORE (``read_only``: MACE_READ_STORE) URL; the error names the setting and
    what is wrong, and never echoes a password."""
    store = _parse_store(url, setting_of(read_only=read_only))
    return replace(store, read_only=read_only)


def _parse_store(url: str, setting: str) -> Store:
    expected = "expected sqlite:///path/to/file.db or postgresql://user:password@host:port/db"
    if url.startswith("sqlite:///"):
        raw = url[len("sqlite:///") :]
        if not raw or raw.endswith("/"):
            msg = f"{setting} {url!r} names no database file: {expected}"
            raise SettingsError(msg)
        return SQLiteStore(Path(unquote(raw)))
    try:
        parts = urlsplit(url)
    except ValueError:
        # An unbalanced "[" or "]" around an IPv6 host; the URL is not echoed (it has a password).
        msg = f"{setting} has an invalid host (unbalanced '[' or ']'): {expected}"
        raise SettingsError(msg) from None
    if parts.scheme in ("postgresql", "postgres"):
        safe = f"{parts.scheme}://{parts.hostname or ''}{parts.path}"
        try:
            port = parts.port or 5432
        except ValueError:
            msg = f"{setting} {safe!r} has an invalid port: {expected}"
            raise SettingsError(msg) from None
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not parts.username or not dbname:
            msg = f"{setting} {safe!r} needs a user, a host and a database name: {expected}"
            raise SettingsError(msg)
        schema = parse_qs(parts.query).get("schema", [""])[0]
        if schema and not SCHEMA_NAME.fullmatch(schema):
            msg = (
                f"{setting} {safe!r} has schema {schema!r}: expected a PostgreSQL identifier"
                " (a letter or _, then letters, digits or _, at most 63)"
            )
            raise SettingsError(msg)
        return PostgresStore(
            host=parts.hostname,
            port=port,
            user=unquote(parts.username),
            password=unquote(parts.password or ""),
            dbname=dbname,
            schema=schema,
        )
    scheme = url.split(":", 1)[0] if ":" in url else url
    msg = f"{setting} has unsupported scheme {scheme!r}: {expected}"
    raise SettingsError(msg)


class Settings(BaseSettings):
    """Everything MACE reads from its environment (prefix ``MACE_``)."""

    model_config = SettingsConfigDict(env_prefix="MACE_", extra="ignore")

    # May carry a database password: never in a repr nor a dump (model_dump, model_dump_json);
    # describe it through parsed_store().
    store: str = Field(default=DEFAULT_STORE, repr=False, exclude=True)
    # A replica or copy of the store that read-only work reads (unset or empty: MACE_STORE).
    read_store: str | None = Field(default=None, repr=False, exclude=True)
    signing_keys: SecretStr | None = None
    active_key_id: str | None = None
    env: Literal["development", "production"] = "development"
    keyring_file: Path | None = None
    # The Ed25519 private key (PEM) that signs checkpoints; `load_checkpoint_key` reads it.
    checkpoint_key: Path | None = None
    # The origin line of the checkpoint notes (c2sp.org/tlog-checkpoint) and their key name;
    # unset: made from the store's first checkpoint (`CheckpointService.log_origin`).
    log_origin: str | None = None
    # Public keys (PEM files, separated by the path separator) of earlier checkpoint keys: the
    # checkpoints they signed before a rotation still verify (`Checkpoints.checked`).
    checkpoint_retired_keys: str | None = None
    # The witness policy (`domain.witness_policy`) whose witnesses `mace serve`'s notary sends
    # each new checkpoint to; unset: no witnessing.
    witness_policy: Path | None = None
    # How long one request to a witness may take before it fails naming the witness (seconds).
    witness_timeout: float = Field(default=10.0, gt=0, le=600, allow_inf_nan=False)
    # How long, at most, `mace serve`'s notary leaves a commit without a checkpoint (seconds).
    checkpoint_interval: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    # How long `mace serve` waits, after the last span of a whole trace arrived over OTLP, before
    # recording it as a run (a child span ending after its root arrives late); 0: at once.
    trace_quiet_seconds: float = Field(default=5.0, ge=0, allow_inf_nan=False)
    # Who is acting on the command line (a local operator holding the store and keys is trusted
    # to say so, as a git author is); the HTTP service takes identity from its tokens instead.
    actor: str | None = None
    roles: str | None = None
    # The HTTP service: who may call it (hashed bearer tokens) and how much one request may carry.
    tokens_file: Path | None = None
    # How often, at most, `mace serve` looks whether the tokens file changed (0: every request).
    tokens_reload_seconds: float = Field(default=3.0, ge=0)
    # The dashboard's sign-in sessions end after this long unused, or this long after sign-in.
    session_idle_seconds: int = Field(default=8 * 3600, ge=60)
    session_max_seconds: int = Field(default=12 * 3600, ge=60)
    # The session cookie is marked Secure (browsers send it over HTTPS only, and take it from
    # http://localhost too); off only to sign in over plain HTTP from another host.
    session_cookie_secure: bool = True
    # A re-execution over HTTP that sees no call for this long is closed as abandoned (recorded).
    reexecution_idle_seconds: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    # Each open re-execution holds its replay lease (on PostgreSQL a connection of its own): a
    # bound, so that opening re-executions cannot take every connection the database allows.
    max_open_reexecutions: int = Field(default=16, ge=1)
    max_body_bytes: int = Field(default=1_048_576, ge=1024)
    max_batch_events: int = Field(default=500, ge=1)
    max_run_events: int = Field(default=20_000, ge=1)
    # One run in all (its events, a run file): `infrastructure.application.limits` holds them.
    max_run_bytes: int = Field(default=16_777_216, ge=1024)
    # How long connecting to a PostgreSQL store, or waiting for one of its pooled connections,
    # may take before it fails (store unavailable) with the server's own reason.
    connect_timeout: int = Field(default=CONNECT_TIMEOUT, ge=1, le=600)

    def parsed_store(self) -> Store:
        return self._timed(parse_store(self.store))

    def parsed_read_store(self) -> Store | None:
        """MACE_READ_STORE as a read-only store; None when it is unset or empty."""
        return (
            self._timed(parse_store(self.read_store, read_only=True)) if self.read_store else None
        )

    def _timed(self, store: Store) -> Store:
        if isinstance(store, PostgresStore):
            return replace(store, connect_timeout=self.connect_timeout)
        return store
