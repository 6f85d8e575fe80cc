"""Verify the checkpoint chain against the log: `mace verify --all`'s tree pass.

Every checkpoint is checked as a stored event (its MAC and the stream's versions 1..n without a
gap, on read), as a signed statement (its number, key and Ed25519 signature: `Checkpoints.checked`)
and against the one before it (``previous`` is that one's digest; tree size and last notification
id never go back). Then the RFC 9162 tree is recomputed over the stored events in notification
order (the checkpoint stream's own events are no leaves), one page at a time in a `MerkleBuilder`
(memory O(log n)), from the leaves of the pass that checks every MAC (`log_pass`: the log is read
once), and at each checkpoint the events up to its last notification id must be exactly
``tree_size`` leaves with exactly its root. The first checkpoint that no longer holds is named with
the first log position (0-based leaf index) where the log differs from it: found exactly from the
leaves the checkpoint writer stored, when those still make the signed root; else narrowed to the
positions between the previous checkpoint and this one.

Events after the newest checkpoint are counted, not judged: nothing has signed them yet.

The tables derived from the log for proofs are held to it too: ``mace_log_nodes`` must hold every
node the recomputed tree completes below the newest checkpoint, byte for byte, and
``mace_log_leaves`` a position for each leaf it covers. Either one emptied or edited would make
every proof fail for good (``checkpoint prove``, bundles), though the log is intact; the first
such problem is reported only once the log itself holds (`TreeVerification.log_nodes`), and
``mace rebuild`` makes both again.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Generator, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint, LedgerCheckpoints, SignedCheckpoint
from domain.errors import IntegrityFailure
from domain.merkle import HASH_SIZE, CompletedLevels, MerkleBuilder, MerkleNode, leaf_hash
from domain.stream_heads import HeadsTree
from infrastructure.storage.checkpoints.chain import CheckpointedLog, Checkpoints
from infrastructure.storage.checkpoints.head_check import bucket_entries, disagrees
from infrastructure.storage.checkpoints.tables import CheckpointTables
from infrastructure.storage.verification.scan import Leaf, LeafPage, StoreReader

PAGE: Final = 500
"""Checkpoint events read per page: the chain is walked, never held whole."""
NODES_PER_READ: Final = 20_000
"""Stored log nodes compared per read of ``mace_log_nodes`` (a statement: a round trip)."""


@dataclass(frozen=True)
class TreeVerification:
    """What the tree pass found: how many checkpoints hold, and what they do not cover yet."""

    checkpoints: int
    newest: SignedCheckpoint | None
    not_yet_checkpointed: int
    log_nodes: IntegrityFailure | None = None
    """The first stored Merkle node that is not the log's (`_log_nodes_problem`): reported once
    the log itself is known to hold, since an altered log makes other nodes too."""


@dataclass(frozen=True)
class _Held:
    """A checkpoint that holds, with the recomputed tree's peaks at its size."""

    signed: SignedCheckpoint
    peaks: tuple[bytes, ...]


def verify_checkpoints(
    checkpoints: Checkpoints, reader: StoreReader, pages: Generator[LeafPage]
) -> TreeVerification:
    """Check every checkpoint's chain and signature, and that the log still makes its tree.

    ``pages`` are the log's leaves in notification order, every one of them (the checkpoints'
    own events left out): a checkpoint is not trusted to say where the log it covers ends. They
    are taken as the checks need them, to the last, which are counted; on a checkpoint that no
    longer holds they are closed, and its failure is raised.

    The chain is walked up to the newest checkpoint as read first: one written meanwhile is left
    for the next verify, like the events it covers.
    """
    with closing(pages):
        newest = checkpoints.newest()
        _check_head_index(checkpoints.tables, newest)
        log = _LeafFeed(pages)
        if newest is None:
            return TreeVerification(0, None, log.rest())
        last = newest.checkpoint
        held: _Held | None = None
        builder = MerkleBuilder()
        committed = _committed_at(reader)
        committed_before = 0
        nodes_problem: IntegrityFailure | None = None
        for event in _chain(checkpoints.store, last.number):
            signed = checkpoints.checked(event)
            _check_link(held, signed)
            body = signed.checkpoint
            # A row left below the checkpoint has no leaf (no topic or state): none can hold it.
            whole = log.feed(builder, body.last_notification_id)
            if not whole or builder.size != body.tree_size or builder.root().hex() != body.root:
                pages.close()  # its cursor ends before the search for the position reads again
                raise _broken(checkpoints, reader, held, signed)
            committed_before = _check_commit_order(signed, next(committed, 0), committed_before)
            since, completed = log.completed(builder)
            if nodes_problem is None:
                nodes_problem = _log_nodes_problem(reader, since, completed, body.number)
            held = _Held(signed, builder.peaks)
        assert held is not None and held.signed.checkpoint == last
        if nodes_problem is None:
            nodes_problem = _leaf_index_problem(checkpoints.tables, last)
        # Fed up to the newest checkpoint: every leaf left is after what it covers.
        not_yet = log.rest()
    return TreeVerification(last.number, newest, not_yet, nodes_problem)


