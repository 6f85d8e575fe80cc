"""Writing and reading the ledger's signed checkpoints (`domain.checkpoint`).

A checkpoint is written after the events it covers are committed, never in their transaction:
recording never waits for one, and there is no row every writer must update. The writer reads
the events after the newest checkpoint in notification order, checks each one's MAC and that
every stream goes on from where the newest checkpoint left it, extends the Merkle tree from the
newest checkpoint's peaks, moves the head index on, and saves the next checkpoint with the head
index rows in one transaction. Two writers racing for the same number collide on the checkpoint
stream's version: one wins, the other starts again from the winner's, so the chain never forks.
A writer covers at most `WINDOW` events per checkpoint (its memory is bounded) and writes as
many as it takes to catch up.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol
from uuid import UUID

from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    Mapper,
    Notification,
    RecordConflictError,
    StoredEvent,
)

from domain.canonical import canonical_json
from domain.checkpoint import (
    CHECKPOINT_STREAM,
    Checkpoint,
    LedgerCheckpoints,
    SignedCheckpoint,
    decoded,
    leaf_data,
)
from domain.errors import IntegrityFailure
from domain.merkle import MerkleBuilder, MerkleNode, leaf_hash
from domain.stream_heads import (
    HeadEntry,
    HeadsTree,
    HeadsTreeUpdate,
    bucket_of,
    head_in,
    merge_heads,
    path_positions,
)
from infrastructure.storage.checkpoints.head_check import bucket_entries, disagrees, path_root
from infrastructure.storage.checkpoints.tables import (
    AlsoWrite,
    CheckpointTables,
    EventKey,
    Position,
)
from infrastructure.storage.keys.checkpoint_key import CheckpointKey, PublicCheckpointKey
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.records.event_store import VerifyingEventStore
from infrastructure.storage.records.key_checks import KeyMismatch
from infrastructure.storage.records.signed_record import verify_record
from infrastructure.storage.write_retries import RetryPolicy


class CheckpointedLog(Protocol):
    """What the checkpoint chain needs of the log it signs (`LedgerStore` is one)."""

    @property
    def recorder(self) -> ApplicationRecorder: ...

    @property
    def keyring(self) -> Keyring: ...

    @property
    def mapper(self) -> Mapper[UUID]: ...

    @property
    def verifying_store(self) -> VerifyingEventStore: ...

    @property
    def retries(self) -> RetryPolicy: ...

    def insert_records(self, records: Sequence[StoredEvent], also: AlsoWrite | None = None) -> None:
        """Store signed records as they are, with ``also``'s writes in the same transaction."""

    def checkpoint_saved(self) -> None:
        """A checkpoint was saved: reads are held to it from now on."""


PAGE: Final = 1000
WINDOW: Final = 50_000
"""At most this many events per checkpoint: a writer catching up holds one window's heads."""
NODE_BATCH: Final = 5000

Entries = list[HeadEntry]


class CheckpointKeyMismatch(KeyMismatch):
    """The configured checkpoint key is not the one the store's checkpoints are signed with.

    A configuration error like a wrong HMAC key (KEY_MISMATCH), never tampering: the key id a
    checkpoint names is read from its event once the event's MAC holds, so it is the ledger's own
    statement of which key signed it, and only the configured key differs from it.
    """

    def __init__(self, key: CheckpointKey, stored_key_id: str) -> None:
        Exception.__init__(
            self,
            f"{key.source} (key id {key.key_id}) is not the key this store's checkpoints are"
            f" signed with (key id {stored_key_id}): configure the store's checkpoint key, or"
            " after a rotation list the earlier key's public key in MACE_CHECKPOINT_RETIRED_KEYS",
        )
        self.key_id = key.key_id


def signature_problem(signed: SignedCheckpoint, key: PublicCheckpointKey) -> str | None:
    """Why ``signed`` is not a checkpoint signed by ``key`` (None: it is). The one check for the
    ledger's own checkpoints, exported files and bundles."""
    body = signed.checkpoint
    if signed.key_id != key.key_id:
        return f"checkpoint {body.number} is signed by key {signed.key_id}, not by key {key.key_id}"
    if not key.verify(body.signed_bytes(), signed.signature):
        return f"checkpoint {body.number}: the Ed25519 signature does not verify"
    return None


