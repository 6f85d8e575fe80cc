"""Where the read models live: one rows table beside eventsourcing's tracking table, per backend.

Each view class is one of eventsourcing's tracking recorders (SQLite or PostgreSQL) with a
``mace_read_models`` table added. `apply` writes a batch of row changes and the tracking record
of the last event they came from in one transaction, so a view is never ahead of or behind what
its tracking record says; a second writer applying the same events fails on the tracking record
and rolls back. Rows are stored as canonical JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from eventsourcing.persistence import Tracking
from eventsourcing.postgres import PostgresTrackingRecorder
from eventsourcing.sqlite import SQLiteTrackingRecorder
from psycopg.sql import SQL, Composed, Identifier

from domain.canonical import canonical_json
from projections.job_search import JobQuery, Replayability
from projections.read_model_rows import JOB_INDEX

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


class TableView(ReadModelView, Protocol):
    """The views as tables in the store's database, which SQL can search."""

    def job_rows(self, query: JobQuery, limit: int) -> list[tuple[str, Row]]:
        """At most ``limit`` job index rows after ``query.after``, in log position order, of
        the jobs `JobQuery.stored` asks for."""


@dataclass(frozen=True, slots=True)
class _Dialect:
    """How a backend reads a field of a row's JSON in SQL."""

    mark: str
    text: Callable[[str], str]
    position: str
    true: str


def _job_search(query: JobQuery, dialect: _Dialect, limit: int) -> tuple[str, list[Any]]:
    """The WHERE clause, ORDER BY and LIMIT of a job search, and its parameters: every value a
    parameter, every SQL fragment one of this function's own."""
    mark, text = dialect.mark, dialect.text
    where = [f"view = {mark}", f"{dialect.position} > {mark}"]
    params: list[Any] = [JOB_INDEX, query.after]
    if query.tenant is not None:
        where.append(f"{text('tenant')} = {mark}")
        params.append(query.tenant)
    stored = query.stored()
    if stored.job_prefix:
        where.append(f"substr({text('job_id')}, 1, {len(stored.job_prefix)}) = {mark}")
        params.append(stored.job_prefix)
    for value, sql in (
        (stored.status, f"{text('status')} = {mark}"),
        (stored.error_code, f"{text('replay_error')} = {mark}"),
        (stored.replayed_from, f"{text('replayed_at')} >= {mark}"),
        (stored.replayed_to, f"{text('replayed_at')} <= {mark}"),
    ):
        if value is not None:
            where.append(sql)
            params.append(value)
    if stored.replayable is Replayability.YES:
        where.append(f"{text('replayable')} = {dialect.true}")
    elif stored.replayable is Replayability.OPEN:
        where.append(f"{text('replayable')} IS NULL")
    clause = f"{' AND '.join(where)} ORDER BY {dialect.position} LIMIT {int(limit)}"
    return clause, params


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
        found = self._read(self.SELECT_ROW, (view, key))
        return None if not found else _loads(found[0][0])

    def rows(self, view: str) -> list[tuple[str, Row]]:
        return [(r[0], _loads(r[1])) for r in self._read(self.SELECT_ROWS, (view,))]

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        if not keys:
            return {}
        marks = ", ".join("?" * len(keys))
        query = f"SELECT row_key, row_json FROM {TABLE} WHERE view = ? AND row_key IN ({marks})"  # noqa: S608
        return {r[0]: _loads(r[1]) for r in self._read(query, (view, *keys))}

    def job_rows(self, query: JobQuery, limit: int) -> list[tuple[str, Row]]:
        clause, params = _job_search(query, _SQLITE, limit)
        statement = f"SELECT row_key, row_json FROM {TABLE} WHERE {clause}"  # noqa: S608
        return [(r[0], _loads(r[1])) for r in self._read(statement, params)]

    def _read(self, statement: str, params: Sequence[object]) -> list[Any]:
        """The rows of one statement, which reads one snapshot of the database alone: run as it
        is (autocommit), no ``BEGIN`` and ``ROLLBACK`` around it."""
        with self.datastore.get_connection(commit=False) as conn:
            cursor = conn.cursor()
            cursor.execute(statement, params)
            return list(cursor.fetchall())

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
        found = self._read(query.format(self.view_table), (view, key))
        return None if not found else _loads(found[0]["row_json"])

    def rows(self, view: str) -> list[tuple[str, Row]]:
        query = SQL("SELECT row_key, row_json FROM {0} WHERE view = %s ORDER BY row_key")
        found = self._read(query.format(self.view_table), (view,))
        return [(r["row_key"], _loads(r["row_json"])) for r in found]

    def rows_at(self, view: str, keys: Sequence[str]) -> dict[str, Row]:
        query = SQL("SELECT row_key, row_json FROM {0} WHERE view = %s AND row_key = ANY(%s)")
        found = self._read(query.format(self.view_table), (view, list(keys)))
        return {r["row_key"]: _loads(r["row_json"]) for r in found}

    def job_rows(self, query: JobQuery, limit: int) -> list[tuple[str, Row]]:
        clause, params = _job_search(query, _POSTGRES, limit)
        select = SQL("SELECT row_key, row_json FROM {0} WHERE ").format(self.view_table)
        found = self._read(select + SQL(clause), params)
        return [(r["row_key"], _loads(r["row_json"])) for r in found]

    def _read(self, statement: Composed, params: Sequence[object]) -> list[Any]:
        """The rows of one statement, which reads one snapshot of the database alone: sent on
        the pool's autocommit connection, no ``BEGIN`` and ``COMMIT`` around it."""
        with self.datastore.get_connection() as conn, conn.cursor() as cursor:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

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


_SQLITE = _Dialect(
    mark="?",
    text=lambda name: f"json_extract(row_json, '$.{name}')",
    position="json_extract(row_json, '$.position')",
    true="1",
)
_POSTGRES = _Dialect(
    mark="%s",
    text=lambda name: f"(row_json::jsonb ->> '{name}')",
    position="(row_json::jsonb ->> 'position')::bigint",
    true="'true'",
)


def _dumps(row: Row) -> str:
    return canonical_json(row).decode()


def _loads(text: str) -> Row:
    row = orjson.loads(text)
    assert isinstance(row, dict)
    return row
