"""No read of a stream shows it shorter than the newest checkpoint says it was (issue 15 point 4).

Every read of a stream's events goes through the ledger's recorders (`HeadCheckedReads`), so every
use case is covered by this one check: a read that shows a stream's end (a whole read, a read from
a version on, the newest version) must reach the head the newest checkpoint records for it, or
`min(head, lte)` for a read up to a version. A stream deleted whole shows nothing and fails too.
Events after the newest checkpoint are not covered yet and never block a read.

The head is proven, not trusted: the stream's bucket row and its path of `BUCKET_BITS` sibling
nodes are read (one transaction), and the root they make must be the newest checkpoint's
``heads_root`` (`domain.stream_heads`), so an edited, deleted or rolled-back index row fails
closed too. That is one checkpoint, one indexed read and `BUCKET_BITS` + 1 hashes per bucket,
whatever the ledger's size, both reused for a second (`CACHE_SECONDS`). A read that cannot show
the end (an ascending read that filled its ``limit``) needs no head and costs nothing more.

A process that keeps proving paths against one checkpoint (a writer: each stream it creates
lands in a random one of 65,536 buckets) proves the whole index once instead (`WholeIndex`):
every bucket row read by one statement, each leaf hashed from the row's stored bytes and the root
recomputed from those leaves alone, no stored node trusted. Sound for every bucket at once,
empty ones included: a writer stores a bucket as the canonical JSON its leaf hashes and stores
no row for an empty bucket, so a root equal to ``heads_root`` means (hashes being collision
resistant) that each row holds exactly its bucket's entries and that each absent row is an empty
bucket; a row deleted, added, edited or rolled back changes the root, and the proof fails closed
(`disagrees`) as a path's does. A bucket's head is then a look-up in the rows read. It is bought
as a ski rental is: only once the paths already read cost about what the whole proof would
(`WholeIndex.cost_in_paths`, from the rows a cheap count finds), and never for an index larger
than `WHOLE_INDEX_BYTES`, so a process that reads a few streams never pays it and one that reads
many pays at most about twice the cheaper of the two.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from uuid import UUID

import orjson
from eventsourcing.persistence import StoredEvent

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint
from domain.errors import IntegrityFailure
from domain.merkle import leaf_hash
from domain.stream_heads import (
    BUCKET_BITS,
    HeadEntry,
    HeadsTree,
    Position,
    bucket_leaf,
    bucket_of,
    default_node,
    head_in,
    path_positions,
    root_from_path,
)
from infrastructure.storage.checkpoints.tables import CheckpointTables

STREAMS_PER_QUERY: Final = 500
"""Streams `HeadCheckedReads.select_streams` reads in one statement (SQLite allows 32,766
parameters a statement; a few hundred keep a statement small on both stores)."""

PATHS_PER_READ: Final = 32
"""Buckets whose paths one read of the head index fetches (a statement of about a thousand
parameters: 16 nodes a path, the top ones shared)."""

CACHE_SECONDS: Final = 1.0
"""How long a process reuses the newest checkpoint it read (its MAC and signature checked), and
the buckets it proved against it: a replay reads some twenty streams, each would otherwise
cost an index read.

Sound because a proven bucket is a fact about a signed checkpoint, whatever happens to the rows
afterwards, and a stale checkpoint only makes the check weaker for that long, never wrong: its
heads are lower bounds of the newest one's, and reads started after it was committed see every
event it counts. A bucket not yet proven is read from the index, which always belongs to the
newest checkpoint (it moves in its transaction): a newer checkpoint no longer matches the cached
one, and the newest is read again at once. So a process may miss, for at most this long, a
truncation of events that only a checkpoint newer than its own covers."""

ATTEMPTS: Final = 4
"""Reads of the index before it is declared edited: a checkpoint committed between reading the
checkpoint and its index (or between the index's two statements, under PostgreSQL's read
committed) makes one read disagree; the check re-reads while the newest checkpoint moves on."""

WHOLE_INDEX_AFTER: Final = 8
"""Paths a process proves against one checkpoint before it counts the index's rows to price
proving it whole (`WholeIndex`): a process that reads a few streams never counts."""

WHOLE_INDEX_BYTES: Final = 16 << 20
"""The stored bytes of bucket rows a process holds to look heads up in (`WholeIndex`): some
400,000 streams. A larger index is proven a path at a time, as before."""

EMPTY_ROOT: Final = default_node(BUCKET_BITS)
"""The head index before the first checkpoint: every bucket empty."""


def bucket_entries(stored: bytes | None) -> list[HeadEntry]:
    """A stored bucket row's entries (its leaf is recomputed from them, so nothing is trusted)."""
    if stored is None:
        return []
    try:
        return [(str(stream), int(version)) for stream, version in orjson.loads(stored)]
    except (orjson.JSONDecodeError, TypeError, ValueError):
        raise IntegrityFailure(CHECKPOINT_STREAM, 0, "a head index row is not a bucket") from None


