"""The tables a checkpoint keeps beside the events: the log's Merkle nodes and the stream heads.

``mace_log_nodes`` holds every complete subtree of the tree over the events (level 0: the leaves),
so inclusion and consistency proofs take O(log n) look-ups; the rows are a pure function of the
log, written as they complete, and checked against a signed root before any proof is trusted.
``mace_log_leaves`` maps each leaf position to the event it hashes (stream, version), so that the
proof of one event starts with one indexed look-up, not a count of the events before it.
``mace_head_buckets`` and ``mace_head_nodes`` are the head index (`domain.stream_heads`) as of
the newest checkpoint; they change with it, in the checkpoint's own transaction
(`insert_events_with`), so the index never runs ahead of or behind the checkpoint it is bound to.
``mace_cosignatures`` keeps the witnesses' cosignature lines (tlog-cosignature) of a checkpoint's
note, by tree size and root, with the URL of the witness that answered them: the size a witness
last cosigned is where the next consistency proof to it starts.
Rows anyone with database access can edit are never trusted: every use recomputes a root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, StoredEvent
from eventsourcing.postgres import PostgresDatastore
from psycopg.sql import SQL, Composable, Identifier

AlsoWrite = Callable[[Any], None]
"""Writes made with a save's cursor, inside its transaction."""

LOG_NODES: Final = "mace_log_nodes"
LOG_LEAVES: Final = "mace_log_leaves"
HEAD_BUCKETS: Final = "mace_head_buckets"
HEAD_NODES: Final = "mace_head_nodes"
COSIGNATURES: Final = "mace_cosignatures"
TABLES: Final = (LOG_NODES, LOG_LEAVES, HEAD_BUCKETS, HEAD_NODES, COSIGNATURES)

Position = tuple[int, int]  # (level, index) of a tree node
EventKey = tuple[UUID, int]  # (originator id, version) of a stored event


class SavesWithIndex(Protocol):
    """The ledger's recorders: a save can carry more writes in its transaction."""

    def insert_events_with(
        self, stored_events: Sequence[StoredEvent], also: AlsoWrite | None
    ) -> Sequence[int]: ...


