"""The Job aggregate: one job's decision-relevant facts, in order, ending in a seal.

A job is started with its seed and the snapshots it declares, records each fact as an event whose
id and sequence index come from the seed (seed 000 section 5), and is sealed once complete. The
seal carries the number of events before it and a digest over their MACs, so a stream that lost
its tail no longer matches its seal. The seal itself is witnessed by a second aggregate, so that
deleting the seal (the stream's last event) is detected too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import orjson
from eventsourcing.domain import event

from domain.aggregate import MaceAggregate, fold_events
from domain.canonical import Written, canonical_json, written
from domain.determinism import DeterministicClock, event_id
from domain.errors import InvalidInput
from domain.naming import DEFAULT_TENANT as DEFAULT_TENANT  # noqa: PLC0414 (re-exported)
from domain.naming import tenant_scoped
from domain.provenance import job_provenance
from domain.snapshot import SnapshotKind

_KEPT_PAYLOAD = "_kept_payload"
"""Where a `Job.Recorded` event made by `Job.record` keeps its payload's canonical bytes: beside
its fields, never one of them (not dumped, compared or stored)."""
JOB_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
EVENT_TYPE_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_INPUT_CHARS = 100_000
"""The most characters a job's input may have, however it arrives (CLI, run file, HTTP)."""


class CaptureMode(StrEnum):
    """How much model I/O a job keeps (seed 003): what production replay can later reconstruct."""

    NONE = "none"
    PROMPTS_ONLY = "prompts_only"
    FULL_IO = "full_io"


class JobSealedError(ValueError):
    """A sealed job is complete: nothing more may be recorded on it."""


def validate_job_id(job_id: str) -> str:
    if not JOB_ID_PATTERN.fullmatch(job_id):
        msg = (
            f"invalid job id {job_id!r}: expected 1-128 characters of letters, digits and . _ : -,"
            " starting with a letter or digit"
        )
        raise InvalidInput(msg)
    return job_id


def validate_tenant(tenant: str) -> str:
    if not TENANT_PATTERN.fullmatch(tenant):
        msg = (
            f"invalid tenant {tenant!r}: expected 1-64 characters of lowercase letters, digits"
            " and . _ -, starting with a letter or digit"
        )
        raise InvalidInput(msg)
    return tenant


@dataclass(frozen=True, slots=True)
class RecordedFact:
    """One recorded event of a job, as its stream holds it."""

    sequence_index: int
    event_type: str
    event_id: str
    payload: dict[str, Any]


