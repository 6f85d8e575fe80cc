"""The one pass of `mace verify --all` over the log, in notification order.

Each row is read once: its Merkle leaf hashed from its stored bytes for the checkpoint checks
and its MAC checked, a page at a time, in a forked child while the next page is read where this
process may fork (`row_checks`; a row it does not accept is judged here by `verify_record`, a
leaf it does not make made by `StoreReader.leaf_of`); then, once its MAC is known to hold, its
stream's state carried on from the rows of that stream met before it: the next version
expected; for a job, its running digest of MACs, so that its seal is checked when met (the count
and digest `check_seal` holds a stream to) and its witness paired with it (`Pairs`). Memory is a
few dozen bytes a stream, not the log.

What a read of one stream would report is only known for a stream read in version order. So a
stream whose rows break the order its writer leaves them in (a version out of turn, an event after
its seal, a MAC that fails, a seal that does not hold) is not judged here: it is set aside
(`LogPass.suspects`) and read back whole, in version order, to be judged by exactly the checks
of a read of that stream (`verify_stream`), with the same message. A row whose stream id is not a
UUID belongs to no stream: it fails here, reported before any stream's failure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator
from contextlib import closing
from typing import Any, Final
from uuid import UUID

import orjson

from domain.checkpoint import CHECKPOINT_STREAM
from domain.errors import IntegrityFailure
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.integrity import (
    RECORDED_TOPIC,
    SEAL_TOPIC,
    SealFacts,
    check_completion_sealed,
)
from infrastructure.storage.records.signed_record import (
    RecordCheck,
    VerifiedRecord,
    parse_envelope,
    unverified_body,
    verify_record,
)
from infrastructure.storage.verification.row_checks import PageAnswer, PageCheck, page_checks
from infrastructure.storage.verification.scan import (
    LeafPage,
    LogRow,
    Position,
    StoreReader,
    stored_event,
)
from infrastructure.storage.verification.stream_facts import (
    COUNTERPART,
    JOB_STARTED_TOPIC,
    OWN,
    SNAPSHOT_TOPIC,
    WITNESS_TOPIC,
    Counterpart,
    FirstFailure,
    StreamFacts,
    seal_facts,
    verified_facts,
    witness_counterpart,
)

_JOBS_ONLY: Final = frozenset((SEAL_TOPIC, RECORDED_TOPIC))
"""Topics only a job's stream holds: met elsewhere, the stream is read back whole."""

_SUSPECT: Final = "suspect"
"""A stream to read back whole and judge as a read of it would."""
_FAILED: Final = "failed"
"""A stream whose failure is known (its id is not a UUID)."""
_SEALED: Final = "sealed"
"""A sealed job: verified, counted and paired; any row after its seal sets it aside."""


class _Job:
    """An open job stream: what its seal must say when it comes (`add` takes each event)."""

    __slots__ = ("digest", "last", "next", "started")

    def __init__(self, topic: str, state: bytes, mac: bytes) -> None:
        self.started: dict[str, Any] = orjson.loads(unverified_body(state))  # its MAC held
        self.digest = hashlib.sha256(mac)  # `mac_digest`, as the events come
        self.last: tuple[str, bytes] = (topic, state)
        self.next = 2

    def add(self, topic: str, state: bytes, mac: bytes) -> None:
        """The next event, its MAC held and its topic not a seal's."""
        self.digest.update(mac)
        self.last = (topic, state)
        self.next += 1

    def last_record(self, stream: UUID) -> VerifiedRecord:
        """The last row met, whose MAC held, as `verify_record` gives it."""
        topic, state = self.last
        version = self.next - 1
        return VerifiedRecord(
            stored_event(stream, version, topic, state), *parse_envelope(state, stream, version)
        )


_State = int | _Job | str
"""A stream's state: the next version of a stream that is not a job's, an open job, or one of
`_SUSPECT`, `_FAILED`, `_SEALED`."""