@dataclass
class _Window:
    """What a writer read after the newest checkpoint: the tree extended, the heads moved on."""

    builder: MerkleBuilder
    last_notification_id: int
    events: int = 0
    complete: bool = False  # every committed event read (else the window filled up)
    heads: dict[UUID, int] = field(default_factory=dict)
    firsts: dict[UUID, int] = field(default_factory=dict)


@dataclass
class _LogRows:
    """The log's nodes and leaf positions a pass over the log makes, stored in batches."""

    tables: CheckpointTables
    nodes: list[MerkleNode] = field(default_factory=list)
    leaves: list[tuple[int, EventKey]] = field(default_factory=list)

    def add(self, builder: MerkleBuilder, notification: Notification, leaf: bytes) -> None:
        """Append the event's leaf to the tree, keeping where it is and the nodes it completed."""
        event = (_uuid(notification.originator_id), notification.originator_version)
        self.leaves.append((builder.size, event))
        self.nodes.extend(builder.append(leaf))

    def store(self, *, at_least: int = 0) -> None:
        """Store what was kept, once it is ``at_least`` that many nodes."""
        if len(self.nodes) >= at_least:
            self.tables.add_log_nodes(self.nodes)
            self.tables.add_log_leaves(self.leaves)
            self.nodes, self.leaves = [], []


@dataclass(frozen=True)
class Written:
    """What `Checkpoints.write` did: the newest checkpoint now, and how many it wrote."""

    newest: SignedCheckpoint
    written: int