class _LeafFeed:
    """The log's leaves, by pages, fed to a tree up to one checkpoint after another."""

    def __init__(self, pages: Iterator[LeafPage]) -> None:
        self._pages = pages
        self._page = LeafPage([], [])
        self._at = 0  # the next leaf of the page to feed
        self._since = 0  # the tree's size when the nodes in `_completed` began
        self._completed: CompletedLevels = {}

    def completed(self, builder: MerkleBuilder) -> tuple[int, CompletedLevels]:
        """The tree's nodes the leaves fed since the last call completed, by level
        (`MerkleBuilder.append_all`), and the tree's size before them: what ``mace_log_nodes``
        must hold."""
        done = (self._since, self._completed)
        self._since, self._completed = builder.size, {}
        return done

    def _append(self, builder: MerkleBuilder, leaves: Sequence[bytes]) -> None:
        builder.append_all(leaves, self._completed)

    def feed(self, builder: MerkleBuilder, through: int) -> bool:
        """Add every leaf up to notification id ``through``; False if one of them has none
        (a row without topic or state), where feeding stops."""
        while True:
            ids, hashes = self._page
            if self._at == len(ids):
                page = next(self._pages, None)
                if page is None:
                    return True
                self._page, self._at = page, 0
                continue
            end = bisect_right(ids, through, lo=self._at)
            chunk = hashes[self._at : end]
            if None in chunk:
                good = chunk.index(None)
                self._append(builder, chunk[:good])  # type: ignore[arg-type]  # None is past it
                self._at += good
                return False
            self._append(builder, chunk)  # type: ignore[arg-type]  # no None in it
            self._at = end
            if end < len(ids):
                return True

    def rest(self) -> int:
        """How many leaves are left unfed, read to the end of the log."""
        left = len(self._page.notification_ids) - self._at
        self._page, self._at = LeafPage([], []), 0
        return left + sum(len(page.notification_ids) for page in self._pages)


def _log_nodes_problem(
    reader: StoreReader, since: int, completed: CompletedLevels, number: int
) -> IntegrityFailure | None:
    """The stored Merkle nodes hold each node the log makes below checkpoint ``number``, which
    holds: proofs are made from them (``checkpoint prove``, bundles' inclusion proofs), so a
    node missing or altered would make them fail for good, though the log is intact. Nodes are
    derived, so the remedy is to make them again (``mace rebuild``). ``completed`` are the nodes
    the leaves from ``since`` on completed, by level; the first node that differs, in the order
    the tree completes them, is named."""
    # A level's nodes are a run of indices from ``since >> level``: read as one range a level,
    # a few levels a statement, and compared whole.
    reads: list[dict[int, tuple[int, list[bytes]]]] = [{}]
    held = 0
    for level, hashes in sorted(completed.items()):
        for at in range(0, len(hashes), NODES_PER_READ):
            run = hashes[at : at + NODES_PER_READ]
            if level in reads[-1] or held + len(run) > NODES_PER_READ:
                reads.append({})
                held = 0
            reads[-1][level] = ((since >> level) + at, run)
            held += len(run)
    first: tuple[tuple[int, int], MerkleNode, bytes | None] | None = None
    for read in reads:
        if not read:
            continue
        spans = {level: (start, start + len(run) - 1) for level, (start, run) in read.items()}
        # The key (level, idx) is unique, the rows come in its order: the stored hashes are the
        # nodes made, one for one, exactly when the two lists are equal.
        if reader.log_node_hashes(spans) == [hashed for _, run in read.values() for hashed in run]:
            continue
        stored = reader.log_nodes(spans)  # which node differs, read again on a failure only
        for level, (start, run) in read.items():
            if list(stored[level].values()) == run:
                continue
            for index, hashed in enumerate(run, start):
                found = stored[level].get(index)
                if found != hashed:
                    # The tree completes node (level, index) with leaf (index + 1) * 2**level,
                    # after the nodes below it that this leaf completes.
                    order = ((index + 1) << level, level)
                    if first is None or order < first[0]:
                        first = (order, (level, index, hashed), found)
                    break
    if first is None:
        return None
    _, (level, index, _), found = first
    state = "missing" if found is None else "altered"
    reason = (
        f"log node ({level}, {index}) below checkpoint {number} is {state}: the"
        " stored Merkle nodes no longer make the tree the log makes; 'mace rebuild'"
        " makes them again"
    )
    return IntegrityFailure(CHECKPOINT_STREAM, number, reason)