def path_root(bucket: int, entries: Sequence[HeadEntry], nodes: Mapping[Position, bytes]) -> bytes:
    """The head index root that `bucket`'s entries and the stored nodes on its path make; an
    entry list or node no writer would store fails closed."""
    try:
        siblings = [nodes.get(p, default_node(p[0])) for p in path_positions(bucket)]
        return root_from_path(bucket, bucket_leaf(entries), siblings)
    except ValueError as bad:
        reason = f"a head index row is malformed: {bad}"
        raise IntegrityFailure(CHECKPOINT_STREAM, 0, reason) from None


def disagrees(checkpoint: Checkpoint) -> IntegrityFailure:
    """The failure of an index whose rows do not make the checkpoint's ``heads_root``."""
    reason = f"the head index disagrees with checkpoint {checkpoint.number}"
    return IntegrityFailure(CHECKPOINT_STREAM, checkpoint.number, reason)


@dataclass(frozen=True)
class ProvenHead:
    """A stream's head as the newest checkpoint records it (0: no event of it checkpointed)."""

    version: int
    checkpoint: Checkpoint | None

    def shortfall(self, read: StreamRead) -> IntegrityFailure | None:
        """Why ``read`` shows the stream shorter than this head; None if it does not."""
        required = self.version if read.lte is None else min(self.version, read.lte)
        return self.short_of(read.stream, read.reached, required)

    def short_of(
        self, stream: UUID, reached: int, required: int | None = None
    ) -> IntegrityFailure | None:
        """Why a reader that shows ``stream`` up to version ``reached`` (0: none of it) shows it
        shorter than this head (or ``required``, a lower bound of it); None if it does not."""
        if reached >= (self.version if required is None else required):
            return None
        assert self.checkpoint is not None  # a head above 0 was proven by one
        return ShortOfCheckpoint(stream, reached, self.version, self.checkpoint.number)


class ShortOfCheckpoint(IntegrityFailure):
    """A stream the store holds ``held`` events of, where checkpoint ``checkpoint`` records
    ``head``: events were deleted below it. Kept apart so that a reader can name what was
    deleted (a replay: the snapshot it lacks) with the checkpoint as the proof."""

    def __init__(self, stream: UUID | str, held: int, head: int, checkpoint: int) -> None:
        shown = f"ends at version {held}" if held else "holds none of it"
        reason = (
            f"truncated below checkpoint {checkpoint}, which records the stream's head at"
            f" version {head}; the store {shown}"
        )
        super().__init__(stream, held + 1, reason)
        self.held = held
        self.head = head
        self.checkpoint = checkpoint

    def __reduce__(self) -> tuple[type[ShortOfCheckpoint], tuple[str, int, int, int]]:  # type: ignore[override]
        return type(self), (self.stream, self.held, self.head, self.checkpoint)


PATH_HASHES: Final = 120
"""Hashes of a whole index's proof that cost about what proving one path does (a statement of
sixteen node look-ups, a bucket parsed and hashed): measured on SQLite, 0.11-0.16 ms a path
against 0.9-1.7 us a hash of the whole proof, the reading of its rows included."""


