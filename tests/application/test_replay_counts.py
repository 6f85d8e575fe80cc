"""A Stage-0 job's replay pays each step once (issue 29), on SQLite and PostgreSQL, on a
checkpointed store as CLI writes leave it: counted, never timed, so that redundant work that comes
back fails here.

An audit replays every job through the same `replay_job` a single replay runs. Per replayed job:
the snapshots it runs under are parsed once for the whole audit (each is the same verified object
for every job naming it); the re-run writes each of its events canonically once, when it makes
them, and those bytes are compared with the recorded ones, not each trace field and event kind
encoded again on both sides; the reducers' re-folds are checked by their digests, with no model
built to hold them unless they differ.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from pydantic import BaseModel

import domain.canonical as canonical
from domain.job import Job
from domain.snapshot import SnapshotKind
from domain.stage0.config import parse_config
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.signed_record import (
    RecordCheck,
    VerifiedRecord,
    verify_record,
)
from infrastructure.storage.settings import Settings
from projections.audit import AuditScope, Verdict
from projections.replay import replay_job

JOBS = 3
ENCODINGS_A_JOB = 12
"""A replayed Stage-0 job's canonical encodings: its re-run's RouterDecision, AgentOutput (and
the copy its capture mode stores, compared with the record), IterationTrace, the AgentOutput's
two content hashes, the BrainState digests before and after the iteration, the reducers'
SelfRepresentation and BrainState digests, and the final answer compared (51.7 before: every
trace field and every compared event kind encoded again on both sides, and a model built for
every materialised state)."""
VALIDATIONS_A_JOB = Counter(
    {
        # Each recorded fact decoded once as its Run Event.
        "InputReceived": 1,
        "RouterDecision": 2,  # decoded, and the re-run's
        "AgentOutput": 2,  # decoded, and the re-run's
        "IterationTrace": 2,  # decoded, and the re-run's
        "JobCompleted": 1,
        # The output the capture mode could not keep. (The re-run's BrainState after its
        # iteration is made, not validated: its digest writes it canonically.)
        "MissingArtifact": 1,
    }
)


@contextmanager
def per_replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Counter[str]]]:
    """For each replay run while the block runs, what it did: canonical encodings (the one
    function every canonical writing passes through, `canonical_json` and `write` alike) and
    pydantic validations (a model built or validated from data, by class name)."""
    counted: Counter[str] = Counter()
    replays: list[Counter[str]] = []
    encode = canonical._canonical

    def encoding(obj: object) -> tuple[bytes, bool]:
        counted["canonical_json"] += 1
        return encode(obj)

    init = BaseModel.__init__
    validate = BaseModel.model_validate.__func__  # type: ignore[attr-defined]

    def building(self: BaseModel, /, **data: Any) -> None:
        counted[type(self).__name__] += 1
        init(self, **data)

    def validating(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> Any:
        counted[cls.__name__] += 1
        return validate(cls, obj, *args, **kwargs)

    def replaying(*args: Any, **kwargs: Any) -> Any:
        counted.clear()
        try:
            return replay_job(*args, **kwargs)
        finally:
            replays.append(Counter(counted))

    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_canonical", encoding)
        patch.setattr(BaseModel, "__init__", building)
        patch.setattr(BaseModel, "model_validate", classmethod(validating))
        patch.setattr("infrastructure.application.replays.replay_job", replaying)
        yield replays


def record_jobs(ledger: Ledger) -> list[str]:
    job_ids = [ledger.jobs.run(f"what is {n} + 3?", f"s{n}").job_id for n in range(JOBS)]
    ledger.checkpoints.write()  # as every CLI write leaves the store
    return job_ids


def audit(ledger: Ledger, settings: Settings) -> None:
    with AuditWorkers(settings, 1) as one:
        report = ledger.audits.audit(AuditScope(), one)
    assert [job.verdict for job in report.findings.jobs] == [Verdict.OK] * JOBS


def counting(monkeypatch: pytest.MonkeyPatch, owner: str, parse: Callable[..., Any]) -> list[str]:
    calls: list[str] = []

    def parsing(kind: SnapshotKind, *args: Any, **kwargs: Any) -> Any:
        calls.append(kind.value)
        return parse(kind, *args, **kwargs)

    monkeypatch.setattr(owner, parsing)
    return calls


def test_an_audit_parses_each_snapshot_once_for_all_its_jobs(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_jobs(ledger)
    parsed = counting(monkeypatch, "projections.replay.parse_config", parse_config)
    audit(ledger, settings)
    assert sorted(parsed) == sorted(kind.value for kind in SnapshotKind)  # not once a job


def test_a_replayed_stage0_job_encodes_and_validates_each_value_once(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_jobs(ledger)
    with per_replay(monkeypatch) as replays:
        audit(ledger, settings)
    assert len(replays) == JOBS
    # The first replay reads, decodes and parses the snapshots the others share.
    for done in replays[1:]:
        encodings = done.pop("canonical_json")
        assert (encodings, done) == (ENCODINGS_A_JOB, VALIDATIONS_A_JOB)


def test_an_audit_checks_each_record_of_a_job_once(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan verifies a sealed job's stream whole (versions, MACs, seal) and names the job
    from its verified start: no record's MAC checked twice (the start was, once to name the
    job and again with its stream), each by the scan's own `RecordCheck`, none by the general
    path of a stream read (`verify_record`, left to judge a record that fails:
    `test_audit_macs.py`)."""
    streams = {Job.id_for(job_id) for job_id in record_jobs(ledger)}
    checked: Counter[tuple[object, int]] = Counter()
    general: list[tuple[object, int]] = []
    in_read = RecordCheck.verified

    def checking(check: RecordCheck, stored: StoredEvent) -> VerifiedRecord | None:
        if stored.originator_id in streams:
            checked[stored.originator_id, stored.originator_version] += 1
        return in_read(check, stored)

    def verifying(keyring: Keyring, stored: StoredEvent) -> VerifiedRecord:
        if stored.originator_id in streams:
            general.append((stored.originator_id, stored.originator_version))
        return verify_record(keyring, stored)

    monkeypatch.setattr(RecordCheck, "verified", checking)
    monkeypatch.setattr("infrastructure.storage.records.integrity.verify_record", verifying)
    audit(ledger, settings)
    assert len(checked) == 7 * JOBS  # a job's start, its five facts, its seal
    assert set(checked.values()) == {1}
    assert general == []
