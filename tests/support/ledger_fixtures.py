"""Fixtures for anything that stores: every such test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import base64
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson
import pytest
from pydantic import SecretStr

from domain.checkpoint import CHECKPOINT_STREAM
from infrastructure.application.ledger import Ledger
from infrastructure.cli import main
from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.checkpoints.tables import TABLES as CHECKPOINT_TABLES
from infrastructure.storage.settings import PostgresStore, Settings, SQLiteStore
from infrastructure.storage.store import LedgerStore
from support.postgres_server import (
    PostgresServer,
    copy_database,
    drop_database,
    fresh_database,
    made_databases,
)
from support.store_templates import (
    EMPTY_STORE_HELP,
    EMPTY_STORE_MARKER,
    copy_sqlite_template,
    set_up_store,
)

TEST_SECRETS = {"k1": b"\x11" * 32, "k2": b"\x22" * 32}
TEST_CHECKPOINT_KEY = Path(__file__).with_name("test-checkpoint-key.pem")
"""The Ed25519 key that signs every test store's checkpoints (a test key, nothing else)."""


def store_of(ledger: Ledger) -> LedgerStore:
    """The store under ``ledger``: storage tests reach below the use cases on purpose (the
    entry points never do; `Ledger` keeps it to itself)."""
    return ledger._store


def signing_keys(*key_ids: str) -> SecretStr:
    keys = {k: base64.b64encode(TEST_SECRETS[k]).decode() for k in key_ids}
    return SecretStr(orjson.dumps(keys).decode())


def settings_for(store_url: str, *key_ids: str, active: str = "k1") -> Settings:
    return Settings(
        store=store_url,
        signing_keys=signing_keys(*(key_ids or ("k1",))),
        active_key_id=active,
        checkpoint_key=TEST_CHECKPOINT_KEY,
    )


def subprocess_env(store_url: str, **extra: str) -> dict[str, str]:
    """The environment a `mace` subprocess needs for a test store signed by k1, plus ``extra``."""
    return os.environ | {
        "MACE_STORE": store_url,
        "MACE_SIGNING_KEYS": signing_keys("k1").get_secret_value(),
        "MACE_ACTIVE_KEY_ID": "k1",
        "MACE_CHECKPOINT_KEY": str(TEST_CHECKPOINT_KEY),
        **extra,
    }


def development_env(store_url: str) -> dict[str, str]:
    """The environment of a first-time user: no ``MACE_*`` variable but the store."""
    plain = {name: value for name, value in os.environ.items() if not name.startswith("MACE_")}
    return plain | {"MACE_STORE": store_url}


MACE_MAIN = "import sys; from infrastructure.cli import main; sys.exit(main())"
# A test runner's worker may ignore SIGINT, and its children inherit that (a shell's do not):
# ``mace`` as a shell starts it, with Python's own Ctrl-C handler.
MACE_WITH_CTRL_C = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler);"
    " from infrastructure.cli import main; sys.exit(main())"
)


INTERRUPT_GUARD_SECONDS = 300.0
"""Far beyond what a command takes to reach where a test interrupts it: then it is killed."""


