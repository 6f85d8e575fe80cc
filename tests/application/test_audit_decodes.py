"""An audit and a replay decode each stored event of a job once (issue 29 point 1), on SQLite and
PostgreSQL, on checkpointed stores as CLI writes leave them: counted, never timed, so that a
second decode that comes back fails here.

Each record is decoded once (`SignedMapper.decode_stream`): a job's recorded facts straight
from their verified bodies as the facts the job holds, not validated again as events, but the
last (the job takes its version and time from it); every other record as the event its topic
names. The job is folded from those without eventsourcing's ``mutate`` (the stream was verified
whole before it: versions, MACs, seal); each fact's payload is decoded as its typed Run Event at
most once, when the replay first looks at it, and not at all when the replay stops before it
does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from eventsourcing.domain import CanMutateAggregate
from pydantic import BaseModel
from support.ledger_fixtures import RawTable

from domain.errors import ErrorCode
from domain.events import RunEvent
from domain.governance import Actor
from domain.job import Job
from domain.replay_access import ReplayMode
from domain.run_file import parse_run
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.config import parse_config
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import content_checked
from infrastructure.storage.settings import Settings
from projections.audit import AuditReport, AuditScope, Verdict

AUDITOR = Actor.of("auditor-1", ["auditor"])
STAGE0_FACTS = Counter(
    ["InputReceived", "RouterDecision", "AgentOutput", "IterationTrace", "JobCompleted"]
)


@contextmanager
def decodes(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """How many times each pydantic model is validated from data while the block runs (the
    record's event, each fact's Run Event), and how many times eventsourcing's ``mutate``
    applies a job's recorded fact: by class name, ``mutate Recorded`` for the latter."""
    counted: Counter[str] = Counter()
    validate = BaseModel.model_validate.__func__  # type: ignore[attr-defined]
    mutate = CanMutateAggregate.mutate

    def validating(cls: type[BaseModel], obj: Any, *args: Any, **kwargs: Any) -> Any:
        counted[cls.__name__] += 1
        return validate(cls, obj, *args, **kwargs)

    def mutating(event: Any, aggregate: Any) -> Any:
        if isinstance(event, Job.Recorded):
            counted["mutate Recorded"] += 1
        return mutate(event, aggregate)

    with monkeypatch.context() as patch:
        patch.setattr(BaseModel, "model_validate", classmethod(validating))
        patch.setattr(CanMutateAggregate, "mutate", mutating)
        yield counted


def audited(ledger: Ledger, settings: Settings) -> AuditReport:
    with AuditWorkers(settings, 1) as one:
        return ledger.audits.audit(AuditScope(), one)


def facts_decoded(counted: Counter[str]) -> Counter[str]:
    """The Run Events validated from data among ``counted``."""
    names = {cls.__name__ for cls in _run_event_types()}
    return Counter({name: n for name, n in counted.items() if name in names})


def _run_event_types() -> list[type[RunEvent]]:
    found, todo = [], [RunEvent]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_an_audited_job_decodes_each_record_once_and_each_fact_once(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    ledger.checkpoints.write()
    with decodes(monkeypatch) as counted:
        report = audited(ledger, settings)
    assert report.ok, report.summary()
    assert [(j.job, j.verdict) for j in report.findings.jobs] == [(job_id, Verdict.OK)]
    # The job's stream: its start, five facts, its seal; each record decoded once, its facts
    # but the last not validated as events, folded without eventsourcing's mutate, each
    # fact's payload decoded once as its Run Event.
    assert counted["Started"] == 1
    assert counted["Recorded"] == 1
    assert counted["Sealed"] == 1
    assert counted["mutate Recorded"] == 0
    assert facts_decoded(counted) == STAGE0_FACTS


def test_a_replay_decodes_each_record_once_and_each_fact_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    ledger.checkpoints.write()
    parsed: list[SnapshotKind] = []

    def parsing(kind: SnapshotKind, *args: Any, **kwargs: Any) -> Any:
        parsed.append(kind)
        return parse_config(kind, *args, **kwargs)

    monkeypatch.setattr("projections.replay.parse_config", parsing)
    with decodes(monkeypatch) as counted:
        result = ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)
    assert result.outcome.ok
    assert counted["Recorded"] == 1
    assert counted["mutate Recorded"] == 0
    assert facts_decoded(counted) == STAGE0_FACTS
    # Each declared snapshot parsed once: its usability checked by the parse the re-run uses.
    assert sorted(parsed) == sorted(SnapshotKind)


def test_facts_a_replay_never_looks_at_are_not_decoded(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run recorded without snapshots stops at seed 000 step 2 (MISSING_SNAPSHOT): its facts
    are each reported as not checked, by their recorded type, none decoded as a Run Event."""
    lines = [
        {"type": "RunStarted", "seed": 1, "input": "a run"},
        *({"type": "ErrorEvent", "code": "E_STEP", "message": f"step {n}"} for n in range(3)),
        {"type": "RunCompleted", "final_output": "done"},
    ]
    ledger.run_imports.record_once(parse_run(map(orjson.dumps, lines)))
    ledger.checkpoints.write()
    with decodes(monkeypatch) as counted:
        report = audited(ledger, settings)
    (job,) = report.findings.jobs
    assert (job.verdict, job.code) == (Verdict.NOT_REPLAYABLE, "MISSING_SNAPSHOT")
    assert job.check_counts is not None and job.check_counts["not_checked"] == 3
    assert counted["Recorded"] == 1  # its completion, the last fact
    assert counted["mutate Recorded"] == 0
    # Its completion is read (step 2 asks which snapshots it found); nothing else is.
    assert facts_decoded(counted) == Counter(["JobCompleted"])


def test_replays_decode_a_snapshot_once_a_process_and_check_its_mac_every_time(
    ledger: Ledger, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot's stream is written once: decoded and content-checked by the first replay
    that reads it, then known by its records' MACs, still read and MAC-checked by every
    replay, so bytes edited since fail the next replay as they fail the first."""
    job_id = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    ledger.checkpoints.write()
    assert ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).outcome.ok
    checked: list[Snapshot] = []

    def checking(snapshot: Snapshot) -> Snapshot:
        checked.append(snapshot)
        return content_checked(snapshot)

    monkeypatch.setattr("infrastructure.application.replays.content_checked", checking)
    with decodes(monkeypatch) as counted:
        assert ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).outcome.ok
    assert (counted["Declared"], len(checked)) == (0, 0)  # no snapshot decoded or checked again
    router = Snapshot.id_for(ledger.snapshots.default_ids()["router"])
    state = raw_table.state(router, 1)
    raw_table.set_column(router, 1, "state", state.replace(b"route", b"ROUTE", 1))
    outcome = ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).outcome
    assert outcome.error_code is ErrorCode.INTEGRITY_FAILURE
    assert outcome.error_message is not None and "MAC mismatch" in outcome.error_message


def test_a_process_keeps_a_bounded_number_of_checked_snapshots(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived service meets ever more snapshots: it keeps the newest it checked, never
    all, and one it let go is decoded and checked again when a replay needs it."""
    monkeypatch.setattr("infrastructure.application.replays.SNAPSHOTS_KEPT", 2)
    job_id = ledger.jobs.run("What is 2 + 3?", "s1").job_id
    assert len(ledger.snapshots.default_ids()) > 2
    assert ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).outcome.ok
    assert len(ledger.replays._checked) == 2
    with decodes(monkeypatch) as counted:
        assert ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).outcome.ok
    assert counted["Declared"] > 0  # the snapshots let go were decoded again
    assert len(ledger.replays._checked) == 2