class Job(MaceAggregate):
    class Started(MaceAggregate.Created):
        # Version 1 had no tenant: every job then belonged to the one default tenant. Version 2
        # did not name the rules it was recorded under (`domain.provenance`): None.
        class_version = 3
        job_id: str
        job_seed: str
        job_input: str
        snapshot_ids: dict[str, str]
        capture_mode: str
        tenant: str
        provenance: dict[str, Any] | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["tenant"] = DEFAULT_TENANT

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state["provenance"] = None

    class Recorded(MaceAggregate.Event):
        sequence_index: int
        event_type: str
        event_id: str
        payload: dict[str, Any]

        def keep_payload(self, data: Written) -> None:
            """Keep ``payload``'s canonical bytes, as `Job.record` wrote them once."""
            object.__setattr__(self, _KEPT_PAYLOAD, (self.payload, data))

        def kept_fields(self) -> dict[str, Written]:
            kept = self.__dict__.get(_KEPT_PAYLOAD)
            # Only while ``payload`` is the very value written (a copy made with another is not).
            return {"payload": kept[1]} if kept is not None and kept[0] is self.payload else {}

    class Sealed(MaceAggregate.Event):
        event_count: int
        mac_digest: str

    NAME_PREFIX = "job"
    NAME_FIELD = "job_id"

    @classmethod
    def name_of(cls, fields: Mapping[str, Any]) -> str:
        # Job ids are scoped by tenant: another tenant's job of the same id is another stream.
        return tenant_scoped(fields["tenant"], fields["job_id"])

    @classmethod
    def clock_seed_of(cls, created_with: dict[str, Any]) -> str:
        return str(created_with["job_seed"])

    @property
    def clock_seed(self) -> str:
        return self.job_seed

    @classmethod
    def start(
        cls,
        job_id: str,
        job_seed: str,
        job_input: str,
        snapshot_ids: dict[str, str],
        capture_mode: CaptureMode = CaptureMode.PROMPTS_ONLY,
        tenant: str = DEFAULT_TENANT,
        *,
        job_id_derived: bool = False,
        forked_from: dict[str, Any] | None = None,
    ) -> Job:
        """``job_id_derived``: the ledger derived the id (seed 004 D3); the caller named none.
        ``forked_from``: a fork's lineage (`domain.fork`), recorded with its rules."""
        cls.check_start(job_id, job_seed, job_input, snapshot_ids)
        return cls(
            job_id=job_id,
            job_seed=job_seed,
            job_input=job_input,
            snapshot_ids=dict(sorted(snapshot_ids.items())),
            capture_mode=CaptureMode(capture_mode).value,
            tenant=validate_tenant(tenant),
            provenance=job_provenance(job_id_derived, forked_from),
        )

    @staticmethod
    def check_start(
        job_id: str | None, job_seed: str, job_input: str, snapshot_ids: dict[str, str]
    ) -> None:
        """Refuse what a job cannot start with; ``job_id=None`` when the id is yet to be derived."""
        if job_id is not None:
            validate_job_id(job_id)
        if not job_seed:
            msg = "job seed must not be empty"
            raise InvalidInput(msg)
        unknown = sorted(set(snapshot_ids) - {k.value for k in SnapshotKind})
        if unknown:
            msg = f"unknown snapshot kind(s) {unknown}: expected {[k.value for k in SnapshotKind]}"
            raise InvalidInput(msg)
        if len(job_input) > MAX_INPUT_CHARS:
            msg = f"job input: {len(job_input)} characters, at most {MAX_INPUT_CHARS}"
            raise InvalidInput(msg)
        canonical_json(job_input)  # refuses what could not be stored canonically

    @event(Started)
    def __init__(
        self,
        job_id: str,
        job_seed: str,
        job_input: str,
        snapshot_ids: dict[str, str],
        capture_mode: str,
        tenant: str,
        provenance: dict[str, Any] | None,
    ) -> None:
        self.job_id = job_id
        self.job_seed = job_seed
        self.job_input = job_input
        self.snapshot_ids = snapshot_ids
        self.capture_mode = capture_mode
        self.tenant = tenant
        self.provenance = provenance
        self.next_sequence_index = 0
        self.facts: list[RecordedFact] = []
        self.sealed = False
        self.sealed_event_count: int | None = None
        self.sealed_mac_digest: str | None = None

    @property
    def scoped_id(self) -> str:
        """The job's id among every tenant's jobs: what its stream, witness, governance record and
        replay records are named by.

        Its id scoped by its tenant; or the id alone for a job that a tenant other than the
        default recorded before ids were scoped by tenant (its stream says which: it was named so).
        """
        scoped = tenant_scoped(self.tenant, self.job_id)
        return scoped if self.id_for(scoped) == self.id else self.job_id

    def resume(self, recorded: int) -> None:
        """Take this job, just started and not saved, to the head of its stored stream, which
        holds ``recorded`` facts after its start, without reading them: to record more where the
        caller knows its stream stands (a run's index of the events its job holds). Its start is
        stored already and is not saved again; ``facts`` holds only what is recorded from here.
        A stream that is not at that head makes the save conflict."""
        self.collect_events()
        self.version = 1 + recorded
        self.next_sequence_index = recorded

    def record(self, event_type: str, payload: dict[str, Any] | Written) -> str:
        """Record one fact; returns its deterministic event id. ``payload``: its value, or its
        canonical bytes already written (`RunEvent.written_payload`)."""
        if self.sealed:
            msg = f"job {self.job_id} is sealed: nothing more may be recorded"
            raise JobSealedError(msg)
        if not EVENT_TYPE_PATTERN.fullmatch(event_type):
            msg = f"invalid event type {event_type!r}: expected a letter then letters, digits or _"
            raise InvalidInput(msg)
        # Written once: the aggregate keeps the value as it reads back, its record the bytes.
        if isinstance(payload, Written):
            data, value = payload, orjson.loads(payload.data)
        else:
            data, value = written(payload)
        index = self.next_sequence_index
        new_id = event_id(self.job_seed, index, event_type)
        version = self.version + 1
        timestamp = DeterministicClock(self.clock_seed).at(version)
        # Made from parts that are already what validating them would give (the aggregate's id
        # and next version, the clock's time, the id and type checked above, the payload read
        # back from its canonical bytes), not validated again; and applied as eventsourcing's
        # ``mutate`` would (`trigger_event`), as `folded` takes a fact read back.
        recorded = Job.Recorded.model_construct(
            originator_id=self.id,
            originator_version=version,
            timestamp=timestamp,
            sequence_index=index,
            event_type=event_type,
            event_id=new_id,
            payload=value,
        )
        recorded.keep_payload(data)
        self._take(RecordedFact(index, event_type, new_id, value))
        self.version = version
        self.modified_on = timestamp
        self._pending_events.append(recorded)
        return new_id

    @event(Recorded)
    def _recorded(
        self, sequence_index: int, event_type: str, event_id: str, payload: dict[str, Any]
    ) -> None:
        # How eventsourcing's ``mutate`` applies a fact (a stream folded by it, not by `folded`).
        self._take(RecordedFact(sequence_index, event_type, event_id, payload))

    def _take(self, fact: RecordedFact) -> None:
        self.next_sequence_index = fact.sequence_index + 1
        self.facts.append(fact)

    @classmethod
    def folded(cls, events: Iterable[Any]) -> object:
        """What a stream's events make, read back in order from its first (whoever read them
        checked that its versions run on from 1).

        The recorded facts after the start are taken as they are (`_take`), not each through
        eventsourcing's ``mutate``, which checks the id and version the reader already checked
        and filters the event's fields by the method's signature: most of the cost of folding
        a job. A reader may give those facts but the last as the `RecordedFact` they make (read
        straight from their verified records); the last is an event, whose version and time
        the job takes. The start, the seal, and any stream that is not a job's fold as they
        would."""
        events = list(events)
        job = fold_events(None, events[:1])
        rest = events[1:]
        taken = next(
            (n for n, e in enumerate(rest) if not isinstance(e, Job.Recorded | RecordedFact)),
            len(rest),
        )
        if isinstance(job, Job) and taken:
            recorded: list[Job.Recorded | RecordedFact] = rest[:taken]
            last = recorded[-1]
            if not isinstance(last, Job.Recorded):
                msg = "the last recorded fact of a run is given as its event"
                raise TypeError(msg)
            for e in recorded:
                job._take(
                    e
                    if isinstance(e, RecordedFact)
                    else RecordedFact(e.sequence_index, e.event_type, e.event_id, e.payload)
                )
            # What ``mutate`` leaves set after the last of them.
            job.version = last.originator_version
            job.modified_on = last.timestamp
            rest = rest[taken:]
        return fold_events(job, rest)

    def seal(self, event_count: int, mac_digest: str) -> None:
        if self.sealed:
            msg = f"job {self.job_id} is already sealed"
            raise JobSealedError(msg)
        if event_count != self.version:
            msg = f"seal counts {event_count} events but job {self.job_id} has {self.version}"
            raise InvalidInput(msg)
        self._sealed(event_count=event_count, mac_digest=mac_digest)

    @event(Sealed)
    def _sealed(self, event_count: int, mac_digest: str) -> None:
        self.sealed = True
        self.sealed_event_count = event_count
        self.sealed_mac_digest = mac_digest


