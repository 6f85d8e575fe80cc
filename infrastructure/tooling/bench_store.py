"""The store ``mace bench`` owns: made empty for one bench and removed when it ends, however.

The bench writes tens of thousands of events, and its figures only compare on an empty store, so
it never writes to the store ``MACE_STORE`` names: it makes its own where that store lives, on
the same disk or server, so that the figures are that store's.

- SQLite: a new folder (``.mace-bench-*``) beside ``MACE_STORE``'s file, holding the bench's
  database and whatever development keys it makes; the folder is removed at the end.
- PostgreSQL: a new schema (``mace_bench_*``) in ``MACE_STORE``'s database; it is dropped with
  everything in it at the end.

"At the end" is when the bench finishes, fails or is interrupted (Ctrl-C). A bench killed
outright (SIGKILL) leaves its folder or schema: nothing refuses it, since every bench makes a
new one, and it can be removed by hand.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from psycopg import sql

from infrastructure.application.settings import PostgresStore, Settings, SQLiteStore
from infrastructure.application.store_status import connect_postgres
from infrastructure.tooling.bench import BenchError

FOLDER_PREFIX = ".mace-bench-"
SCHEMA_PREFIX = "mace_bench_"


@contextmanager
def bench_store(settings: Settings) -> Iterator[Settings]:
    """``settings`` with a store of the bench's own in place of theirs (and no read store)."""
    location = settings.parsed_store()
    if isinstance(location, SQLiteStore):
        with _sqlite_folder(location) as folder:
            yield _on(settings, f"sqlite:///{folder / 'bench.db'}")
        return
    assert isinstance(location, PostgresStore)
    schema = SCHEMA_PREFIX + secrets.token_hex(6)
    name = sql.Identifier(schema)
    with connect_postgres(location) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(name))
    try:
        yield _on(settings, _with_schema(settings.store, schema))
    finally:
        with connect_postgres(location) as connection:
            connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(name))


@contextmanager
def _sqlite_folder(location: SQLiteStore) -> Iterator[Path]:
    beside = location.path.absolute().parent
    if not beside.is_dir():
        msg = f"cannot make the bench's store beside {location.path}: no folder {beside}"
        raise BenchError(msg)
    try:
        scratch = tempfile.TemporaryDirectory(prefix=FOLDER_PREFIX, dir=beside)
    except OSError as exc:
        msg = f"cannot make the bench's store beside {location.path}: {exc.strerror}"
        raise BenchError(msg) from None
    with scratch as folder:
        yield Path(folder)


def _on(settings: Settings, store: str) -> Settings:
    return settings.model_copy(update={"store": store, "read_store": None})


def _with_schema(url: str, schema: str) -> str:
    """``url`` (a postgresql:// store) naming ``schema`` in place of any it named."""
    parts = urlsplit(url)
    query = [(key, value) for key, value in parse_qsl(parts.query) if key != "schema"]
    return urlunsplit(parts._replace(query=urlencode([*query, ("schema", schema)])))
