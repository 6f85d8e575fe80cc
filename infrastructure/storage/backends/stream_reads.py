"""Reads of where streams stand that a save or a replay needs beside the events themselves.

A save may depend on streams it read but does not write (a Stage-0 job's SEM reads): `unmoved`
checks, inside the save's own transaction and after its inserts, that each is still at the
version read, and makes the save conflict otherwise, as a write to that stream would. The check
is final because both stores serialise the ledger's saves: SQLite gives one writer its lock at
the first insert, and every PostgreSQL save first takes eventsourcing's ``LOCK TABLE ... IN
EXCLUSIVE MODE`` (`postgres_recorder`), so no other save can commit between the check and this
save's commit, and the notification order is that commit order. A store that stopped serialising
its saves would have to take this check into its own ordering.

`stream_positions` names each version's notification id: the place the ledger recorded it in
its one log, which checkpoints sign (a row moved in the log fails the checkpoint's tree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol
from uuid import UUID

from eventsourcing.persistence import RecordConflictError

from infrastructure.storage.checkpoints.tables import AlsoWrite


class StreamReads(Protocol):
    def unmoved(self, read: Mapping[UUID, int]) -> AlsoWrite:
        """The save's check that each stream of ``read`` is at the version given (0: none)."""

    def stream_positions(self, streams: Sequence[UUID]) -> dict[UUID, dict[int, int]]:
        """For each of ``streams``, the notification id of each of its versions."""

    def last_versions(self, streams: Sequence[UUID]) -> dict[UUID, int]:
        """The last stored version of each of ``streams`` that has any (nothing verified)."""


def conflict_if_moved(read: Mapping[UUID, int], found: Mapping[UUID, int]) -> None:
    """`RecordConflictError` when a stream of ``read`` is not at the version read (``found``:
    each stream's last stored version; a stream with none is absent)."""
    moved = sorted(str(s) for s, version in read.items() if found.get(s, 0) != version)
    if moved:
        msg = f"streams read by this save moved on since: {', '.join(moved)}"
        raise RecordConflictError(msg)
