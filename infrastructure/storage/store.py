"""`LedgerStore`: the eventsourcing Application that holds every MACE aggregate, plumbing only.

Every event it stores is signed by the active key and verified on every read, before decoding.
It knows how to open a store, save, read typed aggregates, and retry a write that lost a race;
what a user can do with it lives in `infrastructure.application`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from functools import cached_property
from threading import Lock, local
from typing import Any, ClassVar, TypeVar, cast
from uuid import UUID

from eventsourcing.application import Application, ProcessingEvent
from eventsourcing.domain import BaseAggregate, DomainEventProtocol, MutableOrImmutableAggregate
from eventsourcing.persistence import (
    ApplicationRecorder,
    IntegrityError,
    RecordConflictError,
    Recording,
    StoredEvent,
)

from domain.aggregate import MaceAggregate
from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint
from domain.errors import ConflictError, IntegrityFailure, NotFoundError, RefusedWrite
from domain.key_check import KeyCheck
from infrastructure.storage.backends.connection import check_reachable
from infrastructure.storage.backends.io_tally import IoTally, TalliedIo
from infrastructure.storage.backends.memory_store import MemoryStore
from infrastructure.storage.backends.schema import StoreSchema
from infrastructure.storage.backends.sqlite_file import (
    refuse_other_files,
    require_write_ahead_log,
    use_write_ahead_log,
)
from infrastructure.storage.backends.stream_reads import StreamReads
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.checkpoints.head_check import HeadCheck, HeadCheckedReads
from infrastructure.storage.checkpoints.removed_keys import judge_unknown_key
from infrastructure.storage.checkpoints.tables import AlsoWrite, CheckpointTables, SavesWithIndex
from infrastructure.storage.keys.checkpoint_key import CheckpointKey, load_checkpoint_key
from infrastructure.storage.keys.keyring import Keyring, load_keyring
from infrastructure.storage.read_models.tables import (
    PostgresReadModelView,
    SQLiteReadModelView,
    TableView,
)
from infrastructure.storage.records.event_store import VerifyingEventStore
from infrastructure.storage.records.key_checks import KeyChecks
from infrastructure.storage.records.mapper import SignedMapper
from infrastructure.storage.records.repository import LedgerRepository
from infrastructure.storage.settings import Settings, SettingsError, SQLiteStore, Store
from infrastructure.storage.verification.ledger import LedgerVerification, verify_ledger
from infrastructure.storage.verification.scan import StoreReader
from infrastructure.storage.write_retries import WRITE_RETRIES, RetryPolicy

A = TypeVar("A", bound=MaceAggregate)
T = TypeVar("T")

_FAILED_WRITE: ContextVar[list[tuple[UUID | str, int]] | None] = ContextVar(
    "failed_write", default=None
)
"""Inside `racing`: the streams and versions of the write being made, so that a conflict can be
told from a lost race."""


def _writing(streams: list[tuple[UUID | str, int]]) -> None:
    """The write about to be made (each stream and the first version it appends), for `racing`."""
    written = _FAILED_WRITE.get()
    if written is not None:
        written[:] = streams


class LedgerStore(Application[UUID]):
    # The application's name is stored (read models track their position under it): it stays.
    name = "Ledger"
    # Streams are read in full and verified; pages of 1000 keep scans cheap.
    log_section_size = 1000
    env: ClassVar[dict[str, str]] = {}
    # Every aggregate is read through it: every record verified before it is decoded.
    repository: LedgerRepository
    # How long a write that keeps losing races keeps trying (`racing`, checkpoints, read models).
    retries: RetryPolicy = WRITE_RETRIES

    def __init__(
        self, location: Store, keyring: Keyring, checkpoint_key: CheckpointKey | None = None
    ) -> None:
        self.location = location
        self._judging = local()
        # A record signed under a key id these keys lack is judged from what this store holds.
        self.keyring = keyring.judged_by(self._judge_unknown_key)
        self.checkpoint_key = checkpoint_key
        # Whether this process saved anything: a command that wrote ends with a checkpoint.
        self.wrote = False
        # Tables are set up by `open` (writers, `mace init`), never on construction: StoreSchema.
        super().__init__(env=location.eventsourcing_env() | {"CREATE_TABLE": "n"})
        self.key_checks = KeyChecks(self.recorder, self.keyring)
        self._counters: dict[UUID, Lock] = {}
        self._counters_lock = Lock()

    @classmethod
    def open(cls, settings: Settings | None = None, *, create: bool = True) -> LedgerStore:
        """Open the store the settings name; a writer sets up a new store's tables.

        ``create=False`` (readers) neither makes a store nor its tables: one not set up is refused.
        """
        settings = settings or Settings()
        return cls._open(settings, settings.parsed_store(), create=create)

    @classmethod
    def in_memory(cls, keyring: Keyring, records: Sequence[StoredEvent]) -> LedgerStore:
        """A store holding exactly ``records`` (signed elsewhere, a bundle's), in this process
        only, with no checkpoint key: nothing it holds is checkpointed or kept."""
        store = cls(cast(Store, MemoryStore()), keyring)
        store.recorder.insert_events(list(records))
        return store

    @classmethod
    def open_read_store(cls, settings: Settings) -> LedgerStore:
        """Open ``MACE_READ_STORE`` (a replica or copy of ``MACE_STORE``) read-only, with the
        keys ``MACE_STORE``'s settings name: nothing is made (no file, table, keyring or
        checkpoint key), and its connections refuse writes (`SQLiteStore`, `PostgresStore`)."""
        location = settings.parsed_read_store()
        if location is None:
            msg = "MACE_READ_STORE is not set: read-only work reads MACE_STORE"
            raise SettingsError(msg)
        return cls._open(settings, location, create=False)

    @classmethod
    def _open(cls, settings: Settings, location: Store, *, create: bool) -> LedgerStore:
        if isinstance(location, SQLiteStore):
            if not create and not location.path.exists():
                msg = f"no ledger at {location.describe()} (set {location.setting})"
                raise NotFoundError(msg)
            refuse_other_files(location)
        # The keys are MACE_STORE's (its development files, beside its SQLite file), whichever
        # store is opened: a read store holds the same ledger, signed with the same keys.
        keyring = load_keyring(settings, create=create)
        checkpoint_key = load_checkpoint_key(settings, create=not location.read_only)
        check_reachable(location, settings.connect_timeout)
        if isinstance(location, SQLiteStore):
            if location.read_only:
                require_write_ahead_log(location)
            else:
                use_write_ahead_log(location)
        store = cls(location, keyring, checkpoint_key)
        try:
            schema = store.schema
            if create:
                schema.ensure()
            else:
                schema.require()
            # A key the store contradicts is refused here, before any command reads or writes;
            # the checkpoint key too (its newest checkpoint names another: KEY_MISMATCH).
            store.key_checks.prove()
            if store.checkpoints is not None:
                store.checkpoints.prove_key()
        except BaseException:
            store.close()
            raise
        return store

    # eventsourcing's wiring

    def construct_recorder(self) -> ApplicationRecorder:
        """The ledger's recorder; with a checkpoint key, every stream it reads is held against
        the head the newest checkpoint records (`HeadCheck`)."""
        recorder = super().construct_recorder()
        if isinstance(recorder, HeadCheckedReads) and self.checkpoint_key is not None:
            # The key checks are read to prove the keys that the checkpoint is then read with.
            key_checks = frozenset(KeyCheck.id_for(key_id) for key_id in self.keyring.key_ids)
            recorder.head_check = HeadCheck(
                self._newest_checkpoint, CheckpointTables(recorder), key_checks
            )
        return recorder

    def checkpoint_saved(self) -> None:
        """This process saved a checkpoint: its reads are held to it from now on, not to the
        older one the head check may still hold for a second."""
        if isinstance(self.recorder, HeadCheckedReads) and self.recorder.head_check is not None:
            self.recorder.head_check.forget()

    def _newest_checkpoint(self) -> Checkpoint | None:
        checkpoints = self.checkpoints
        assert checkpoints is not None  # a head check is made only with a checkpoint key
        # A key the store contradicts is that (KEY_MISMATCH), not a checkpoint failing its MAC.
        self.key_checks.prove()
        newest = checkpoints.newest()
        return None if newest is None else newest.checkpoint

    def _judge_unknown_key(self, key_id: str, stored: StoredEvent) -> Exception | None:
        """A removed key or a forged signature (`removed_keys`); None without checkpoints, or
        while judging already (the checkpoint read to judge with may itself be so signed)."""
        checkpoints = self.checkpoints
        if checkpoints is None or getattr(self._judging, "active", False):
            return None
        self._judging.active = True
        try:
            return judge_unknown_key(checkpoints, self.keyring.source, key_id, stored)
        finally:
            self._judging.active = False

    def construct_mapper(self) -> SignedMapper:
        return SignedMapper(self.keyring)

    def construct_repository(self) -> LedgerRepository:
        return LedgerRepository(event_store=self.events, snapshot_store=self.snapshots)

    def construct_event_store(self) -> VerifyingEventStore:
        assert isinstance(self.mapper, SignedMapper)
        return VerifyingEventStore(self.mapper, self.recorder, self.keyring)

    @property
    def io(self) -> IoTally:
        """The rows this process read from and wrote to the events table (`io_tally`)."""
        recorder = self.recorder
        return recorder.io if isinstance(recorder, TalliedIo) else IoTally()

    @property
    def verifying_store(self) -> VerifyingEventStore:
        assert isinstance(self.events, VerifyingEventStore)
        return self.events

    @cached_property
    def read_model_view(self) -> TableView:
        """The tables the read models are kept in, and their tracking (made on first use)."""
        view_class = (
            SQLiteReadModelView if isinstance(self.location, SQLiteStore) else PostgresReadModelView
        )
        return cast(TableView, self.factory.tracking_recorder(view_class))

    @cached_property
    def checkpoints(self) -> Checkpoints | None:
        """The checkpoint writer and reader; None for a store opened without a checkpoint key
        (a bundle's records in memory)."""
        return None if self.checkpoint_key is None else Checkpoints(self, self.checkpoint_key)

    @property
    def schema(self) -> StoreSchema:
        return StoreSchema(self.recorder, self.read_model_view, self.location)

    # Writing

    def save(
        self,
        *objs: MutableOrImmutableAggregate[UUID] | DomainEventProtocol[UUID] | None,
        **kwargs: Any,
    ) -> list[Recording[UUID]]:
        """eventsourcing's save, the aggregates told from the events by their base class: its
        own checks (``isinstance`` of runtime protocols, which walk every attribute of the
        protocol for each object) took 10-25 us an object, a tenth of a recorded run's
        processing time. Every object the ledger saves is one of its aggregates or their
        events."""
        processing_event = ProcessingEvent[UUID]()
        for obj in objs:
            if isinstance(obj, BaseAggregate):
                processing_event.events.extend(obj.collect_events())
                processing_event.aggregates[obj.id] = obj
            elif obj is not None:
                processing_event.events.append(cast(DomainEventProtocol[UUID], obj))
        processing_event.saved_kwargs.update(kwargs)
        recordings = self._record(processing_event)
        self._take_snapshots(processing_event)
        self._notify(recordings)
        return recordings

    def _record(self, processing_event: ProcessingEvent[UUID]) -> list[Recording[UUID]]:
        """Every save: the keys proven first, the missing key checks in the same transaction,
        and the streams it read checked unmoved there (`save_unmoved`)."""
        events = list(processing_event.events)
        read: Mapping[UUID, int] = processing_event.saved_kwargs.pop("unmoved", {})
        if read:
            processing_event.saved_kwargs["also"] = cast(StreamReads, self.recorder).unmoved(read)
        # A read stream that moved on is a race lost to its writer, as a write to it would be.
        written: list[tuple[UUID | str, int]] = [
            (e.originator_id, e.originator_version) for e in events
        ]
        _writing(written + [(stream, version + 1) for stream, version in read.items()])

        def write(checks: list[KeyCheck.Recorded]) -> list[Recording[UUID]]:
            processing_event.events[:] = [*checks, *events]
            return super(LedgerStore, self)._record(processing_event)

        recordings = self._with_key_checks(write)
        self.wrote = True
        return recordings

    def insert_records(self, records: Sequence[StoredEvent], also: AlsoWrite | None = None) -> None:
        """Store records signed elsewhere (an imported bundle) or made by hand (a checkpoint) as
        they are, keys proven first, with ``also``'s writes in the same transaction."""
        recorder = cast(SavesWithIndex, self.recorder)
        _writing([(r.originator_id, r.originator_version) for r in records])

        def write(checks: list[KeyCheck.Recorded]) -> None:
            stored = [*map(self.mapper.to_stored_event, checks), *records]
            recorder.insert_events_with(stored, also)

        self._with_key_checks(write)
        self.wrote = True

    def _with_key_checks(self, write: Callable[[list[KeyCheck.Recorded]], T]) -> T:
        """Run ``write`` with the key checks it must carry; a check another writer stored first
        is read and verified, and the write is tried again without it."""
        checks = self.key_checks.unwritten()
        while True:
            try:
                written = write(checks)
            except (IntegrityError, RecordConflictError):
                still = self.key_checks.unwritten()
                if len(still) == len(checks):
                    raise  # the conflict was the write's own
                checks = still
                continue
            self.key_checks.recorded(checks)
            return written

    def save_new(self, *aggregates: MaceAggregate, what: str) -> None:
        """Save; a conflict (the streams exist, or moved on since read) is a `ConflictError`."""
        try:
            self.save(*aggregates)
        except (IntegrityError, RecordConflictError):
            raise ConflictError(f"{what} already exists or changed concurrently") from None

    def save_unmoved(
        self, *aggregates: MaceAggregate | DomainEventProtocol[UUID], read: Mapping[UUID, int]
    ) -> None:
        """Save, in a transaction that also checks each stream of ``read`` is still at the
        version given (0: it had none): one that moved on since makes the save conflict, and
        `racing` decides again (`stream_reads`)."""
        self.save(*aggregates, unmoved=read)

    def stream_positions(self, streams: Sequence[UUID]) -> dict[UUID, dict[int, int]]:
        """Where each version of ``streams`` stands in the log: its notification id (not
        verified here: the events are, where they are read; the order, by the checkpoints)."""
        return cast(StreamReads, self.recorder).stream_positions(streams)

    def racing(self, attempt: Callable[[], T], what: str) -> T:
        """Run ``attempt`` (it reads, decides and writes) again whenever its write lost a race.

        The one policy for races. A write conflicts when a stream it appends to has moved on
        since it was read, or a stream it creates (a derived id, the next number of a counter)
        was created first. If a stream the failed write wrote to now holds the version it
        tried, another writer's write won: ``attempt`` reads and decides again, after a pause
        (`write_retries`: backoff with jitter). Each retry follows another writer's success, so
        the writers as a whole always progress; only a write that keeps losing past the
        budget (``retries``) is turned away, `StoreBusyError` naming ``what``. If none moved,
        the conflict is no race: the store does not hold what the records read from it say (or
        something below the ledger refuses writes), a `RefusedWrite`, which is an
        `IntegrityFailure`.
        """
        retries = self.retries.start(what)
        while True:
            token = _FAILED_WRITE.set([])
            try:
                return attempt()
            except (IntegrityError, RecordConflictError):
                written = _FAILED_WRITE.get() or []
                if not any(self._stored_version(s) >= version for s, version in written):
                    stream, version = written[0] if written else (what, 0)
                    reason = f"{what}: the store refused it though no other writer appended first"
                    raise RefusedWrite(stream, version, reason) from None
            finally:
                _FAILED_WRITE.reset(token)
            retries.lost()

    def save_first_free(
        self, stream_of: Callable[[int], UUID], made: Callable[[int], A], what: str
    ) -> A:
        """Save ``made(n)`` (whose stream is ``stream_of(n)``) for the first ``n`` whose stream
        is free, and return it: a record named by a digest of what it says and a number (an
        audit's, a what-if's), so that no store-wide counter is appended to. Two identical
        records race for the same name; the loser counts on (`racing`)."""

        def attempt() -> A:
            number = 0
            while self.stream_exists(stream_of(number)):
                number += 1
            record = made(number)
            self.save(record)
            return record

        return self.racing(attempt, what)

    def _stored_version(self, stream: UUID | str) -> int:
        """The stream's last stored version, unverified (0: none): whether another writer won."""
        last = next(iter(self.recorder.select_events(stream, desc=True, limit=1)), None)
        return 0 if last is None else last.originator_version

    def numbered(self, counter: UUID, attempt: Callable[[int], T], what: str) -> T:
        """`racing`, for a write that takes the next number of the ``counter`` stream:
        ``attempt`` gets the stream's version as it stands (0: none yet) and appends to it.

        Every such write takes the next number, so concurrent ones race for the same one. Within
        one process (the HTTP service's threads) they take turns instead of losing and
        recomputing; between processes the store's version check still decides, and the loser
        retries.
        """
        with self._counters_lock:
            turn = self._counters.setdefault(counter, Lock())
        with turn:
            return self.racing(lambda: attempt(self.stream_version(counter)), what)

    # Reading

    def stream_exists(self, stream: UUID) -> bool:
        """Whether any event of the stream is stored (nothing is verified; a stream the newest
        checkpoint counts is not absent: `HeadCheck`)."""
        return next(iter(self.recorder.select_events(stream, limit=1)), None) is not None

    def streams_held(self, streams: Sequence[UUID]) -> set[UUID]:
        """Those of ``streams`` with any event stored, read together (nothing verified); an
        `IntegrityFailure` when one is shorter than the newest checkpoint records it."""
        read = self.repository.read(streams)
        return {stream for stream in streams if read[stream]}

    def checkpointed(self, streams: Sequence[UUID]) -> set[UUID]:
        """Those of ``streams`` whose events the newest checkpoint counts, by their heads proven
        against it (`HeadCheck`: one read of the head index); none without a checkpoint key. A
        stream it counts was written, whatever the store holds of it now."""
        check = self._head_check
        if check is None:
            return set()
        heads = check.heads([stream for stream in streams if stream not in check.exempt])
        return {stream for stream, head in heads.items() if head.version > 0}

    def stream_version(self, stream: UUID) -> int:
        """The stream's last version, its event verified: 0 when it has none."""
        last = next(self.verifying_store.get(stream, desc=True, limit=1), None)
        return 0 if last is None else last.originator_version

    # Readers that gather events other than by reading each stream (the notification log, the
    # read models) hold what they show to the newest checkpoint here, as `HeadCheckedReads`
    # holds every read of a stream.

    def held_to_heads(self, read: Callable[[], tuple[T, Mapping[UUID, int]]]) -> T:
        """What ``read`` answers, once every stream it names is shown at least as long as the
        newest checkpoint records it: ``read`` gives its answer and, for each stream the answer
        shows, the last version it shows (0: none of it). A stream shown shorter fails closed
        (`ProvenHead.short_of`), after ``read`` is made once more: a checkpoint committed after
        the first read began may count events that read could not see yet, and the second read
        starts after the heads were proven."""
        check = self._head_check
        answer, reached = read()
        if check is None or not self._short(check, reached):
            return answer
        answer, reached = read()
        failures = self._short(check, reached)
        if failures:
            raise failures[0]
        return answer

    def require_stored_heads(self, streams: Sequence[UUID]) -> None:
        """Each of ``streams`` (the ones a listing shows, by a view's rows) holds at least the
        head the newest checkpoint records for it: a stream cut short or deleted whole below
        it fails closed, naming the stream and the checkpoint."""
        if self._head_check is not None:
            self.held_to_heads(lambda: (None, self._stored_versions(streams)))

    def require_whole_log(self) -> None:
        """The log up to the newest checkpoint holds exactly the events it counts (one count):
        a reader of the whole log (the store's governance log) cannot tell a stream deleted
        whole from one never written, since no event it reads names it."""
        checkpoints = self.checkpoints
        newest = None if checkpoints is None else checkpoints.newest()
        if newest is None:
            return
        body = newest.checkpoint
        with StoreReader(self.location, self._events_table) as reader:
            held = reader.count_through(body.last_notification_id, CHECKPOINT_STREAM)
        if held != body.tree_size:
            what = "deleted below it" if held < body.tree_size else "inserted below it"
            reason = (
                f"checkpoint {body.number} counts {body.tree_size} events up to notification"
                f" {body.last_notification_id}; the store holds {held}: events were {what}"
                " ('mace verify --all' names where)"
            )
            raise IntegrityFailure(CHECKPOINT_STREAM, body.number, reason)

    @property
    def _head_check(self) -> HeadCheck | None:
        recorder = self.recorder
        return recorder.head_check if isinstance(recorder, HeadCheckedReads) else None

    @staticmethod
    def _short(check: HeadCheck, reached: Mapping[UUID, int]) -> list[IntegrityFailure]:
        streams = sorted(s for s in reached if s not in check.exempt)
        heads = check.heads(streams)
        failures = (heads[s].short_of(s, reached[s]) for s in streams)
        return [failure for failure in failures if failure is not None]

    def _stored_versions(self, streams: Sequence[UUID]) -> dict[UUID, int]:
        # Through the store's own connections: a listing reads this on every request.
        found = cast(StreamReads, self.recorder).last_versions(streams)
        return {stream: found.get(stream, 0) for stream in streams}

    @property
    def _events_table(self) -> str:
        table = getattr(self.recorder, "events_table_name", None)
        assert isinstance(table, str)
        return table

    def verify_all(self, *, tree: bool = True) -> LedgerVerification:
        """Check every checkpoint against the log it signed, then every stored event's MAC,
        every stream's versions, every seal and witness. ``tree=False`` leaves the checkpoints
        out: what verify cost before them, the bench's baseline."""
        table = self._events_table
        checkpoints = self.checkpoints
        # Only the in-memory ledger of a bundle has no checkpoint key, and it is never verified
        # whole: a store opened from settings always has one.
        assert checkpoints is not None
        return verify_ledger(self.location, table, self.keyring, checkpoints if tree else None)
