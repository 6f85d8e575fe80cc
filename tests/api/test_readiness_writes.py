"""``/readyz`` is not ready when the store cannot take writes (issue 28, point 4), on SQLite and
PostgreSQL: a PostgreSQL database whose sessions are read-only (``default_transaction_read_only``,
as a standby's are), a SQLite file or folder that may not be written.

The store is made read-only under a running service, as an operator's change or a failover would:
on PostgreSQL the sessions the service held are cut (a failover cuts them too), and it reconnects
by itself. A process running as root writes through file modes, so the SQLite file is made
immutable (``chattr +i``), which root cannot write either; where the filesystem has no such flag
the SQLite case is skipped. A full disk is a real one: a small tmpfs filled with a file (root only).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql
from support.api_support import Api, assert_error, checked_client
from support.ledger_fixtures import settings_for, store_of

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import PostgresStore, SQLiteStore, parse_store
from infrastructure.tooling.load_server import ServiceProcess, make_token

NOT_WRITABLE = "not ready: the store cannot take writes"


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``path`` no process may write, root included, for the block."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("no chattr here")
    made = subprocess.run([chattr, "+i", str(path)], capture_output=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"this filesystem has no immutable flag: {made.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", str(path)], check=True)


@contextmanager
def read_only_database(store: PostgresStore, url: str) -> Iterator[None]:
    """Every new session of the store's database read-only, and the open ones cut (as a
    failover to a standby would cut them), for the block."""
    with psycopg.connect(url, autocommit=True) as admin:
        _sessions_read_only(admin, store.dbname, "SET default_transaction_read_only = on")
    try:
        yield
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SET default_transaction_read_only = off")  # this session only
            _sessions_read_only(admin, store.dbname, "RESET default_transaction_read_only")


def _sessions_read_only(
    admin: psycopg.Connection[tuple[object, ...]], dbname: str, change: str
) -> None:
    """Change the database's sessions' default and cut the open ones, which keep the old."""
    name = sql.Identifier(dbname)
    admin.execute(sql.SQL("ALTER DATABASE {} ").format(name) + sql.SQL(change))
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
        " WHERE datname = %s AND pid <> pg_backend_pid()",
        (dbname,),
    )


@contextmanager
def cannot_write(store_url: str, target: str) -> Iterator[None]:
    """The store at ``store_url`` unwritable for the block: ``target`` is ``file`` or ``folder``
    for SQLite (either stands for the database on PostgreSQL)."""
    store = parse_store(store_url)
    if isinstance(store, PostgresStore):
        with read_only_database(store, store_url):
            yield
        return
    assert isinstance(store, SQLiteStore)
    with immutable(sqlite_target(store.path, target)):
        yield


def sqlite_target(path: Path, target: str) -> Path:
    """The store's file, its folder, or its ``-shm`` file (made empty if SQLite has none)."""
    if target == "folder":
        return path.parent
    if target == "shm":
        shm = path.with_name(path.name + "-shm")
        shm.touch()
        return shm
    return path


@pytest.mark.parametrize("target", ["file", "folder", "shm"])
def test_a_store_that_cannot_take_writes_is_not_ready(store_url: str, target: str) -> None:
    settings = settings_for(store_url)
    if target != "file" and store_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL store has no files of ours")
    with (
        Ledger.open(settings, checkpoint_on_close=False) as ledger,
        checked_client(settings, ledger) as client,
    ):
        api = Api(client, ledger)
        api.new_job()
        assert api.get("/readyz", None).json() == {"status": "ready"}
        with cannot_write(store_url, target):
            assert_error(api.get("/readyz", None), 503, "NOT_READY", NOT_WRITABLE)
            reason = assert_error(api.get("/readyz", "admin"), 503, "NOT_READY")
            assert "read-only" in reason, reason
            if store_url.startswith("postgresql"):
                # The server refuses the write; on SQLite the connection open before still
                # appends to its write-ahead log, which the file itself can never take in.
                head = api.position()
                refused = api.post("/v1/jobs", {"input": "4 + 4", "seed": "ro"})
                assert_error(refused, 503, "STORE_UNAVAILABLE")
                assert api.position() == head
        # Writable again: ready again, in the same process, without a restart.
        assert api.get("/readyz", None).json() == {"status": "ready"}
        api.new_job("5 + 5")


def test_mace_serve_on_a_store_with_an_unwritable_shm_file_says_so_and_never_dies_silently(
    tmp_path: Path,
) -> None:
    """The SQLite ``-shm`` file is SQLite's shared memory, mapped into the process: one it may not
    write is said at start (a warning line) and by ``/readyz``; and a fatal signal (SIGBUS, sent
    here as a mapped file cut short raises it) leaves a line in the log before the process dies
    of it."""
    settings = settings_for(f"sqlite:///{tmp_path / 'mace.db'}")
    with Ledger.open(settings):
        pass  # the store, as `mace init` makes it
    make_token(tmp_path / "tokens.json")
    log = tmp_path / "serve.log"
    shm = sqlite_target(tmp_path / "mace.db", "shm")
    with immutable(shm), ServiceProcess(settings, tmp_path / "tokens.json", log) as service:
        service.start(probe="/healthz")
        with httpx.Client(base_url=service.base_url, timeout=60) as client:
            assert_error(client.get("/readyz"), 503, "NOT_READY", NOT_WRITABLE)
        process = service.process
        assert process is not None
        process.send_signal(signal.SIGBUS)
        assert process.wait(timeout=60) == -signal.SIGBUS
    lines = log.read_text().splitlines()
    assert f"mace: warning: the store cannot take writes: {shm} is read-only:" in "\n".join(lines)
    assert "Fatal Python error: Bus error" in lines


@contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """A filesystem of its own of ``size`` (tmpfs) at ``folder`` for the block: a disk that can
    really fill up. Needs root (the suite runs as root on its machines); skipped elsewhere."""
    folder.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small filesystem here: {made.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path, leave: int) -> Path:
    """A file taking the disk's free space down to ``leave`` bytes (0: full)."""
    filler = folder / "filler"
    with filler.open("ab") as out:
        while (free := shutil.disk_usage(folder).free) > leave:
            out.write(b"\0" * min(free - leave, 1 << 20))
            out.flush()
    return filler


def test_a_sqlite_store_on_a_full_disk_is_not_ready_and_loses_nothing(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "40m") as disk:
        settings = settings_for(f"sqlite:///{disk / 'mace.db'}")
        with (
            Ledger.open(settings, checkpoint_on_close=False) as ledger,
            checked_client(settings, ledger) as client,
        ):
            api = Api(client, ledger)
            kept = api.new_job()
            assert api.get("/readyz", None).json() == {"status": "ready"}
            filler = fill(disk, 8 << 20)  # room left, but less than a write may need
            assert_error(api.get("/readyz", None), 503, "NOT_READY", NOT_WRITABLE)
            reason = assert_error(api.get("/readyz", "admin"), 503, "NOT_READY")
            assert "bytes free" in reason, reason
            fill(disk, 0)  # no room at all: a write is refused, and nothing half-written
            head = api.position()
            refused = api.post("/v1/jobs", {"input": "4 + 4", "seed": "full"})
            assert_error(refused, 503, "STORE_UNAVAILABLE")
            assert api.position() == head
            filler.unlink()
            assert api.get("/readyz", None).json() == {"status": "ready"}
            api.new_job("5 + 5")
            assert api.get(f"/v1/jobs/{kept}", "operator").status_code == 200
            assert store_of(ledger).verify_all().events == api.position()
