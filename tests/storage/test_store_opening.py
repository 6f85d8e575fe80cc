"""Opening a store: tables set up once (`mace init` or the first writer), never by a reader;
processes starting together all succeed; a wrong PostgreSQL URL fails at once, in the server's
words, without the password.

eventsourcing used to run its DDL in every process at start, reads included: processes starting
together on PostgreSQL failed with "tuple concurrently updated" or a duplicate ``pg_type`` key.
The threads below start opening at the same instant (a barrier), which made that happen every
time; the `mace` processes are the same race as users meet it.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from support.ledger_fixtures import (
    TEST_CHECKPOINT_KEY,
    RawTable,
    run,
    settings_for,
    subprocess_env,
)
from support.postgres_server import PostgresServer
from support.sample_job import job_ids

from infrastructure.application.ledger import Ledger
from infrastructure.storage.backends.schema import StoreNotSetUp
from infrastructure.storage.settings import PostgresStore, Settings, SQLiteStore

# Every test here starts from a store with no tables: that is what opening one sets up.
pytestmark = pytest.mark.empty_store

HANG_GUARD_SECONDS = 300
"""Far beyond what a `mace` command needs; only there so that a hang fails instead of blocking."""

READERS = [
    ["jobs"],
    ["verify", "--all"],
    ["events", "job-1"],
    ["sem", "get", "world/country/france/capital"],
    ["governance", "log"],
    ["receipts", "list"],
    ["memories", "list"],
    ["policy", "show"],
]


def table_count(settings: Settings) -> int:
    if isinstance(settings.parsed_store(), SQLiteStore):
        query = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'"
    else:
        query = "SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE schemaname = 'public'"
    return int(RawTable(settings).execute(query)[0][0])


def an_empty_store(settings: Settings) -> None:
    """The store exists (an empty SQLite file, a fresh database) and holds no tables."""
    store = settings.parsed_store()
    if isinstance(store, SQLiteStore):
        store.path.touch()
    assert table_count(settings) == 0


# --- readers never set up a store; `mace init` does, once ---------------------------------------


def test_readers_refuse_a_store_not_set_up_and_create_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    an_empty_store(cli_env)
    refusal = f"mace: NOT_FOUND: no ledger at {cli_env.parsed_store().describe()}: "
    for argv in READERS:
        code, out, err = run(capsys, *argv)
        assert (code, out, err.count("\n")) == (2, "", 1), argv
        assert err.startswith(refusal + "its tables are not set up (missing "), argv
        assert "run 'mace init'" in err, argv
    assert table_count(cli_env) == 0


def test_init_sets_up_the_store_once(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    an_empty_store(cli_env)
    first = run(capsys, "init")
    assert first[0] == 0
    assert first[1].startswith(f"ledger ready at {cli_env.parsed_store().describe()}: tables ")
    tables = table_count(cli_env)
    assert tables >= 3
    assert run(capsys, "init") == first
    assert table_count(cli_env) == tables
    assert run(capsys, "jobs", "--json") == (0, '{"jobs":[],"total":0}\n', "")


def test_the_first_writer_sets_up_the_store(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    an_empty_store(cli_env)
    assert run(capsys, "sem", "put", "world/country/france/capital", '"Paris"')[0] == 0
    code, out, _ = run(capsys, "sem", "get", "world/country/france/capital")
    assert code == 0 and '"Paris"' in out


def test_the_python_api_reader_refuses_too(settings: Settings) -> None:
    an_empty_store(settings)
    with pytest.raises(StoreNotSetUp, match="not set up"):
        Ledger.open(settings, create=False)
    assert table_count(settings) == 0


# --- many processes starting together -----------------------------------------------------------


def together(opens: list[Callable[[], None]]) -> list[str]:
    """Run each at the same instant in its own thread; the errors they raised, one line each."""
    start = threading.Barrier(len(opens))
    errors: list[str] = []

    def one(open_and_use: Callable[[], None]) -> None:
        start.wait()
        try:
            open_and_use()
        except Exception as exc:  # every failure is collected and shown, none swallowed
            errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0])

    threads = [threading.Thread(target=one, args=(o,)) for o in opens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_writers_setting_up_a_fresh_store_together_all_succeed(settings: Settings) -> None:
    def writer(n: int) -> Callable[[], None]:
        def write() -> None:
            with Ledger.open(settings) as ledger:
                ledger.sem.put(f"world/country/c{n}/capital", f"city {n}")

        return write

    assert together([writer(n) for n in range(8)]) == []
    with Ledger.open(settings, create=False) as ledger:
        assert [ledger.sem.get(f"world/country/c{n}/capital")[1].value for n in range(8)] == [
            f"city {n}" for n in range(8)
        ]


def test_readers_and_writers_opening_together_all_succeed(settings: Settings) -> None:
    Ledger.open(settings).close()

    def reader() -> None:
        with Ledger.open(settings, create=False) as ledger:
            job_ids(ledger)
            ledger.read_models.rows("job_index")

    def writer(n: int) -> Callable[[], None]:
        def write() -> None:
            with Ledger.open(settings) as ledger:
                ledger.jobs.run(f"{n} + 1", f"seed-{n}")

        return write

    assert together([reader] * 4 + [writer(n) for n in range(4)]) == []


def test_mace_processes_starting_together_on_a_fresh_database_all_succeed(
    postgres_url: str, tmp_path: Path
) -> None:
    env = subprocess_env(postgres_url, MACE_ACTOR="ana", MACE_ROLES="operator,admin")
    mace = str(Path(sys.executable).with_name("mace"))
    commands = [
        [mace, "sem", "put", f"world/country/c{n}/capital", f'"city {n}"'] for n in range(3)
    ]
    commands += [[mace, "run", f"{n} * 3", "--seed", f"s{n}"] for n in range(2)]
    commands += [[mace, "memories", "add", "--episode", "a note"]]
    started = [
        subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for argv in commands
    ]
    outcomes = [(p.wait(HANG_GUARD_SECONDS), p.stderr.read() if p.stderr else b"") for p in started]
    for process in started:
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert outcomes == [(0, b"")] * len(commands)
    with Ledger.open(settings_for(postgres_url), create=False) as ledger:
        assert len(job_ids(ledger)) == 2


# --- PostgreSQL: a wrong URL fails at once, in the server's words --------------------------------


def with_url(url: str, **parts: str | int) -> str:
    """``url`` with its password, port or database replaced."""
    split = urlsplit(url)
    user = split.username or ""
    password = str(parts.get("password", split.password or ""))
    port = parts.get("port", split.port)
    path = "/" + str(parts.get("dbname", split.path.lstrip("/")))
    return urlunsplit(
        split._replace(netloc=f"{user}:{password}@{split.hostname}:{port}", path=path)
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there once the socket is closed


WRONG_PASSWORD = "not-the-password-5f1e9c"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"dbname": "no_such_ledger"}, 'database "no_such_ledger" does not exist'),
        ({"password": WRONG_PASSWORD}, 'password authentication failed for user "'),
        ({"port": 0}, "Connection refused"),
    ],
    ids=["wrong database", "wrong password", "closed port"],
)
@pytest.mark.parametrize("argv", [["jobs"], ["sem", "put", "world/country/fr/capital", '"P"']])
def test_a_wrong_postgres_url_fails_with_the_servers_reason_and_no_password(
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, str | int],
    reason: str,
    argv: list[str],
) -> None:
    if change.get("port") == 0:
        change = {"port": closed_port()}
    url = with_url(postgres_server.url, **change)
    store = Settings(store=url).parsed_store()
    assert isinstance(store, PostgresStore)
    monkeypatch.setenv("MACE_STORE", url)
    keys = settings_for(url).signing_keys
    assert keys is not None
    monkeypatch.setenv("MACE_SIGNING_KEYS", keys.get_secret_value())
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(TEST_CHECKPOINT_KEY))
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert err.startswith(
        f"mace: STORE_UNAVAILABLE: store unavailable: cannot connect to {store.describe()}: "
    )
    assert f"{store.host}:{store.port}/{store.dbname}" in err
    assert reason in err
    assert postgres_server.password not in err
    assert WRONG_PASSWORD not in err
