"""Recording an outside run pays each guarantee once (issue 29 points 1 and 4), on SQLite and
PostgreSQL, on a store never checkpointed and on one checkpointed as every CLI write leaves it:
counted, never timed, so that a redundant read, proof, validation or encoding that comes back
fails here.

One run of the Stage-0 iteration recorded through ``RunImports.record_once`` (what ``mace
ingest`` calls): nothing is read before its write but the head proof of the streams it creates
(one read of the head index, whatever their number; none once the process has proven the whole
index), and, for a tenant other than the default,
the first record of the stream its id alone names (a job that tenant recorded before ids were
scoped, which no key of the new stream covers). Whether the content or the job id was recorded
before is the unique keys' answer, in the write itself (`test_resent_runs`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
from support.encoding_counts import encodings
from support.recorder_calls import recorder_calls
from support.validation_counts import validations

from domain import events as run_events
from domain.job import DEFAULT_TENANT
from domain.run_file import ParsedRun, parse_run
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.head_check import HeadCheck
from infrastructure.storage.checkpoints.tables import CheckpointTables
from infrastructure.storage.records import mapper, signed_record
from infrastructure.tooling.bench import record_runs

CHECKPOINTED = pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointed", "not"])
TENANTS = pytest.mark.parametrize("tenant", [DEFAULT_TENANT, "acme"])
ROWS = 9
"""A recorded Stage-0 run's rows: the job's start, its four facts, its completion and seal, the
seal's witness and the run's content index."""


@contextmanager
def head_proofs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every read of the head index while the block runs: how many buckets each proves."""
    read = CheckpointTables.head_paths
    proofs: list[int] = []

    def counted(tables: CheckpointTables, buckets: Any, positions: Any) -> Any:
        proofs.append(len(buckets))
        return read(tables, buckets, positions)

    with monkeypatch.context() as patch:
        patch.setattr(CheckpointTables, "head_paths", counted)
        yield proofs