def _leaf_index_problem(tables: CheckpointTables, newest: Checkpoint) -> IntegrityFailure | None:
    """The leaf index (where each event's leaf is, for inclusion proofs) has a position for each
    leaf the newest checkpoint covers. What each row names is checked where it is used: a proof
    from a wrong one does not lead to the signed root."""
    held = tables.count_log_leaves(newest.tree_size)
    if held == newest.tree_size:
        return None
    reason = (
        f"the log's leaf index holds {held} of the {newest.tree_size} positions checkpoint"
        f" {newest.number} covers; 'mace rebuild' makes it again"
    )
    return IntegrityFailure(CHECKPOINT_STREAM, newest.number, reason)


def _chain(store: CheckpointedLog, through: int) -> Iterator[LedgerCheckpoints.Signed]:
    """Checkpoint events 1..``through`` in order, each MAC verified as it is read, by pages."""
    last = 0
    while last < through:
        page = list(
            store.verifying_store.get(CHECKPOINT_STREAM, gt=last or None, lte=through, limit=PAGE)
        )
        for event in page:
            assert isinstance(event, LedgerCheckpoints.Signed)
            yield event
        if not page:
            return
        last = page[-1].originator_version


def _committed_at(reader: StoreReader) -> Iterator[int]:
    """The notification ids of checkpoints 1, 2, ... in that order, by pages."""
    after = 0
    while page := reader.notification_ids(CHECKPOINT_STREAM, after, PAGE):
        yield from page
        after += len(page)


def _check_commit_order(signed: SignedCheckpoint, at: int, before: int) -> int:
    """A checkpoint is committed after the events it covers and after the checkpoint before
    it: rows moved in commit order say otherwise. Returns ``at``, its notification id."""
    body = signed.checkpoint
    if at <= body.last_notification_id or at <= before:
        reason = (
            f"checkpoint {body.number} sits at notification {at}, before what it covers"
            f" (up to {body.last_notification_id}) or the checkpoint before it ({before})"
        )
        raise IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)
    return at


def proven_heads(checkpoints: Checkpoints) -> tuple[SignedCheckpoint | None, dict[UUID, int]]:
    """The newest checkpoint (verified) and every stream's head it records, from the whole head
    index once it is proven to be that checkpoint's (`IntegrityFailure` otherwise): the streams
    an audit must find, each at least that long."""
    newest = checkpoints.newest()
    buckets = _check_head_index(checkpoints.tables, newest)
    return newest, {
        UUID(stream): head for stored in buckets.values() for stream, head in bucket_entries(stored)
    }


def _check_head_index(
    tables: CheckpointTables, newest: SignedCheckpoint | None
) -> Mapping[int, bytes]:
    """The whole head index is the newest checkpoint's: its buckets make ``heads_root`` and its
    nodes are exactly those the buckets make. Checkpoints deleted from the chain's end leave an
    index that belongs to none of those left (unless it was rolled back with them: only an
    exported checkpoint catches that). Returns the buckets' stored rows."""
    buckets, nodes = tables.head_index()
    if newest is None:
        if buckets or nodes:
            reason = "the head index holds streams, but no checkpoint is stored"
            raise IntegrityFailure(CHECKPOINT_STREAM, 1, reason)
        return buckets
    # A writer stores each bucket as the canonical JSON its leaf hashes, so the stored bytes
    # are hashed as they are: a row stored any other way makes another tree, and fails.
    leaves = {bucket: leaf_hash(stored) for bucket, stored in buckets.items()}
    try:
        rebuilt = HeadsTree(lambda level, index: None).update_leaves(leaves)
    except ValueError:
        raise disagrees(newest.checkpoint) from None
    if rebuilt.root.hex() != newest.checkpoint.heads_root or rebuilt.stored != nodes:
        raise disagrees(newest.checkpoint)
    return buckets


