"""Where the read models live: one rows table beside eventsourcing's tracking table, per backend.

Each view class is one of eventsourcing's tracking recorders (SQLite or PostgreSQL) with a
``mace_read_models`` table added. `apply` writes a batch of row changes and the tracking record
of the last event they came from in one transaction, so a view is never ahead of or behind what
its tracking record says; a second writer applying the same events fails on the tracking record
and rolls back. Rows are stored as canonical JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson
from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder
from psycopg.sql import SQL, Identifier

from domain.canonical import canonical_json

TABLE = "mace_read_models"
Row = dict[str, Any]
Changes = Mapping[tuple[str, str], Row | None]


class ReadModelView(Protocol):
    def table_names(self) -> tuple[str, ...]:
        """The tables the view keeps: its tracking table and the rows table."""

    def create_table(self) -> None: ...

    def max_tracking_id(self, application_name: str) -> int | None: ...

    def row(self, view: str, key: str) -> Row | None:
        """The row under ``key`` in ``view``, or None."""

    def rows(self, view: str) -> list[tuple[str, Row]]:
        """Every row of ``view`` as ``(key, row)``, in key order."""

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        """The rows of ``view`` under those of ``keys`` that have one (exact keys: no collation
        orders them)."""

    def apply(self, changes: Changes, tracking: Tracking) -> None:
        """Write the changes and the tracking record in one transaction."""

    def reset(self, application_name: str) -> None:
        """Empty every view and forget how far the log was applied (for a rebuild)."""


class SQLiteReadModelView(SQLiteTrackingRecorder):
    CREATE = (
        "CREATE TABLE IF NOT EXISTS mace_read_models (view TEXT NOT NULL, row_key TEXT NOT NULL,"
        " row_json TEXT NOT NULL, PRIMARY KEY (view, row_key)) WITHOUT ROWID"
    )
    SELECT_ROW = "SELECT row_json FROM mace_read_models WHERE view = ? AND row_key = ?"
    SELECT_ROWS = "SELECT row_key, row_json FROM mace_read_models WHERE view = ? ORDER BY row_key"
    DELETE_ROW = "DELETE FROM mace_read_models WHERE view = ? AND row_key = ?"
    UPSERT_ROW = (
        "INSERT INTO mace_read_models (view, row_key, row_json) VALUES (?, ?, ?)"
        " ON CONFLICT (view, row_key) DO UPDATE SET row_json = excluded.row_json"
    )

    def construct_create_table_statements(self) -> list[str]:
        return [*super().construct_create_table_statements(), self.CREATE]

    def table_names(self) -> tuple[str, ...]:
        return ("tracking", TABLE)  # eventsourcing's SQLite tracking table has a fixed name

    def row(self, view: str, key: str) -> Row | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.SELECT_ROW, (view, key))
            found = c.fetchone()
        return None if found is None else _loads(found[0])

    def rows(self, view: str) -> list[tuple[str, Row]]:
        with self.datastore.transaction(commit=False) as c:
            c.execute(self.SELECT_ROWS, (view,))
            return [(r[0], _loads(r[1])) for r in c.fetchall()]

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        if not keys:
            return {}
        marks = ", ".join("?" * len(keys))
        query = f"SELECT row_key, row_json FROM {TABLE} WHERE view = ? AND row_key IN ({marks})"  # noqa: S608
        with self.datastore.transaction(commit=False) as c:
            c.execute(query, (view, *keys))
            return {r[0]: _loads(r[1]) for r in c.fetchall()}

    def apply(self, changes: Changes, tracking: Tracking) -> None:
        with self.datastore.transaction(commit=True) as c:
            for (view, key), row in changes.items():
                if row is None:
                    c.execute(self.DELETE_ROW, (view, key))
                else:
                    c.execute(self.UPSERT_ROW, (view, key, _dumps(row)))
            self._insert_tracking(c, tracking)

    def reset(self, application_name: str) -> None:
        with self.datastore.transaction(commit=True) as c:
            c.execute("DELETE FROM mace_read_models")
            c.execute("DELETE FROM tracking WHERE application_name = ?", (application_name,))


class PostgresReadModelView(PostgresTrackingRecorder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.view_table = SQL("{0}.{1}").format(
            Identifier(self.datastore.schema), Identifier(TABLE)
        )
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {0} (view text NOT NULL, row_key text NOT NULL,"
                " row_json text NOT NULL, PRIMARY KEY (view, row_key))"
            ).format(self.view_table)
        )

    def table_names(self) -> tuple[str, ...]:
        return (self.tracking_table_name, TABLE)

    def row(self, view: str, key: str) -> Row | None:
        query = SQL("SELECT row_json FROM {0} WHERE view = %s AND row_key = %s")
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(query.format(self.view_table), (view, key))
            found = curs.fetchone()
        return None if found is None else _loads(found["row_json"])

    def rows(self, view: str) -> list[tuple[str, Row]]:
        query = SQL("SELECT row_key, row_json FROM {0} WHERE view = %s ORDER BY row_key")
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(query.format(self.view_table), (view,))
            return [(r["row_key"], _loads(r["row_json"])) for r in curs.fetchall()]

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        query = SQL("SELECT row_key, row_json FROM {0} WHERE view = %s AND row_key = ANY(%s)")
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(query.format(self.view_table), (view, list(keys)))
            return {r["row_key"]: _loads(r["row_json"]) for r in curs.fetchall()}

    def apply(self, changes: Changes, tracking: Tracking) -> None:
        delete = SQL("DELETE FROM {0} WHERE view = %s AND row_key = %s").format(self.view_table)
        upsert = SQL(
            "INSERT INTO {0} (view, row_key, row_json) VALUES (%s, %s, %s)"
            " ON CONFLICT (view, row_key) DO UPDATE SET row_json = excluded.row_json"
        ).format(self.view_table)
        with self.datastore.transaction(commit=True) as curs:
            for (view, key), row in changes.items():
                if row is None:
                    curs.execute(delete, (view, key))
                else:
                    curs.execute(upsert, (view, key, _dumps(row)))
            self._insert_tracking(curs, tracking)

    def reset(self, application_name: str) -> None:
        tracking = SQL("{0}.{1}").format(
            Identifier(self.datastore.schema), Identifier(self.tracking_table_name)
        )
        with self.datastore.transaction(commit=True) as curs:
            curs.execute(SQL("DELETE FROM {0}").format(self.view_table))
            curs.execute(
                SQL("DELETE FROM {0} WHERE application_name = %s").format(tracking),
                (application_name,),
            )


def _dumps(row: Row) -> str:
    return canonical_json(row).decode()


def _loads(text: str) -> Row:
    row = orjson.loads(text)
    assert isinstance(row, dict)
    return row