class Pairs:
    """Each seal held to its witness and each witness to its seal, as soon as the pass has met
    both (a seal and its witness are written together), else looked up once the pass is over."""

    _UNSEEN: Final = object()

    def __init__(self, keyring: Keyring, failures: FirstFailure) -> None:
        self._keyring = keyring
        self._failures = failures
        self._seen: dict[Position, SealFacts | IntegrityFailure] = {}
        self._waiting: dict[Position, list[tuple[object, Counterpart]]] = {}

    def seen(self, position: Position, outcome: SealFacts | IntegrityFailure) -> None:
        """What the seal or witness record stored at ``position`` says, or why its MAC fails."""
        waiting = self._waiting.pop(position, None)
        if waiting is None:
            self._seen[position] = outcome
            return
        for stored, counterpart in waiting:
            self._judge(stored, counterpart, outcome)

    def met(self, stored: object, counterpart: Counterpart) -> None:
        """``counterpart``, held by the verified stream whose id is stored as ``stored``."""
        outcome = self._seen.pop(counterpart.position, self._UNSEEN)
        if outcome is self._UNSEEN:
            self._waiting.setdefault(counterpart.position, []).append((stored, counterpart))
        else:
            self._judge(stored, counterpart, outcome)  # type: ignore[arg-type]  # not _UNSEEN

    def look_up(self, reader: StoreReader) -> None:
        """The counterparts the pass did not meet, looked up where they should be stored."""
        waiting, self._waiting = self._waiting, {}
        self._seen.clear()
        found = reader.records_at(list(waiting))
        for position, held in waiting.items():
            for stored, counterpart in held:
                try:
                    outcome = verified_facts(self._keyring, found.get(position), counterpart.topic)
                except IntegrityFailure as failure:
                    self._judge(stored, counterpart, failure)
                else:
                    self._judge(stored, counterpart, outcome)

    def _judge(
        self, stored: object, counterpart: Counterpart, outcome: SealFacts | IntegrityFailure | None
    ) -> None:
        if isinstance(outcome, IntegrityFailure):
            self._failures.add(stored, COUNTERPART, outcome)
            return
        try:
            counterpart.check(outcome)
        except IntegrityFailure as failure:
            self._failures.add(stored, COUNTERPART, failure)