@dataclass(frozen=True)
class WholeIndex:
    """Every bucket row of the head index, proven together against one checkpoint: a bucket
    without a row is empty (the module's docstring says why that is sound)."""

    rows: Mapping[int, bytes]

    @classmethod
    def proven(cls, rows: Mapping[int, bytes], root: str) -> WholeIndex | None:
        """The index of these rows if their leaves alone make ``root``; None if they do not."""
        # A writer stores each bucket as the canonical JSON its leaf hashes: the stored bytes
        # are hashed as they are, and a row stored any other way makes another root.
        leaves = {bucket: leaf_hash(stored) for bucket, stored in rows.items()}
        try:
            made = HeadsTree(lambda level, index: None).update_leaves(leaves).root
        except ValueError:  # a bucket number no tree has
            return None
        return cls(rows) if made.hex() == root else None

    @staticmethod
    def cost_in_paths(rows: int) -> int:
        """About how many paths' proofs it costs to prove an index of ``rows`` bucket rows
        whole: its hashes (a leaf a row, and each node above one, at most every node of a
        level) over `PATH_HASHES`."""
        nodes = sum(min(rows, 1 << (BUCKET_BITS - level)) for level in range(1, BUCKET_BITS + 1))
        return -(-(rows + nodes) // PATH_HASHES)

    def entries(self, bucket: int) -> list[HeadEntry]:
        return bucket_entries(self.rows.get(bucket))


@dataclass
class _Newest:
    """The newest checkpoint as read at ``at``, and what is proven against it since: buckets
    a path at a time (``paths`` of them so far), or the ``whole`` index."""

    at: float
    checkpoint: Checkpoint | None
    proven: dict[int, list[HeadEntry]] = field(default_factory=dict)
    whole: WholeIndex | None = None
    paths: int = 0
    whole_after: int | None = None
    """Paths proven after which the whole index is (None: not priced yet; `HeadCheck._due`)."""

    def unproven(self, wanted: set[int]) -> list[int]:
        return [] if self.whole is not None else sorted(wanted - self.proven.keys())

    def entries(self, bucket: int) -> list[HeadEntry]:
        whole = self.whole
        return self.proven[bucket] if whole is None else whole.entries(bucket)


class HeadCheck:
    """Proves a stream's checkpointed head from the index, and holds reads against it."""

    def __init__(
        self,
        newest: Callable[[], Checkpoint | None],
        tables: CheckpointTables,
        exempt: frozenset[UUID] = frozenset(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.exempt = exempt | {CHECKPOINT_STREAM}
        self._read_newest = newest
        self._tables = tables
        self._clock = clock
        self._newest: _Newest | None = None

    def forget(self) -> None:
        """Read the newest checkpoint again at the next read (this process just wrote one)."""
        self._newest = None

    def _current(self, *, fresh: bool = False) -> _Newest:
        now = self._clock()
        newest = self._newest
        if fresh or newest is None or now - newest.at > CACHE_SECONDS:
            checkpoint = self._read_newest()
            # What is proven against the checkpoint read again stays proven: a proof is a fact
            # about a signed checkpoint, and an idle process's next read would otherwise prove
            # every path it needs again, for each checkpoint it reads (every second).
            if newest is not None and newest.checkpoint == checkpoint:
                newest.at = now
            else:
                newest = _Newest(now, checkpoint)
                self._newest = newest
        return newest

    def head(self, stream: UUID) -> ProvenHead:
        return self.heads([stream])[stream]

    def heads(self, streams: Sequence[UUID]) -> dict[UUID, ProvenHead]:
        """Each stream's head; the buckets not proven yet are proven together, in one read."""
        buckets = {stream: bucket_of(stream) for stream in streams}
        newest = self._prove(self._current(), set(buckets.values()))
        return {
            stream: ProvenHead(head_in(newest.entries(bucket), stream), newest.checkpoint)
            for stream, bucket in buckets.items()
        }

    def _prove(self, newest: _Newest, wanted: set[int]) -> _Newest:
        """``newest``, or a newer checkpoint read since, with each wanted bucket proven against
        it: the bucket's entries and the stored nodes on its path make its ``heads_root``, or
        the whole index's rows do (`WholeIndex`)."""
        fresh = False
        for _ in range(ATTEMPTS):
            unproven = newest.unproven(wanted)
            if not unproven:
                return newest
            checkpoint = newest.checkpoint
            expected = EMPTY_ROOT.hex() if checkpoint is None else checkpoint.heads_root
            if self._due(newest, len(unproven)):
                whole = WholeIndex.proven(self._tables.head_buckets(), expected)
                if whole is not None:
                    # The buckets proven by their paths stay (at most about a full tree's
                    # `cost_in_paths` of them): another thread may be looking one up.
                    newest.whole = whole
                    return newest
            else:
                entries = self._entries_if_proven(unproven, expected)
                if entries is not None:
                    newest.proven.update(entries)
                    newest.paths += len(entries)
                    return newest
            again = self._current(fresh=True)
            if fresh and _number(again.checkpoint) == _number(checkpoint):
                break
            newest, fresh = again, True
        if newest.checkpoint is None:
            reason = "the head index holds streams, but no checkpoint is stored"
            raise IntegrityFailure(CHECKPOINT_STREAM, 0, reason)
        raise disagrees(newest.checkpoint)

    def _due(self, newest: _Newest, wanted: int) -> bool:
        """Whether proving ``wanted`` more paths would bring those proven against ``newest`` to
        what proving the whole index costs: then it is proven whole instead. Priced once a
        checkpoint, by a count of the index's rows, after `WHOLE_INDEX_AFTER` paths."""
        spent = newest.paths + wanted
        if spent < WHOLE_INDEX_AFTER:
            return False
        if newest.whole_after is None:
            rows, size = self._tables.head_index_size()
            held = size <= WHOLE_INDEX_BYTES
            newest.whole_after = WholeIndex.cost_in_paths(rows) if held else sys.maxsize
        return spent >= newest.whole_after

    def _entries_if_proven(
        self, buckets: Sequence[int], root: str
    ) -> dict[int, list[HeadEntry]] | None:
        """The buckets' entries if each one's path makes ``root``; None at the first that does
        not."""
        entries: dict[int, list[HeadEntry]] = {}
        for start in range(0, len(buckets), PATHS_PER_READ):
            group = buckets[start : start + PATHS_PER_READ]
            stored, nodes = self._tables.head_paths(
                group, {p for bucket in group for p in path_positions(bucket)}
            )
            for bucket in group:
                entries[bucket] = bucket_entries(stored.get(bucket))
                if path_root(bucket, entries[bucket], nodes).hex() != root:
                    return None
        return entries

    def proven_for(self, read: StreamRead) -> ProvenHead | None:
        """The head to hold ``read`` against; None when the read does not show the end."""
        return self.head(read.stream) if read.shows_end else None


@dataclass(frozen=True)
class StreamRead:
    """A read of one stream's events (eventsourcing's ``select_events``) and what it returned."""

    stream: UUID
    gt: int | None
    lte: int | None
    desc: bool
    limit: int | None
    events: Sequence[StoredEvent]

    @property
    def shows_end(self) -> bool:
        """Whether the read shows where the stream ends (below ``lte``): an ascending read that
        filled its ``limit`` shows only a beginning."""
        return self.desc or self.limit is None or len(self.events) < self.limit

    @property
    def reached(self) -> int:
        """The highest version the read shows the stream to hold (``gt`` when it found none)."""
        if not self.events:
            return self.gt or 0
        return self.events[0 if self.desc else -1].originator_version


class HeadCheckedReads:
    """A recorder mixin: every ``select_events`` of a stream is held against its proven head
    (`HeadCheck`), but for the checkpoints' own and the ``exempt`` ones. None (no checkpoint key,
    a bundle in memory): no check.

    A read that falls short is made once more before it fails: a checkpoint committed after the
    read began may cover events the read could not see yet (PostgreSQL's read committed), and
    the second read starts after the head was proven, so it sees everything the head counts.
    """

    head_check: HeadCheck | None = None

    def select_events(self, originator_id: UUID | str, **kwargs: Any) -> Sequence[StoredEvent]:
        events: Sequence[StoredEvent] = super().select_events(  # type: ignore[misc]
            originator_id, **kwargs
        )
        check = self.head_check
        stream = originator_id if isinstance(originator_id, UUID) else UUID(originator_id)
        if check is None or stream in check.exempt:
            return events
        read = _read(stream, kwargs, events)
        proven = check.proven_for(read)
        if proven is None or proven.shortfall(read) is None:
            return events
        events = super().select_events(originator_id, **kwargs)  # type: ignore[misc]
        failure = proven.shortfall(_read(stream, kwargs, events))
        if failure is not None:
            raise failure
        return events

    def select_streams(self, streams: Sequence[UUID]) -> dict[UUID, Sequence[StoredEvent]]:
        """Every event of each of ``streams`` (none: an empty list), in one query per
        `STREAMS_PER_QUERY`, each held against its proven head as a whole read of it is: a
        stream that falls short is read again alone (`select_events`), and fails there.

        A replay reads a score of small streams (snapshots, governance records); one round trip
        for all of them instead of one each is most of its time on PostgreSQL."""
        found: dict[UUID, Sequence[StoredEvent]] = {}
        for start in range(0, len(streams), STREAMS_PER_QUERY):
            # The recorder this is mixed into reads them: the stored events of the streams that
            # have any, each stream's in version order.
            chunk = streams[start : start + STREAMS_PER_QUERY]
            found.update(self._select_streams(chunk))  # type: ignore[attr-defined]
        check = self.head_check
        heads = {} if check is None else check.heads([s for s in streams if s not in check.exempt])
        answer: dict[UUID, Sequence[StoredEvent]] = {}
        for stream in streams:
            events = found.get(stream, [])
            whole = StreamRead(stream, None, None, False, None, events)
            if stream in heads and heads[stream].shortfall(whole) is not None:
                events = self.select_events(stream)
            answer[stream] = events
        return answer


def _read(stream: UUID, kwargs: Mapping[str, Any], events: Sequence[StoredEvent]) -> StreamRead:
    return StreamRead(
        stream,
        kwargs.get("gt"),
        kwargs.get("lte"),
        kwargs.get("desc", False),
        kwargs.get("limit"),
        events,
    )


def _number(checkpoint: Checkpoint | None) -> int:
    return 0 if checkpoint is None else checkpoint.number
