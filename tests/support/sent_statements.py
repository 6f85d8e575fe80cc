"""Every statement a store's connections send while a block runs, as the client sent them.

SQLite: the statements each connection runs (``sqlite3.Connection.set_trace_callback``), the
``BEGIN``, ``COMMIT`` and ``ROLLBACK`` around them included. PostgreSQL: what libpq puts on the
wire (``PQtrace`` through ``psycopg``'s ``PGconn.trace``): each simple-protocol ``Query`` and
each ``Bind`` of an extended-protocol statement is one statement, so those psycopg sends of its
own (``BEGIN``, ``ROLLBACK``, ``DEALLOCATE ALL``) are counted with the ledger's. A connection is
traced while it is borrowed from the store's datastore (`get_connection`, which every read and
write of the ledger's recorders and tables goes through); connections opened beside the
datastore (an audit's or verify's own cursor) are not.
"""

from __future__ import annotations

import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from eventsourcing.postgres import PostgresDatastore
from eventsourcing.sqlite import SQLiteConnection, SQLiteDatastore

from infrastructure.storage.store import LedgerStore

_TRACE_FLAGS = 1  # PQTRACE_SUPPRESS_TIMESTAMPS: lines that read the same on every run
_MESSAGE = re.compile(r"^F\t\d+\t(Query|Parse|Bind)\t ?(.*)$")
# libpq writes names and texts between double quotes without escaping any in them: a statement
# name has none, a text is what lies between the quotes the message's other fields leave.
_QUERY = re.compile(r'^"(.*)"$')
_PARSE = re.compile(r'^"([^"]*)" "(.*)" \d+(?: \d+)*$')
_BIND = re.compile(r'^"[^"]*" "([^"]*)"')


def _wire_statements(trace: str, prepared: dict[str, str]) -> list[str]:
    """The statements a libpq trace shows sent: a ``Query``'s text, a ``Bind``'s statement
    (named: as it was ``Parse``d, in this trace or an earlier one of the connection)."""
    sent: list[str] = []
    parsed = ""  # the text of the unnamed statement a Bind without a name executes
    for line in trace.splitlines():
        found = _MESSAGE.match(line)
        if found is None:
            continue
        kind, rest = found.groups()
        if kind == "Query":
            sent.append(_field(_QUERY, rest)[0])
        elif kind == "Parse":
            name, text = _field(_PARSE, rest)
            if name:
                prepared[name] = text
            else:
                parsed = text
        else:
            (name,) = _field(_BIND, rest)
            sent.append(prepared.get(name, f"<prepared {name}>") if name else parsed)
    return sent


def _field(pattern: re.Pattern[str], rest: str) -> tuple[str, ...]:
    found = pattern.match(rest)
    assert found is not None, f"a libpq trace line not understood: {rest!r}"
    return found.groups()


@contextmanager
def sent_statements(store: LedgerStore) -> Iterator[list[str]]:
    """The statements ``store``'s datastore connections send while the block runs, in order."""
    datastore = store.recorder.datastore  # type: ignore[attr-defined]
    sent: list[str] = []
    original = datastore.get_connection
    if isinstance(datastore, SQLiteDatastore):
        wrapped: Callable[..., AbstractContextManager[Any]] = _traced_sqlite(original, sent)
    else:
        assert isinstance(datastore, PostgresDatastore)
        wrapped = _traced_postgres(original, sent)
    datastore.get_connection = wrapped
    try:
        yield sent
    finally:
        del datastore.get_connection  # the class's method again


def _traced_sqlite(
    original: Callable[..., AbstractContextManager[SQLiteConnection]], sent: list[str]
) -> Callable[..., AbstractContextManager[SQLiteConnection]]:
    @contextmanager
    def get_connection(**kwargs: Any) -> Iterator[SQLiteConnection]:
        with original(**kwargs) as conn:
            raw: sqlite3.Connection = conn._sqlite_conn
            raw.set_trace_callback(sent.append)
            try:
                yield conn
            finally:
                raw.set_trace_callback(None)

    return get_connection


def _traced_postgres(
    original: Callable[..., AbstractContextManager[Any]], sent: list[str]
) -> Callable[..., AbstractContextManager[Any]]:
    prepared: dict[int, dict[str, str]] = {}

    @contextmanager
    def get_connection(**kwargs: Any) -> Iterator[Any]:
        with original(**kwargs) as conn, tempfile.TemporaryFile("w+") as trace:
            pgconn = conn.pgconn
            # libpq writes through a stream of its own on the descriptor: a duplicate of it,
            # which that stream may keep (psycopg never closes it), is given.
            pgconn.trace(os.dup(trace.fileno()))
            pgconn.set_trace_flags(_TRACE_FLAGS)
            try:
                yield conn
            finally:
                pgconn.untrace()  # flushes libpq's stream
                trace.seek(0)
                names = prepared.setdefault(id(conn), {})
                names.update(_prepared_before(conn))
                sent.extend(_wire_statements(trace.read(), names))

    return get_connection


def _prepared_before(conn: Any) -> dict[str, str]:
    """The statements psycopg prepared on ``conn`` before it was traced (it prepares a query
    the fifth time a connection runs it), by name: a ``Bind`` of one shows only its name."""
    manager = conn._prepared  # psycopg's PrepareManager: (query, types) -> name
    return {name.decode(): query.decode() for (query, _), name in manager._names.items()}