def sequence_problem(job: Job) -> str | None:
    """Why the job's facts are not in event_sequence_index order with seed-derived ids, if so."""
    for position, fact in enumerate(job.facts):
        if fact.sequence_index != position:
            return f"the event at position {position} has sequence index {fact.sequence_index}"
        if fact.event_id != event_id(job.job_seed, position, fact.event_type):
            return (
                f"the event id at sequence index {position} is not"
                " sha256(job_seed:sequence_index:event_type)"
            )
    return None


class JobSealWitness(MaceAggregate):
    """A second, independent record of a job's seal, written in the same transaction.

    ``job_id`` is the job's `Job.scoped_id`: its id, prefixed by its tenant outside the default.
    """

    class Witnessed(MaceAggregate.Created):
        job_id: str
        event_count: int
        mac_digest: str

    NAME_PREFIX = "job-seal"
    NAME_FIELD = "job_id"

    @event(Witnessed)
    def __init__(self, job_id: str, event_count: int, mac_digest: str) -> None:
        self.job_id = job_id
        self.event_count = event_count
        self.mac_digest = mac_digest


class JobRegistry(MaceAggregate):
    """The store-wide job counter that stores written before the job index was a read model
    hold: every job numbered from 0, registered in the job's own transaction.

    Never written now (every job raced for the registry's next version, so concurrent writers
    failed); its events stay readable, and are verified with every other event, in the stores
    that have them.
    """

    class Opened(MaceAggregate.Created):
        store: str

    class Registered(MaceAggregate.Event):
        job_id: str
        job_number: int

    NAME_PREFIX = "job-registry"
    NAME_FIELD = "store"
    STORE = "store"

    @event(Opened)
    def __init__(self, store: str) -> None:
        self.store = store
