"""Recording an outside run pays each guarantee once (issue 29 points 1 and 4), on SQLite and
PostgreSQL, on a store never checkpointed and on one checkpointed as every CLI write leaves it:
counted, never timed, so that a redundant read, proof, validation or encoding that comes back
fails here.

One run of the Stage-0 iteration recorded through ``RunImports.record_once`` (what ``mace
ingest`` calls): nothing is read before its write but the head proof of the streams it creates
(one read of the head index, whatever their number), and, for a tenant other than the default,
the first record of the stream its id alone names (a job that tenant recorded before ids were
scoped, which no key of the new stream covers). Whether the content or the job id was recorded
before is the unique keys' answer, in the write itself (`test_resent_runs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from support.recorder_calls import recorder_calls

from domain.job import DEFAULT_TENANT
from domain.run_file import ParsedRun
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.tables import CheckpointTables
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
    unscoped = [] if tenant == DEFAULT_TENANT else [("select_events", (("limit", 1),))]
    assert sent == [*unscoped, ("insert_events_with", ROWS)]
    assert len(proofs) == 1  # the job's stream, the index and the unscoped one: one read
    assert ledger.jobs.reflective_log(log.job_id, tenant=tenant).job_id == log.job_id
