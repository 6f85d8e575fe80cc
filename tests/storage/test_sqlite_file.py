"""A new SQLite store's file is switched to WAL by one opener at a time.

SQLite refuses a second connection switching a new file to WAL at the same moment with "database
is locked" at once, busy timeout or not; eventsourcing's pool switches on every connection it
makes, so writers setting up a fresh store together failed now and then (one run in seven).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path

import pytest
from eventsourcing.persistence import OperationalError
from support.ledger_fixtures import run

from domain.errors import StoreBusyError
from infrastructure.storage.backends.sqlite_file import use_write_ahead_log
from infrastructure.storage.settings import SQLiteStore

ROUNDS = 25
OPENERS = 8


def pool_connects(path: Path) -> None:
    """What eventsourcing's pool does with each connection it makes."""
    connection = sqlite3.connect(path, timeout=5, isolation_level=None)
    try:
        connection.execute("PRAGMA journal_mode=WAL;").fetchall()
    finally:
        connection.close()


def test_openers_of_a_new_file_all_succeed_and_leave_it_in_wal_mode(tmp_path: Path) -> None:
    errors: list[str] = []
    for round_ in range(ROUNDS):
        store = SQLiteStore(tmp_path / f"fresh-{round_}.db")
        start = threading.Barrier(OPENERS)

        def opener(store: SQLiteStore = store, start: threading.Barrier = start) -> None:
            start.wait()
            try:
                use_write_ahead_log(store)
                pool_connects(store.path)
            except Exception as exc:  # each failure is collected and shown
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=opener) for _ in range(OPENERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    assert errors == []


def test_a_file_held_locked_past_the_wait_is_store_busy_in_one_line(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "held.db")
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreBusyError) as raised:
            use_write_ahead_log(store, wait=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # The store's retry policy, with the wait as its time budget (`write_retries`).
    assert re.fullmatch(
        rf"sqlite:///{re.escape(str(store.path))} \(switching it to write-ahead logging\): other"
        r" writers kept it contended for \d+ attempts? in [0-9.]+ s; try again",
        str(raised.value),
    )


@pytest.mark.parametrize("kind", ["a text file", "a directory"])
def test_a_store_that_is_no_sqlite_file_is_refused_in_one_line_writing_nothing(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "mace.db"
    if kind == "a directory":
        target.mkdir()
    else:
        target.write_bytes(b"notes, not a ledger\n" * 50)
    before = target.read_bytes() if target.is_file() else None
    for name in ("MACE_SIGNING_KEYS", "MACE_ACTIVE_KEY_ID", "MACE_CHECKPOINT_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{target}")

    code, out, err = run(capsys, "sem", "put", "world/country/france/capital", '"Paris"')

    what = (
        "is a directory: name a database file in it"
        if kind == "a directory"
        else ("is not a SQLite database file")
    )
    expected = f"mace: INVALID_INPUT: MACE_STORE 'sqlite:///{target}' {what}\n"
    assert (code, out, err) == (2, "", expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mace.db"]  # no keyring, no key
    assert (target.read_bytes() if target.is_file() else None) == before


def test_a_store_file_that_cannot_be_opened_is_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "missing-directory" / "mace.db")
    unable = r"^sqlite:///.*mace\.db: unable to open database file$"
    with pytest.raises(OperationalError, match=unable):
        use_write_ahead_log(store)