class CheckpointTables:
    """Reads and writes of the checkpoint tables, in the store's own SQL dialect."""

    def __init__(self, recorder: ApplicationRecorder) -> None:
        self.recorder = recorder
        datastore = getattr(recorder, "datastore", None)
        self.postgres = isinstance(datastore, PostgresDatastore)
        self._datastore: Any = datastore
        self._mark = "%s" if self.postgres else "?"
        self._blob = "bytea" if self.postgres else "BLOB"

    def _name(self, table: str) -> Composable:
        if self.postgres:
            return SQL("{}.{}").format(Identifier(self._datastore.schema), Identifier(table))
        return Identifier(table)

    def _sql(self, text: str, **tables: str) -> Any:
        """``text`` with ``{table}`` names quoted and ``?`` as the dialect's parameter mark."""
        statement = SQL(text.replace("?", self._mark)).format(
            **{key: self._name(name) for key, name in tables.items()}
        )
        # SQLite takes plain strings; psycopg's own composition renders the identifiers.
        return statement if self.postgres else statement.as_string(None)

    # Set-up

    def create(self) -> None:
        statements = [
            f"CREATE TABLE IF NOT EXISTS {{t}} (level INTEGER NOT NULL, idx BIGINT NOT NULL,"
            f" hash {self._blob} NOT NULL, PRIMARY KEY (level, idx))",
            "CREATE TABLE IF NOT EXISTS {leaves} (position BIGINT PRIMARY KEY, originator_id TEXT"
            " NOT NULL, originator_version BIGINT NOT NULL,"
            " UNIQUE (originator_id, originator_version))",
            f"CREATE TABLE IF NOT EXISTS {{b}} (bucket INTEGER PRIMARY KEY,"
            f" entries {self._blob} NOT NULL)",
            f"CREATE TABLE IF NOT EXISTS {{h}} (level INTEGER NOT NULL, idx BIGINT NOT NULL,"
            f" hash {self._blob} NOT NULL, PRIMARY KEY (level, idx))",
            f"CREATE TABLE IF NOT EXISTS {{c}} (tree_size BIGINT NOT NULL, root {self._blob} NOT"
            " NULL, witness TEXT NOT NULL, line TEXT NOT NULL,"
            " PRIMARY KEY (tree_size, root, witness, line))",
        ]
        tables = {"t": LOG_NODES, "leaves": LOG_LEAVES, "b": HEAD_BUCKETS, "h": HEAD_NODES}
        with self._datastore.transaction(commit=True) as cursor:
            for text in statements:
                cursor.execute(self._sql(text, **tables, c=COSIGNATURES))

    # The log's nodes

    def add_log_nodes(self, nodes: Sequence[tuple[int, int, bytes]]) -> None:
        """Store complete subtrees; one already stored (by a racing writer) is left as it is."""
        if not nodes:
            return
        statement = self._sql(
            "INSERT INTO {t} (level, idx, hash) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            t=LOG_NODES,
        )
        with self._datastore.transaction(commit=True) as cursor:
            cursor.executemany(statement, [(level, idx, h) for level, idx, h in nodes])

    def log_nodes(self, positions: Iterable[Position]) -> dict[Position, bytes]:
        return self._nodes(LOG_NODES, positions)

    def log_level(self, level: int, below: int) -> dict[int, bytes]:
        """The stored nodes of ``level`` with an index under ``below``, by index (tiles read a
        level at a time: one range scan, not a look-up per node)."""
        statement = self._sql("SELECT idx, hash FROM {t} WHERE level = ? AND idx < ?", t=LOG_NODES)
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [level, below])
            return {row["idx"]: bytes(row["hash"]) for row in cursor.fetchall()}

    def clear_log(self) -> None:
        """Empty the log's nodes and leaf index, to make them again from the log (a rebuild)."""
        with self._datastore.transaction(commit=True) as cursor:
            for table in (LOG_NODES, LOG_LEAVES):
                cursor.execute(self._sql("DELETE FROM {t}", t=table))

    # Cosignatures

    def add_cosignatures(
        self, tree_size: int, root: bytes, witness: str, lines: Sequence[str]
    ) -> None:
        """Keep ``witness``'s cosignature lines of the checkpoint note of ``tree_size`` and
        ``root``; a line kept already stays as it is."""
        statement = self._sql(
            "INSERT INTO {c} (tree_size, root, witness, line) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            c=COSIGNATURES,
        )
        with self._datastore.transaction(commit=True) as cursor:
            cursor.executemany(statement, [(tree_size, root, witness, line) for line in lines])

    def cosignatures(self, tree_size: int, root: bytes) -> list[str]:
        """The cosignature lines kept for the note of ``tree_size`` and ``root``, in order."""
        statement = self._sql(
            "SELECT line FROM {c} WHERE tree_size = ? AND root = ? ORDER BY witness, line",
            c=COSIGNATURES,
        )
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [tree_size, root])
            return [row["line"] for row in cursor.fetchall()]

    def witnessed_size(self, witness: str) -> int:
        """The largest tree size ``witness`` cosigned for this store (0: none kept)."""
        statement = self._sql(
            "SELECT max(tree_size) AS size FROM {c} WHERE witness = ?", c=COSIGNATURES
        )
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [witness])
            row = cursor.fetchone()
        return 0 if row is None or row["size"] is None else int(row["size"])

    # The log's leaves

    def add_log_leaves(self, leaves: Sequence[tuple[int, EventKey]]) -> None:
        """Store which event each leaf position hashes; like nodes, a pure function of the log."""
        if not leaves:
            return
        statement = self._sql(
            "INSERT INTO {leaves} (position, originator_id, originator_version) VALUES (?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            leaves=LOG_LEAVES,
        )
        rows = [(position, str(stream), version) for position, (stream, version) in leaves]
        with self._datastore.transaction(commit=True) as cursor:
            cursor.executemany(statement, rows)

    def count_log_leaves(self, below: int) -> int:
        """How many leaf positions under ``below`` the leaf index holds."""
        statement = self._sql(
            "SELECT count(*) AS n FROM {leaves} WHERE position < ?", leaves=LOG_LEAVES
        )
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, [below])
            return int(cursor.fetchone()["n"])

    def leaf_positions(self, events: Iterable[EventKey]) -> dict[EventKey, int]:
        """The leaf positions of those of ``events`` that a checkpoint writer has reached."""
        wanted = sorted(set(events))
        found: dict[EventKey, int] = {}
        for chunk in _chunks(wanted, 400):
            pairs = _any_pair("originator_id", "originator_version", len(chunk))
            statement = self._sql(
                # Only parameter marks are formatted in: the values are bound.
                "SELECT position, originator_id, originator_version FROM {leaves} WHERE"  # noqa: S608
                f" {pairs}",
                leaves=LOG_LEAVES,
            )
            with self._datastore.transaction(commit=False) as cursor:
                cursor.execute(statement, [v for s, n in chunk for v in (str(s), n)])
                found.update(
                    ((UUID(row["originator_id"]), row["originator_version"]), row["position"])
                    for row in cursor.fetchall()
                )
        return found

    # The head index

    def head_nodes(self, positions: Iterable[Position]) -> dict[Position, bytes]:
        return self._nodes(HEAD_NODES, positions)

    def buckets(self, buckets: Iterable[int]) -> dict[int, bytes]:
        """The stored entries (canonical JSON) of the buckets that have a row."""
        with self._datastore.transaction(commit=False) as cursor:
            return self._select_buckets(cursor, buckets)

    def head_index(self) -> tuple[dict[int, bytes], dict[Position, bytes]]:
        """The whole head index, read in one transaction: every bucket row and every node."""
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(self._sql("SELECT bucket, entries FROM {b}", b=HEAD_BUCKETS))
            buckets = {row["bucket"]: bytes(row["entries"]) for row in cursor.fetchall()}
            cursor.execute(self._sql("SELECT level, idx, hash FROM {h}", h=HEAD_NODES))
            nodes = {(row["level"], row["idx"]): bytes(row["hash"]) for row in cursor.fetchall()}
        return buckets, nodes

    def head_index_size(self) -> tuple[int, int]:
        """The head index's bucket rows: how many, and their stored bytes together."""
        statement = self._sql(
            "SELECT count(*) AS n, coalesce(sum(length(entries)), 0) AS size FROM {b}",
            b=HEAD_BUCKETS,
        )
        (row,) = self._rows(statement, [])
        return int(row["n"]), int(row["size"])

    def head_buckets(self) -> dict[int, bytes]:
        """Every bucket row of the head index (its stored entries), read by one statement."""
        statement = self._sql("SELECT bucket, entries FROM {b}", b=HEAD_BUCKETS)
        return {row["bucket"]: bytes(row["entries"]) for row in self._rows(statement, [])}

    def head_paths(
        self, buckets: Sequence[int], positions: Iterable[Position]
    ) -> tuple[dict[int, bytes], dict[Position, bytes]]:
        """The buckets' entries (those with a row) and the head nodes at ``positions``, read by
        one statement: one snapshot of both tables, and on PostgreSQL one round trip instead of
        a transaction's four. Callers keep it to a few dozen buckets' paths."""
        wanted, pairs = sorted(set(buckets)), sorted(set(positions))
        marks = ", ".join("?" * len(wanted))
        statement = self._sql(
            # Only parameter marks are formatted in: the values are bound.
            "SELECT 0 AS kind, bucket AS a, 0 AS b, entries AS data FROM {b}"  # noqa: S608
            f" WHERE bucket IN ({marks}) UNION ALL SELECT 1, level, idx, hash FROM {{h}}"
            f" WHERE {_any_pair('level', 'idx', len(pairs))}",
            b=HEAD_BUCKETS,
            h=HEAD_NODES,
        )
        entries: dict[int, bytes] = {}
        nodes: dict[Position, bytes] = {}
        for row in self._rows(statement, [*wanted, *(value for pair in pairs for value in pair)]):
            if row["kind"] == 0:
                entries[row["a"]] = bytes(row["data"])
            else:
                nodes[(row["a"], row["b"])] = bytes(row["data"])
        return entries, nodes

    def heads_writer(
        self,
        buckets: Mapping[int, bytes],
        nodes: Mapping[Position, bytes],
        cleared: Iterable[Position] = (),
    ) -> AlsoWrite:
        """The writes that move the head index to a new checkpoint, for its save's transaction."""
        upsert_bucket = self._sql(
            "INSERT INTO {b} (bucket, entries) VALUES (?, ?)"
            " ON CONFLICT (bucket) DO UPDATE SET entries = excluded.entries",
            b=HEAD_BUCKETS,
        )
        upsert_node = self._sql(
            "INSERT INTO {h} (level, idx, hash) VALUES (?, ?, ?)"
            " ON CONFLICT (level, idx) DO UPDATE SET hash = excluded.hash",
            h=HEAD_NODES,
        )
        delete_node = self._sql("DELETE FROM {h} WHERE level = ? AND idx = ?", h=HEAD_NODES)
        removed = sorted(cleared)

        def write(cursor: Any) -> None:
            if buckets:
                cursor.executemany(upsert_bucket, sorted(buckets.items()))
            if nodes:
                cursor.executemany(
                    upsert_node, [(lv, ix, h) for (lv, ix), h in sorted(nodes.items())]
                )
            if removed:
                cursor.executemany(delete_node, removed)

        return write

    # Shared

    def _nodes(self, table: str, positions: Iterable[Position]) -> dict[Position, bytes]:
        with self._datastore.transaction(commit=False) as cursor:
            return self._select_nodes(cursor, table, sorted(set(positions)))

    def _rows(self, statement: Any, parameters: Sequence[object]) -> list[Any]:
        """The rows of one statement, which reads one snapshot alone: no transaction around it."""
        if self.postgres:
            with self._datastore.get_connection() as connection, connection.cursor() as cursor:
                # Prepared: planning a head path's sixteen look-ups costs more than running them.
                cursor.execute(statement, parameters, prepare=True)
                return list(cursor.fetchall())
        with self._datastore.transaction(commit=False) as cursor:
            cursor.execute(statement, parameters)
            return list(cursor.fetchall())

    def _select_buckets(self, cursor: Any, buckets: Iterable[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        for chunk in _chunks(sorted(set(buckets)), 500):
            marks = ", ".join("?" * len(chunk))
            statement = self._sql(
                # Only parameter marks are formatted in: the values are bound.
                f"SELECT bucket, entries FROM {{b}} WHERE bucket IN ({marks})",  # noqa: S608
                b=HEAD_BUCKETS,
            )
            cursor.execute(statement, chunk)
            found.update((row["bucket"], bytes(row["entries"])) for row in cursor.fetchall())
        return found

    def _select_nodes(
        self, cursor: Any, table: str, positions: Sequence[Position]
    ) -> dict[Position, bytes]:
        found: dict[Position, bytes] = {}
        for chunk in _chunks(list(positions), 400):
            pairs = _any_pair("level", "idx", len(chunk))
            statement = self._sql(
                f"SELECT level, idx, hash FROM {{t}} WHERE {pairs}",  # noqa: S608
                t=table,
            )
            cursor.execute(statement, [value for pair in chunk for value in pair])
            found.update(
                ((row["level"], row["idx"]), bytes(row["hash"])) for row in cursor.fetchall()
            )
        return found


def _any_pair(first: str, second: str, count: int) -> str:
    """A condition matching any of ``count`` bound (first, second) pairs, one index look-up
    each: SQLite scans the whole table for a row-value IN list instead."""
    return " OR ".join([f"({first} = ? AND {second} = ?)"] * count)


def _chunks(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