class Checkpoints:
    def __init__(self, store: CheckpointedLog, key: CheckpointKey) -> None:
        self.store = store
        self.key = key
        self.tables = CheckpointTables(store.recorder)

    # Reading

    def newest(self) -> SignedCheckpoint | None:
        """The newest checkpoint, its MAC and signature checked; None before the first."""
        last = self._newest_event()
        return None if last is None else self.checked(last)

    def prove_key(self) -> None:
        """`CheckpointKeyMismatch` unless the newest checkpoint (its MAC checked) names the
        configured key or a retired one: what a process proves at open, as it proves its HMAC
        keys."""
        last = self._newest_event()
        if last is not None and self.key.verifier(last.key_id) is None:
            raise CheckpointKeyMismatch(self.key, last.key_id)

    def _newest_event(self) -> LedgerCheckpoints.Signed | None:
        last = next(self.store.verifying_store.get(CHECKPOINT_STREAM, desc=True, limit=1), None)
        assert last is None or isinstance(last, LedgerCheckpoints.Signed)
        return last

    def checked(self, event: LedgerCheckpoints.Signed) -> SignedCheckpoint:
        """The checkpoint a verified checkpoint event holds, once its number and signature hold;
        one signed under a key id that is neither the configured key's nor a retired key's is
        `CheckpointKeyMismatch`."""
        number = event.originator_version
        signed = SignedCheckpoint(event.checkpoint, event.key_id, decoded(event.signature))
        if event.checkpoint.number != number:
            reason = f"holds checkpoint number {event.checkpoint.number}, not {number}"
            raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
        # A retired key (rotated away, `load_checkpoint_key`) still checks what it signed.
        key = self.key.verifier(signed.key_id)
        if key is None:
            raise CheckpointKeyMismatch(self.key, signed.key_id)
        problem = signature_problem(signed, key)
        if problem is not None:
            raise IntegrityFailure(CHECKPOINT_STREAM, number, problem)
        return signed

    # Writing

    def write(self) -> Written:
        """Checkpoint every event committed so far (none yet: an empty first checkpoint).

        A writer that lost the race for the next number goes on from the winner's checkpoint,
        after the store's retry pause, within its budget (`write_retries`)."""
        written = 0
        retries = self.store.retries.start("checkpoint: the next checkpoint number")
        while True:
            newest = self.newest()
            try:
                window = self._read_window(newest)
                if newest is not None and window.events == 0:
                    return Written(newest, written)
                rows, update = self._moved_heads(newest, window)
            except IntegrityFailure:
                # The reads are not one snapshot: head index rows committed with a newer
                # checkpoint meanwhile disagree with the one read. Only a failure that holds
                # against an unchanged newest checkpoint is the store's.
                if _number(self.newest()) == _number(newest):
                    raise
                retries.lost()
                continue
            signed = self._sign(newest, window, update.root)
            try:
                self._save(signed, self.tables.heads_writer(rows, update.stored, update.cleared))
            except (IntegrityError, RecordConflictError):
                if _number(self.newest()) == _number(newest):
                    raise  # no other writer took the number: no race, the store refused it
                retries.lost()  # another writer took the number: go on from its checkpoint
                continue
            written += 1
            if window.complete:
                return Written(signed, written)

    def _read_window(self, newest: SignedCheckpoint | None) -> _Window:
        if newest is None:
            window = _Window(MerkleBuilder(), 0)
        else:
            body = newest.checkpoint
            peaks = [bytes.fromhex(peak) for peak in body.peaks]
            builder = MerkleBuilder.resumed(body.tree_size, peaks)
            if builder.root().hex() != body.root:
                reason = f"checkpoint {body.number}: its peaks do not make its root"
                raise IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)
            window = _Window(builder, body.last_notification_id)
        rows = _LogRows(self.tables)
        recorder = self.store.recorder
        while window.events < WINDOW:
            page = recorder.select_notifications(
                window.last_notification_id, PAGE, inclusive_of_start=False
            )
            if not page:
                window.complete = True
                break
            for notification in page:
                window.last_notification_id = notification.id
                stream = _uuid(notification.originator_id)
                if stream == CHECKPOINT_STREAM:
                    continue
                rows.add(window.builder, notification, self._leaf(stream, notification))
                window.heads[stream] = self._next_version(window, stream, notification)
                window.events += 1
                if window.events == WINDOW:
                    break
            rows.store(at_least=NODE_BATCH)
        # Nodes and leaf positions are a function of the log alone: stored ahead of the
        # checkpoint, they stay true.
        rows.store()
        return window

    def rebuild_log_tables(self) -> int:
        """Make the log's nodes and leaf index (`CheckpointTables`) again from the log, up to the
        newest checkpoint, as its writers made them; the number of leaves.

        Both tables are a pure function of the log, so what the log makes replaces whatever they
        held (emptied, edited). Each event's MAC is checked before it is hashed, and the tree
        made must have the checkpoint's signed root, else an `IntegrityFailure` names the
        checkpoint: the log itself was altered (``mace verify --all`` says where), and the
        tables then hold what the log makes, which no proof against the checkpoint can use.
        Nodes past the newest checkpoint are left to the next checkpoint writer, who completes
        them from the checkpoint's peaks.
        """
        newest = self.newest()
        self.tables.clear_log()
        if newest is None:
            return 0
        body = newest.checkpoint
        builder = MerkleBuilder()
        rows = _LogRows(self.tables)
        after = 0
        while after < body.last_notification_id:
            page = self.store.recorder.select_notifications(
                after, PAGE, stop=body.last_notification_id, inclusive_of_start=False
            )
            if not page:
                break
            for notification in page:
                stream = _uuid(notification.originator_id)
                if stream != CHECKPOINT_STREAM:
                    rows.add(builder, notification, self._leaf(stream, notification))
            after = page[-1].id
            rows.store(at_least=NODE_BATCH)
        rows.store()
        if builder.size != body.tree_size or builder.root().hex() != body.root:
            reason = (
                f"checkpoint {body.number} no longer holds: the log up to it makes another tree"
                " ('mace verify --all' says where it differs)"
            )
            raise IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)
        return builder.size

    def _leaf(self, stream: UUID, notification: Notification) -> bytes:
        """The event's leaf hash, once its MAC holds: a checkpoint vouches for no forged event."""
        record = verify_record(self.store.keyring, notification)
        assert isinstance(record.stored.topic, str)
        assert isinstance(record.stored.state, bytes)
        return leaf_hash(
            leaf_data(
                stream, notification.originator_version, record.stored.topic, record.stored.state
            )
        )

    @staticmethod
    def _next_version(window: _Window, stream: UUID, notification: Notification) -> int:
        version = notification.originator_version
        last = window.heads.get(stream)
        if last is None:
            window.firsts[stream] = version
        elif version != last + 1:
            reason = f"version {last + 1} is missing (next committed is {version})"
            raise IntegrityFailure(stream, last + 1, reason)
        return version

    def _sign(
        self, newest: SignedCheckpoint | None, window: _Window, heads_root: bytes
    ) -> SignedCheckpoint:
        body = Checkpoint(
            number=1 if newest is None else newest.checkpoint.number + 1,
            tree_size=window.builder.size,
            root=window.builder.root().hex(),
            last_notification_id=window.last_notification_id,
            previous=None if newest is None else newest.checkpoint.digest(),
            heads_root=heads_root.hex(),
            peaks=tuple(peak.hex() for peak in window.builder.peaks),
            written_at=recorded_at(),
        )
        return SignedCheckpoint(body, self.key.key_id, self.key.sign(body.signed_bytes()))

    def _moved_heads(
        self, newest: SignedCheckpoint | None, window: _Window
    ) -> tuple[dict[int, bytes], HeadsTreeUpdate]:
        """The head index after the window: the changed bucket rows and nodes, the new root.

        Every stored row it builds on is first checked against the newest checkpoint's
        ``heads_root``, so an index edited in the database is never carried into a new one.
        """
        by_bucket: dict[int, dict[str, int]] = {}
        for stream, version in window.heads.items():
            by_bucket.setdefault(bucket_of(stream), {})[str(stream)] = version
        stored = self.tables.buckets(by_bucket)
        positions = {p for bucket in by_bucket for p in path_positions(bucket)}
        nodes = self.tables.head_nodes(positions)
        changes: dict[int, Entries] = {}
        for bucket, advances in sorted(by_bucket.items()):
            entries = bucket_entries(stored.get(bucket))
            if newest is not None:
                self._check_path(newest, bucket, entries, nodes)
            for stream_text in advances:
                stream = UUID(stream_text)
                head, first = head_in(entries, stream), window.firsts[stream]
                if first != head + 1:
                    reason = f"version {head + 1} is missing (next committed is {first})"
                    raise IntegrityFailure(stream, head + 1, reason)
            changes[bucket] = merge_heads(entries, advances)
        update = HeadsTree(lambda level, index: nodes.get((level, index))).update(changes)
        return {bucket: canonical_json(entries) for bucket, entries in changes.items()}, update

    def _check_path(
        self,
        newest: SignedCheckpoint,
        bucket: int,
        entries: Entries,
        nodes: Mapping[Position, bytes],
    ) -> None:
        if path_root(bucket, entries, nodes).hex() != newest.checkpoint.heads_root:
            raise disagrees(newest.checkpoint)

    def _save(self, signed: SignedCheckpoint, heads: AlsoWrite) -> None:
        number = signed.checkpoint.number
        event = LedgerCheckpoints.appended(
            LedgerCheckpoints.LEDGER,
            number - 1,
            LedgerCheckpoints.Signed,
            checkpoint=signed.checkpoint,
            key_id=signed.key_id,
            signature=base64.b64encode(signed.signature).decode("ascii"),
        )
        self.store.insert_records([self.store.mapper.to_stored_event(event)], heads)
        self.store.checkpoint_saved()


def _number(signed: SignedCheckpoint | None) -> int:
    return 0 if signed is None else signed.checkpoint.number


def _uuid(value: object) -> UUID:
    return value if isinstance(value, UUID) else UUID(str(value))