def _check_link(held: _Held | None, signed: SignedCheckpoint) -> None:
    """``signed`` goes on from the checkpoint before it (None: it must be the first)."""
    # Numbers need no check here: the stream's versions are contiguous from 1 (checked on
    # read) and each checkpoint holds its own version's number (`Checkpoints.checked`).
    body = signed.checkpoint
    number = body.number
    if held is None:
        if body.previous is not None:
            reason = "checkpoint 1 names a previous checkpoint"
            raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
        return
    before = held.signed.checkpoint
    if body.previous != before.digest():
        reason = f"checkpoint {number} does not name checkpoint {number - 1} as its previous"
        raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
    if body.tree_size < before.tree_size or body.last_notification_id < (
        before.last_notification_id
    ):
        reason = f"checkpoint {number} covers less of the log than checkpoint {number - 1}"
        raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)


def _broken(
    checkpoints: Checkpoints, reader: StoreReader, held: _Held | None, signed: SignedCheckpoint
) -> IntegrityFailure:
    """The failure of the first checkpoint that no longer holds, naming where the log differs.

    Positions before ``start`` (the tree of the checkpoint before, which held) are as signed.
    The leaves the writer stored for [start, end) are trusted once they, on top of that held
    tree, make this checkpoint's signed root; the first log leaf that differs from them is the
    position. Without such leaves the position is only known to lie in [start, end].
    """
    body = signed.checkpoint
    start = 0 if held is None else held.signed.checkpoint.tree_size
    end = body.tree_size
    signed_leaves = _signed_leaves(checkpoints, held, start, end, body.root)
    prefix = f"checkpoint {body.number} no longer holds: "
    if signed_leaves is None:
        since = (
            ""
            if held is None
            else f" (checkpoint {held.signed.checkpoint.number} holds those before)"
        )
        reason = (
            f"{prefix}the log differs from it at a position from {start} to {end}{since};"
            " its stored leaves do not make its root, so the exact position is unknown"
        )
        return IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)
    after = 0 if held is None else held.signed.checkpoint.last_notification_id
    with closing(reader.leaves(after, CHECKPOINT_STREAM)) as stored_leaves:  # stops early
        position, leaf = _first_difference(
            stored_leaves, signed_leaves, start, body.last_notification_id
        )
    located = None if leaf is None else reader.located(leaf.notification_id)
    if leaf is None or located is None:
        now = "the log now ends there"
    elif leaf.notification_id > body.last_notification_id:
        now = f"the log now has stream {located[0]} version {located[1]} there, committed after it"
    else:
        now = f"the log now has stream {located[0]} version {located[1]} there"
    reason = f"{prefix}the log differs from it first at position {position} ({now})"
    return IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)


def _signed_leaves(
    checkpoints: Checkpoints, held: _Held | None, start: int, end: int, root: str
) -> list[bytes] | None:
    """The stored leaves [start, end), if they are all there and make the signed ``root``."""
    stored = checkpoints.tables.log_nodes((0, index) for index in range(start, end))
    if len(stored) != end - start:
        return None
    builder = MerkleBuilder() if held is None else MerkleBuilder.resumed(start, held.peaks)
    leaves = [stored[(0, index)] for index in range(start, end)]
    for leaf in leaves:
        if len(leaf) != HASH_SIZE:
            return None
        builder.append(leaf)
    return leaves if builder.root().hex() == root else None


def _first_difference(
    log: Iterator[Leaf], signed: Sequence[bytes], start: int, through: int
) -> tuple[int, Leaf | None]:
    """The first position from ``start`` where the log's leaves (read from there on) and the
    signed ones part: a different leaf, a leaf the checkpoint did not have, or a missing one."""
    position = start
    for leaf in log:
        index = position - start
        if index == len(signed):
            # Every signed leaf matched: a further event committed up to the checkpoint is one
            # inserted below it; one committed after it is no difference.
            return (position, leaf) if leaf.notification_id <= through else (position, None)
        if leaf.hash != signed[index] or leaf.notification_id > through:
            return position, leaf
        position += 1
    return position, None
