"""Reads of where streams stand that a save or a replay needs beside the events themselves.

A save may depend on streams it read but does not write (a Stage-0 job's SEM reads): `unmoved`
checks, inside the save's own transaction and after its inserts, that each is still at the
version read, and makes the save conflict otherwise, as a write to that stream would. The check
is final only if no save writing one of those streams can commit between the check and this
save's commit, nor draw its notification ids before this save's and commit after the check.
SQLite gives one writer its lock at the first insert, so no other save runs meanwhile. PostgreSQL
saves run side by side (`postgres_recorder`): there every save first locks the streams it writes
(exclusive) and the streams `Unmoved.read` names (shared), so a save that read a stream and one
that writes it take turns, and the second one's notification ids follow the first one's commit.

`stream_positions` names each version's notification id: the place the ledger recorded it in
its one log, which checkpoints sign (a row moved in the log fails the checkpoint's tree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from eventsourcing.persistence import RecordConflictError

from infrastructure.storage.checkpoints.tables import AlsoWrite


@dataclass(frozen=True)
class Unmoved:
    """A save's check that the streams it read are still where it read them, made with the
    save's cursor (an `AlsoWrite`); ``read`` names them, for a store that locks them first."""

    read: Mapping[UUID, int]
    check: AlsoWrite

    def __call__(self, cursor: Any) -> None:
        self.check(cursor)


class StreamReads(Protocol):
    def unmoved(self, read: Mapping[UUID, int]) -> Unmoved:
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
