"""A store restored from an older backup, on SQLite (a copy of its file) and PostgreSQL (copies
of its checkpoint tables, and the newer events deleted): the rollback attack."""

from __future__ import annotations

import shutil
from pathlib import Path

from domain.checkpoint import CHECKPOINT_STREAM
from infrastructure.storage.checkpoints.tables import TABLES
from infrastructure.storage.settings import Settings, SQLiteStore
from support.ledger_fixtures import RawTable


def roll_back(settings: Settings, saved: Path, before: int, checkpoints: int) -> None:
    """Restore the store to the copy ``saved`` (SQLite), or undo everything after notification
    id ``before`` and checkpoint ``checkpoints`` by hand, head index restored (PostgreSQL)."""
    store = settings.parsed_store()
    if isinstance(store, SQLiteStore):
        shutil.copy(saved, store.path)
        return
    table = RawTable(settings)
    table.execute("DELETE FROM {table} WHERE notification_id > %s", (before,))
    assert table.execute(
        "SELECT max(originator_version) FROM {table} WHERE originator_id = %s",
        (CHECKPOINT_STREAM,),
    ) == [(checkpoints,)]
    for name in TABLES:
        table.execute(f"DELETE FROM {name}")
        table.execute(f"INSERT INTO {name} SELECT * FROM saved_{name}")


def save(settings: Settings, tmp_path: Path) -> tuple[Path, int]:
    """Back the store up (``tmp_path``/backup.db, or ``saved_`` tables); its head now."""
    store = settings.parsed_store()
    saved = tmp_path / "backup.db"
    if isinstance(store, SQLiteStore):
        shutil.copy(store.path, saved)
    else:
        table = RawTable(settings)
        for name in TABLES:
            table.execute(f"CREATE TABLE saved_{name} AS SELECT * FROM {name}")
    column = "rowid" if isinstance(store, SQLiteStore) else "notification_id"
    (head,) = RawTable(settings).execute(f"SELECT max({column}) FROM {{table}}")[0]
    return saved, int(head)