class LogPass:
    """The streams' checks, made as the log's rows pass by (the module's docstring says how).

    `leaf_pages` runs the pass; then `finish` judges what only the end of the log decides.
    Counts are added to ``facts`` for each stream judged here; failures to ``failures``.
    """

    def __init__(
        self,
        reader: StoreReader,
        keyring: Keyring,
        facts: StreamFacts,
        failures: FirstFailure,
        pairs: Pairs,
    ) -> None:
        self._reader = reader
        self._keyring = keyring
        self._facts = facts
        self._failures = failures
        self._pairs = pairs
        self._ids = reader.stream_ids()
        self._states: dict[object, _State] = {}
        self.suspects: list[object] = []
        """Streams (ids as stored) to read back whole, in the order they were set aside."""

    def leaf_pages(self, *, leaves: bool) -> Generator[LeafPage]:
        """The pass, a page at a time, with the page's leaves (none unless ``leaves``): every
        row of every stream but the checkpoints' (which are no leaves), and no row without a
        stream id (as SQL's ``<>`` leaves it out). Each page's MACs and leaves are checked
        while the next page is read (`row_checks`), and the page judged once they are."""
        check = PageCheck(self._reader, RecordCheck(self._keyring), leaves=leaves)
        pages = self._reader.log()
        with closing(pages), page_checks(check) as checks:
            sent: list[LogRow] | None = None
            for rows in pages:
                answer = None if sent is None else checks.answer()
                checks.send(rows)
                if sent is not None and answer is not None:
                    yield self._page(sent, answer, leaves=leaves)
                sent = rows
            if sent is not None:
                yield self._page(sent, checks.answer(), leaves=leaves)

    def _page(self, rows: list[LogRow], answer: PageAnswer, *, leaves: bool) -> LeafPage:
        """A page of rows judged, with its leaves, once its MACs and leaves are checked."""
        macs, made = answer
        if not leaves:
            page = LeafPage([], [])
        elif None not in made:
            # Every row's leaf made: every row is a leaf (a checkpoint's or a streamless row
            # has none made), the page's leaves are the answer's, taken whole.
            page = LeafPage([each[0] for each in rows], made)
        else:
            page = self._leaves(rows, made)
        states, row, job = self._states, self._row, _Job
        for (_, stored, version, topic, state), mac in zip(rows, macs, strict=True):
            held = states.get(stored)
            # A job's event in turn whose MAC held, every row but a few: `_row`'s step for it,
            # without the call to `_row`, as the pass's cost is per row.
            if (
                held.__class__ is job
                and mac is not None
                and version == held.next
                and topic != SEAL_TOPIC
            ):
                held.add(topic, state, mac)
            else:
                row(stored, version, topic, state, mac)
        return page

    def _leaves(self, rows: list[LogRow], made: list[bytes | None]) -> LeafPage:
        """A page's leaves, row by row: a leaf not made for a row is made by the one definition
        of a row's leaf; the checkpoints' rows and rows without a stream id are no leaves."""
        reader = self._reader
        leaf_of, checkpoints = reader.leaf_of, reader.stored_id(CHECKPOINT_STREAM)
        ids: list[int] = []
        hashes: list[bytes | None] = []
        for (notification_id, stored, version, topic, state), leaf in zip(rows, made, strict=True):
            if stored is not None and stored != checkpoints:
                ids.append(notification_id)
                hashes.append(leaf_of(stored, version, topic, state) if leaf is None else leaf)
        return LeafPage(ids, hashes)

    def _row(self, stored: object, version: Any, topic: Any, state: Any, mac: bytes | None) -> None:
        """One row, its MAC as checked (None: not accepted yet, `_verified` judges it)."""
        held = self._states.get(stored)
        if held is None:
            self._first(stored, version, topic, state, mac)
        elif held.__class__ is int:
            # Events of streams that are not jobs' carry no seal and no completion.
            if version != held or topic in _JOBS_ONLY:
                self._suspect(stored)
            elif self._verified(stored, version, topic, state, mac) is not None:
                self._states[stored] = version + 1
        elif isinstance(held, _Job):
            if version != held.next:
                self._suspect(stored)
                return
            # A job's events, every row but a few: the MAC checked is taken without a call.
            verified = mac or self._verified(stored, version, topic, state, mac)
            if verified is None:
                return
            if topic == SEAL_TOPIC:
                self._sealed(stored, held, version, unverified_body(state))
            else:
                held.add(topic, state, verified)
        elif held == _SEALED:
            self._suspect(stored)  # an event after the seal, or a version stored twice

    def _first(
        self, stored: object, version: Any, topic: Any, state: Any, mac: bytes | None
    ) -> None:
        """A stream's first row in the log: its version 1, or it is set aside."""
        if version != 1 or topic in _JOBS_ONLY:
            self._suspect(stored)
            return
        verified = self._verified(stored, version, topic, state, mac)
        if verified is None:
            return
        stream = self._ids(stored)  # a UUID: its MAC held
        if topic == JOB_STARTED_TOPIC:
            self._states[stored] = _Job(topic, state, verified)
            return
        self._states[stored] = 2
        if topic == SNAPSHOT_TOPIC:
            self._facts.snapshots.add(stream)
        elif topic == WITNESS_TOPIC:
            body = unverified_body(state)  # its MAC held: the body it covers
            self._pairs.seen((stream, 1), seal_facts(body))
            self._pairs.met(stored, witness_counterpart(body))

    def _sealed(self, stored: object, job: _Job, version: int, body: bytes) -> None:
        """A job's seal: it counts and digests every event before it; the job is verified."""
        said = orjson.loads(body)
        if said.get("event_count") != job.next - 1 or said.get("mac_digest") != (
            job.digest.hexdigest()
        ):
            self._suspect(stored)
            return
        sealed = seal_facts(body)
        stream = self._ids(stored)
        self._pairs.seen((stream, version), sealed)
        facts = self._facts
        facts.stream(version)
        completion = unverified_body(job.last[1])  # its MAC held: the body it covers
        counterpart = facts.sealed_job(stored, stream, job.started, completion, version, sealed)
        self._pairs.met(stored, counterpart)
        self._states[stored] = _SEALED

    def _verified(
        self, stored: object, version: Any, topic: Any, state: Any, mac: bytes | None
    ) -> bytes | None:
        """The row's MAC, once it holds (``mac``: as `row_checks` found it); else None, its
        stream set aside (or failed: an id that is not a UUID). A seal's or witness's failing
        MAC is kept for its counterpart."""
        if mac is not None:
            return mac
        # Not accepted as it is: `verify_record` judges it (and names what is wrong).
        try:
            stream = self._ids(stored)
        except IntegrityFailure as failure:
            self._failures.add_streamless(failure)
            self._states[stored] = _FAILED
            return None
        try:
            record = verify_record(self._keyring, stored_event(stream, version, topic, state))
        except IntegrityFailure as failure:
            if topic == SEAL_TOPIC or (topic == WITNESS_TOPIC and version == 1):
                self._pairs.seen((stream, version), failure)
            self._suspect(stored)
            return None
        return record.mac

    def _suspect(self, stored: object) -> None:
        if self._states.get(stored) in (_SUSPECT, _FAILED):
            return
        try:
            self._ids(stored)
        except IntegrityFailure as failure:  # no stream to read back: it fails as it is
            self._failures.add_streamless(failure)
            self._states[stored] = _FAILED
            return
        self._states[stored] = _SUSPECT
        self.suspects.append(stored)

    def finish(self) -> None:
        """The checks only the log's end decides: a job not sealed must not end at its
        completion; the streams still open are counted."""
        facts = self._facts
        for stored, held in self._states.items():
            if isinstance(held, _Job):
                stream = self._ids(stored)  # its first row's MAC held: a UUID
                try:
                    check_completion_sealed(stream, [held.last_record(stream)])
                except IntegrityFailure as failure:
                    self._failures.add(stored, OWN, failure)
                    continue
                facts.stream(held.next - 1)
                facts.jobs += 1
            elif isinstance(held, int):
                facts.stream(held - 1)
        self._states.clear()