def statements(ledger: Ledger) -> Any:
    """Every read or write of the events table: the method, and a read's options or a write's
    rows."""
    names = ("select_events", "select_streams", "insert_events_with", "last_versions")

    def described(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if name == "insert_events_with":
            return (name, len(args[0]))
        return (name, tuple(sorted(kwargs.items())))

    return recorder_calls(ledger, names, described)


def warmed(ledger: Ledger, checkpointed: bool) -> list[ParsedRun]:
    """Two runs ready to record, after one recorded: the snapshots they declare and the privacy
    rules (immutable, content-addressed) are read and verified once a process, not once a run."""
    first, *runs = record_runs(ledger, "counted", 3)
    ledger.run_imports.record_once(first, "warm")
    if checkpointed:
        ledger.checkpoints.write()
    return runs


@CHECKPOINTED
@TENANTS
def test_a_recorded_run_reads_nothing_before_its_write_but_its_head_proof(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool, tenant: str
) -> None:
    run, _ = warmed(ledger, checkpointed)
    with head_proofs(monkeypatch) as proofs, statements(ledger) as sent:
        log, duplicate = ledger.run_imports.record_once(run, tenant)
    assert not duplicate
    # Another tenant's id alone may name its job from before ids were scoped: its first record.
    unscoped = [] if tenant == DEFAULT_TENANT else [("select_events", (("lte", 1),))]
    assert sent == [*unscoped, ("insert_events_with", ROWS)]
    # The job's stream, the index and the unscoped one: one read. Never checkpointed, the
    # warm-up has proven enough buckets that the process proved the whole (empty) index once
    # (`head_check.WholeIndex`): no read at all.
    assert len(proofs) == (1 if checkpointed else 0)
    assert ledger.jobs.reflective_log(log.job_id, tenant=tenant).job_id == log.job_id


@TENANTS
def test_a_writer_proves_the_head_index_whole_once_a_checkpoint_not_once_a_run(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    """Each run creates streams in buckets of their own, random among 65,536: proved a path at
    a time, almost every run would read the head index. A writer that has proven enough paths
    against the newest checkpoint proves the whole index once (`head_check.WholeIndex`), and
    its next runs read nothing before their writes but the unscoped first record."""
    first, *runs, last = record_runs(ledger, "writer", 8)
    ledger.run_imports.record_once(first, "warm")
    ledger.checkpoints.write()
    for run in runs:
        ledger.run_imports.record_once(run, tenant)
    with head_proofs(monkeypatch) as proofs, statements(ledger) as sent:
        ledger.run_imports.record_once(last, tenant)
    unscoped = [] if tenant == DEFAULT_TENANT else [("select_events", (("lte", 1),))]
    assert sent == [*unscoped, ("insert_events_with", ROWS)]
    assert proofs == []


def run_of(facts: int) -> ParsedRun:
    """A run of ``facts`` stage transitions, as a Run Event Schema v1 file of it is parsed."""
    lines = [
        {"type": "RunStarted", "seed": f"s{facts}", "input": "hi", "capture_mode": "full_io"},
        *({"type": "StageTransition", "to_stage": f"stage {n}"} for n in range(facts)),
        {"type": "RunCompleted", "final_output": "done"},
    ]
    return parse_run(orjson.dumps(line) for line in lines)


@CHECKPOINTED
def test_each_event_of_a_recorded_run_is_encoded_once_and_stored_as_written(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """A fact costs two encodings, whatever else the run holds: its content, once (the privacy
    rules walk it, the content digest and the limits take its bytes), and its record (its
    payload inside as the bytes kept when it was validated). Before, three: its size for the
    limits and its payload for the job's record were each written again, and the digest walked
    every event once more inside its one encoding."""
    warmed(ledger, checkpointed)
    small, large = run_of(2), run_of(12)
    made: list[int] = []
    for run in (small, large):
        with encodings(monkeypatch) as count, proofs_encoded(monkeypatch, count) as proving:
            ledger.run_imports.record_once(run, DEFAULT_TENANT)
        made.append(count[0] - proving[0])
    assert made[1] - made[0] == 2 * 10


@contextmanager
def proofs_encoded(monkeypatch: pytest.MonkeyPatch, count: list[int]) -> Iterator[list[int]]:
    """How many of the encodings ``count`` counts the head proofs made (a bucket's leaf each:
    how many buckets a proof reads depends on what the process proved before, not on the run)."""
    heads = HeadCheck.heads
    made = [0]

    def counted(check: HeadCheck, streams: Any) -> Any:
        before = count[0]
        try:
            return heads(check, streams)
        finally:
            made[0] += count[0] - before

    with monkeypatch.context() as patch:
        patch.setattr(HeadCheck, "heads", counted)
        yield made


@CHECKPOINTED
@TENANTS
def test_a_recorded_run_validates_only_what_it_makes_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool, tenant: str
) -> None:
    """A run parsed (its events validated, their payloads written once) is recorded without
    validating any of its events again: its facts are not decoded back from what the job keeps
    to fold BrainState and SelfRepresentation or to answer the log (they are the events parsed,
    each written exactly as it holds: `RunEvent.as_read_back`), the snapshots it declares are
    parsed once a process, and its facts' records are made from their validated parts. What
    is left: the job's start, its verdict, its seal, the seal's witness and the content index,
    once each (22 validations before, for a run of four facts); for a tenant other than the
    default, the first record of the stream its id alone names (`_unscoped_owner`)."""
    run, _ = warmed(ledger, checkpointed)
    with validations(monkeypatch) as counted:
        ledger.run_imports.record_once(run, tenant)
    # The newest checkpoint is read now and then, whatever is done (`HeadCheck` keeps it a
    # while): not the run's.
    del counted["LedgerCheckpoints.Signed"]
    unscoped = {} if tenant == DEFAULT_TENANT else {"Job.Started": 1}
    made = {"Job.Started": 1, "JobCompleted": 1, "Job.Sealed": 1, "JobSealWitness.Witnessed": 1}
    expected = Counter(made) + Counter(unscoped) + Counter({"RunContent.Recorded": 1})
    assert counted == expected


def test_a_fact_written_otherwise_than_it_holds_is_folded_as_replay_decodes_it(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact whose payload the canonical form changes (a float rounded to nine decimals, -0.0)
    is folded and logged as its stored record decodes, as replay folds it: that fact alone is
    decoded from the payload the job keeps; the others are taken as parsed."""
    warmed(ledger, checkpointed=False)
    lines = [
        {"type": "RunStarted", "seed": "rounded", "input": "hi", "capture_mode": "full_io"},
        {"type": "StageTransition", "to_stage": "plain"},
        {
            "type": "ModelCallEnvelope",
            "call_id": "c1",
            "model_id": "m",
            "model_version": "1",
            "prompt_bundle_hash": "a" * 64,
            "temperature": 0.1234567891234,
            "prompt": {"x": -0.0},
            "response": "ok",
        },
        {"type": "RunCompleted", "final_output": "done"},
    ]
    run = parse_run(orjson.dumps(line) for line in lines)
    decoded: list[str] = []
    decode = run_events.decode_recorded

    def decoding(event_type: str, payload: dict[str, Any]) -> run_events.RunEvent:
        decoded.append(event_type)
        return decode(event_type, payload)

    monkeypatch.setattr(run_events, "decode_recorded", decoding)
    log, _ = ledger.run_imports.record_once(run, DEFAULT_TENANT)
    assert decoded == ["ModelCallEnvelope"]
    assert log.completion is not None
    assert log.completion == ledger.jobs.reflective_log(log.job_id).completion


@contextmanager
def dumps_of(run: ParsedRun, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Every dump of ``run``'s own parts (its start, facts, completion) while the block runs, by
    mode; not those of the events the ledger makes for its job (its completion's verdict)."""
    parts = {id(part) for part in (run.started, *run.events, run.completed)}
    dump = run_events.RunEvent.model_dump
    made: Counter[str] = Counter()

    def counted(event: run_events.RunEvent, **kwargs: Any) -> dict[str, Any]:
        if id(event) in parts:
            made[kwargs.get("mode", "python")] += 1
        return dump(event, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(run_events.RunEvent, "model_dump", counted)
        yield made


@CHECKPOINTED
def test_the_privacy_rules_walk_what_the_run_dumped_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """Each part of a recorded run (start, facts, completion) is dumped to its JSON form once,
    for its content digest, its limits and the privacy rules together (`RunContents`): the
    rules walk those forms, never a dump of their own (its payload again, for every part)."""
    warmed(ledger, checkpointed)
    run = run_of(6)
    with dumps_of(run, monkeypatch) as dumps:
        ledger.run_imports.record_once(run, DEFAULT_TENANT)
    assert dumps == Counter({"json": 1 + 6 + 1})


@CHECKPOINTED
def test_each_record_of_a_recorded_run_is_signed_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch, checkpointed: bool
) -> None:
    """The job's events are signed once, before its seal digests their MACs (`sign_ahead`), and
    stored as signed then: eventsourcing's save takes those records, not new ones. One MAC a
    row, nothing else signed."""
    warmed(ledger, checkpointed)
    sign = signed_record.sign_record
    signed: list[str] = []

    def counted(keyring: Any, stream: Any, version: int, topic: str, *rest: Any) -> bytes:
        signed.append(topic)
        return sign(keyring, stream, version, topic, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(mapper, "sign_record", counted)
        ledger.run_imports.record_once(run_of(6), DEFAULT_TENANT)
    assert len(signed) == ROWS + 2  # two facts more than the Stage-0 run's four