@contextmanager
def mace_to_interrupt(
    store_url: str, *argv: str, program: str = MACE_WITH_CTRL_C
) -> Iterator[subprocess.Popen[str]]:
    """``mace *argv`` on the test store, started as a shell starts it (`MACE_WITH_CTRL_C`, or
    another ``python -c`` ``program`` that runs it), its output in pipes; killed if it runs
    `INTERRUPT_GUARD_SECONDS` (a line it never prints then reads as the end of its output) and
    when the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-c", program, *argv],
        env=subprocess_env(store_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    guard = threading.Timer(INTERRUPT_GUARD_SECONDS, process.kill)
    guard.start()
    try:
        yield process
    finally:
        guard.cancel()
        process.kill()
        process.communicate()


def interrupted(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    """Ctrl-C to ``process``: its exit code, standard output and standard error."""
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=INTERRUPT_GUARD_SECONDS)
    return process.returncode, out, err


def mace_process(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``mace *argv`` in a fresh interpreter (what a shell user sees: warnings, exit code)."""
    return subprocess.run(
        [sys.executable, "-c", MACE_MAIN, *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", EMPTY_STORE_HELP)


def wants_empty_store(request: pytest.FixtureRequest) -> bool:
    """Whether the test is marked ``empty_store``: its stores have no tables (SQLite: no file)."""
    return request.node.get_closest_marker(EMPTY_STORE_MARKER) is not None


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This worker's SQLite template: a store set up as ``mace init`` leaves one, no row in it."""
    path = tmp_path_factory.mktemp("sqlite-template") / "mace.db"
    set_up_store(settings_for(f"sqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_template(postgres_server: PostgresServer) -> Iterator[str]:
    """This worker's PostgreSQL template: a database set up as ``mace init`` leaves one, no row
    in it. Nothing stays connected to it, so that it can be copied."""
    name = f"mace_template_{os.getpid()}"
    set_up_store(settings_for(fresh_database(postgres_server, name)))
    yield name
    drop_database(postgres_server, name)


@pytest.fixture
def make_postgres_store(
    postgres_server: PostgresServer, postgres_template: str
) -> Iterator[Callable[[], str]]:
    """Call it for a new database copied from the worker's template (a set-up store, no rows);
    every database it made is dropped after the test."""
    yield from made_databases(
        postgres_server, lambda name: copy_database(postgres_server, postgres_template, name)
    )


def new_store(request: pytest.FixtureRequest, kind: str, path: Path) -> str:
    """A new store of ``kind`` (SQLite at ``path``): a copy of the worker's set-up template, or,
    for a test marked ``empty_store``, one with no tables (on SQLite no file)."""
    empty = wants_empty_store(request)
    if kind == "sqlite":
        if not empty:
            copy_sqlite_template(request.getfixturevalue("sqlite_template"), path)
        return f"sqlite:///{path}"
    make = request.getfixturevalue("make_postgres_database" if empty else "make_postgres_store")
    url = make()
    assert isinstance(url, str)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store of each kind, its tables set up and nothing in them (`store_templates`);
    a test marked ``empty_store`` gets one with no tables instead (on SQLite, no file)."""
    return new_store(request, request.param, tmp_path / "mace.db")


@pytest.fixture
def other_store(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A second fresh store of the same kind as ``store_url``, made the same way."""
    kind = "sqlite" if store_url.startswith("sqlite") else "postgres"
    return new_store(request, kind, tmp_path / "other.db")


@pytest.fixture
def settings(store_url: str) -> Settings:
    return settings_for(store_url)


@pytest.fixture
def ledger(settings: Settings) -> Iterator[Ledger]:
    with Ledger.open(settings) as opened:
        yield opened


class RawTable:
    """Direct SQL on the stored events table, as someone with database access could do it."""

    def __init__(self, settings: Settings) -> None:
        self.store = settings.parsed_store()
        # eventsourcing names the table: per database file on SQLite, per application on PostgreSQL.
        self.table = "stored_events" if isinstance(self.store, SQLiteStore) else "ledger_events"

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        statement = statement.replace("{table}", self.table)
        store = self.store
        if isinstance(store, SQLiteStore):
            conn = sqlite3.connect(store.path)
            try:
                rows = conn.execute(statement.replace("%s", "?"), params).fetchall()
                conn.commit()
            finally:
                conn.close()
            return rows
        assert isinstance(store, PostgresStore)
        with connect_postgres(store) as pg:
            cursor = pg.execute(statement.encode(), params)
            return list(cursor.fetchall()) if cursor.description else []

    def key(self, stream: UUID) -> str | UUID:
        return stream.hex if isinstance(self.store, SQLiteStore) else stream

    def state(self, stream: UUID, version: int) -> bytes:
        rows = self.execute(
            "SELECT state FROM {table} WHERE originator_id = %s AND originator_version = %s",
            (self.key(stream), version),
        )
        return bytes(rows[0][0])

    def set_column(self, stream: UUID, version: int, column: str, value: Any) -> None:
        self.execute(
            f"UPDATE {{table}} SET {column} = %s "
            "WHERE originator_id = %s AND originator_version = %s",
            (value, self.key(stream), version),
        )

    def delete(self, stream: UUID, version: int) -> None:
        self.execute(
            "DELETE FROM {table} WHERE originator_id = %s AND originator_version = %s",
            (self.key(stream), version),
        )

    def forget_checkpoints(self) -> None:
        """Make the store one never checkpointed: no checkpoint, no head index, no log nodes."""
        self.execute("DELETE FROM {table} WHERE originator_id = %s", (self.key(CHECKPOINT_STREAM),))
        for name in CHECKPOINT_TABLES:
            self.execute(f"DELETE FROM {name}")

    def rows(self, stream: UUID) -> list[tuple[int, str, bytes]]:
        rows = self.execute(
            "SELECT originator_version, topic, state FROM {table} "
            "WHERE originator_id = %s ORDER BY originator_version",
            (self.key(stream),),
        )
        return [(int(v), str(t), bytes(s)) for v, t, s in rows]

    def every_byte(self) -> bytes:
        """Every stored topic and state, to search for a value that must be stored nowhere."""
        rows = self.execute("SELECT topic, state FROM {table}")
        return b"\n".join(str(topic).encode() + bytes(state) for topic, state in rows)


@pytest.fixture
def raw_table(settings: Settings, ledger: Ledger) -> RawTable:
    return RawTable(settings)


@pytest.fixture
def cli_env(store_url: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The environment a ``mace`` command sees: the store under test and the test keys."""
    settings = settings_for(store_url)
    monkeypatch.setenv("MACE_STORE", store_url)
    assert settings.signing_keys is not None
    monkeypatch.setenv("MACE_SIGNING_KEYS", settings.signing_keys.get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k1")
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(TEST_CHECKPOINT_KEY))
    return settings


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``mace *argv``: exit code, standard output, standard error."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err
