"""Fork from a step (issue 31 point 4), on SQLite and PostgreSQL, through the use case
(`ledger.forks.fork`) on stores left checkpointed as every CLI write leaves them: the iterations
before ITERATION are kept as the original recorded them (compared byte for byte), the rest re-run
under the changes and recorded as a new job that names its lineage, verifies, and replays to
itself; the original is never altered; what cannot be decided again is refused, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.hand_written_runs import ANA, R1, R4, math_iteration
from support.ledger_fixtures import RawTable
from support.policy_gates import NOTHING_DENIED_HASH, SECRETS_DENIED, gate
from test_whatif import ADDITION_ONLY, ingested, job_rows, router, stage0_job, stored

from domain.errors import ConflictError, ErrorCode, InvalidInput, MaceError, NotFoundError
from domain.fork import ForkCode, NotForkable, lineage_of
from domain.governance import Actor
from domain.job import Job
from domain.replay_access import ReplayMode
from domain.whatif import WhatIfChanges, changes_of
from infrastructure.application.fork import ForkResult
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

TWO = [*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)]


def fork(
    settings: Settings,
    job_id: str,
    at: int,
    text: str | None = None,
    actor: Actor = ANA,
    tenant: str = "default",
    **changes: str,
) -> ForkResult:
    named: WhatIfChanges | None = changes_of(changes.items()) if changes else None
    with Ledger.open(settings) as ledger:
        return ledger.forks.fork(job_id, at, actor, changes=named, text=text, tenant=tenant)


def every_row(settings: Settings) -> bytes:
    return RawTable(settings).every_byte()


def signed(state: bytes) -> bytes:
    """A stored state without its envelope (format, key id, MAC): the bytes the MAC signs."""
    return state.split(b".", 3)[3]


def kept_facts(settings: Settings, job_id: str) -> list[tuple[Any, ...]]:
    """Each recorded fact of the job as its stream holds it: index, id, type, timestamp and
    payload (its originator, the job, set apart)."""
    with Ledger.open(settings) as ledger:
        stream = ledger.jobs.stream(job_id)
    return [
        (e["sequence_index"], e["event_id"], e["event_type"], e["timestamp"], e["payload"])
        for e in stream
        if e["sequence_index"] is not None
    ]


def test_a_fork_keeps_its_prefix_as_recorded_and_reruns_the_rest(
    cli_env: Settings, tmp_path: Path
) -> None:
    ingested(cli_env, tmp_path, "two-sums", TWO)
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    original = job_rows(cli_env, "two-sums")
    result = fork(cli_env, "two-sums", 1, router=addition_only)
    report = result.report
    assert (report["verdict"], report["authoritative"]) == ("changed", False)
    assert report["first_change"] == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "router_decision",
        "recorded": R1,
        "replayed": R4,
    }
    assert all(d["iteration"] != 0 for d in report["differences"])
    assert (None, "final_answer") in [(d["iteration"], d["field"]) for d in report["differences"]]
    assert report["kept"]["iterations"] == 1
    kept = report["kept"]["events"]
    assert kept == 4  # iteration 0's input, route, output and trace
    # The original is never altered, byte for byte.
    assert job_rows(cli_env, "two-sums") == original
    # The prefix: the original's facts, payloads, ids and times, as its stream holds them.
    fork_id = result.fork_job_id
    assert kept_facts(cli_env, fork_id)[:kept] == kept_facts(cli_env, "two-sums")[:kept]
    # Their stored bytes but the MAC, which signs the stream they are in as well.
    fork_rows = job_rows(cli_env, fork_id)
    assert [signed(s) for _, _, s in original[1 : 1 + kept]] == [
        signed(s) for _, _, s in fork_rows[1 : 1 + kept]
    ]
    with Ledger.open(cli_env) as ledger:
        job = ledger.jobs.get(fork_id)
        lineage = lineage_of(job.provenance)
        assert lineage is not None
        assert (lineage.job_id, lineage.iteration) == ("two-sums", 1)
        assert lineage.changes == {"router": addition_only}
        assert job.snapshot_ids["router"] == addition_only
        assert ledger.jobs.verify(fork_id, check_sequence=True).sealed
        replay = ledger.replays.run(fork_id, ReplayMode.AUDIT, ANA)
        record = ledger.whatif.get(result.record_id)
    # The fork replays to itself (its kept iterations under the original's snapshots), and
    # says it is a fork: never authoritative.
    assert replay.outcome.ok, replay.outcome.steps[-1]
    assert not replay.outcome.authoritative
    assert any("a fork of job two-sums" in r for r in replay.outcome.non_authoritative)
    assert (record.kind, record.authoritative, record.parameters["fork_job_id"]) == (
        "fork",
        False,
        fork_id,
    )


def test_forking_the_same_thing_twice_is_a_conflict_naming_the_fork(
    cli_env: Settings, tmp_path: Path
) -> None:
    ingested(cli_env, tmp_path, "two-sums", TWO)
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    first = fork(cli_env, "two-sums", 1, router=addition_only)
    before = every_row(cli_env)
    with pytest.raises(ConflictError, match=first.fork_job_id):
        fork(cli_env, "two-sums", 1, router=addition_only)
    assert every_row(cli_env) == before
    # Another iteration, or other changes, is another fork.
    assert fork(cli_env, "two-sums", 0, router=addition_only).fork_job_id != first.fork_job_id


def test_a_live_job_forked_from_its_start_under_another_input(cli_env: Settings) -> None:
    stage0_job(cli_env)
    result = fork(cli_env, "sum", 0, text="4 * 5")
    report = result.report
    assert report["verdict"] == "changed"
    assert report["first_change"]["field"] == "agent_outputs"
    answers = [d for d in report["differences"] if d["field"] == "final_answer"]
    assert [(a["recorded"], a["replayed"]) for a in answers] == [("2 + 3 = 5", "4 * 5 = 20")]
    assert report["kept"] == {**report["kept"], "iterations": 0, "events": 0}
    with Ledger.open(cli_env) as ledger:
        assert ledger.jobs.get(result.fork_job_id).job_input == "4 * 5"
        replay = ledger.replays.run(result.fork_job_id, ReplayMode.AUDIT, ANA)
    assert replay.outcome.ok, replay.outcome.steps[-1]


def test_an_outside_run_is_not_forked_and_nothing_is_written(
    cli_env: Settings, tmp_path: Path
) -> None:
    with Ledger.open(cli_env) as ledger:
        ledger.policy.set_bundle(None, SECRETS_DENIED, ANA)
    ingested(cli_env, tmp_path, "gated", [*math_iteration(0, "2 + 3", 5), gate("deny")])
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    before = every_row(cli_env)
    with pytest.raises(NotForkable, match="event 4 GateDecision") as refused:
        fork(cli_env, "gated", 0, router=addition_only)
    assert refused.value.code is ForkCode.NOT_REDECIDABLE
    assert refused.value.code.value == "FORK_NOT_REDECIDABLE"
    with pytest.raises(NotForkable, match="no policy bundle decides"):
        fork(cli_env, "gated", 0, policy=NOTHING_DENIED_HASH)
    assert every_row(cli_env) == before


def test_a_kept_iteration_that_met_memory_is_not_forked(cli_env: Settings) -> None:
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.run("my favorite color is blue", "s1", job_id="told")
        assert any(f.event_type == "SemWrite" for f in ledger.jobs.get("told").facts)
    before = every_row(cli_env)
    with pytest.raises(NotForkable, match="writes SEM key"):
        fork(cli_env, "told", 0, text="my favorite color is green")
    assert every_row(cli_env) == before


def test_a_reran_iteration_reads_memory_as_it_stands_and_its_fork_replays(
    cli_env: Settings,
) -> None:
    stage0_job(cli_env)
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.run("my favorite color is blue", "s1", job_id="told")
    result = fork(cli_env, "sum", 0, text="what is my favorite color")
    answers = [d for d in result.report["differences"] if d["field"] == "final_answer"]
    assert [a["replayed"] for a in answers] == ["Your favorite color is blue."]
    with Ledger.open(cli_env) as ledger:
        facts = ledger.jobs.get(result.fork_job_id).facts
        replay = ledger.replays.run(result.fork_job_id, ReplayMode.AUDIT, ANA)
    assert any(f.event_type == "SemRead" and f.payload["exists"] for f in facts)
    assert replay.outcome.ok, replay.outcome.steps[-1]


@pytest.mark.parametrize(
    ("at", "actor", "tenant", "error"),
    [
        (2, ANA, "default", InvalidInput),
        (-1, ANA, "default", InvalidInput),
        (0, Actor.of("eve", ["council"]), "default", MaceError),
        (0, ANA, "acme", NotFoundError),
    ],
)
def test_bad_requests_are_refused_and_nothing_is_written(
    cli_env: Settings, at: int, actor: Actor, tenant: str, error: type[Exception]
) -> None:
    stage0_job(cli_env)
    before = every_row(cli_env)
    with pytest.raises(error) as refused:
        fork(cli_env, "sum", at, text="4 * 5", actor=actor, tenant=tenant)
    if isinstance(refused.value, MaceError):
        assert refused.value.code is ErrorCode.ACCESS_DENIED
    assert every_row(cli_env) == before


def test_a_tampered_original_is_not_forked(cli_env: Settings) -> None:
    stage0_job(cli_env)
    table = RawTable(cli_env)
    stream = Job.id_for("sum")
    table.set_column(stream, 2, "state", table.state(stream, 2).replace(b"2 + 3", b"2 + 4"))
    with pytest.raises(MaceError) as refused:
        fork(cli_env, "sum", 0, text="4 * 5")
    assert refused.value.code is ErrorCode.INTEGRITY_FAILURE


def test_a_fork_of_a_fork_keeps_what_each_kept_iteration_ran_under(
    cli_env: Settings, tmp_path: Path
) -> None:
    three = [*TWO, *math_iteration(2, "1 + 1", 2)]
    ingested(cli_env, tmp_path, "three", three)
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    first = fork(cli_env, "three", 1, router=addition_only).fork_job_id
    # Its iteration 0 ran under the original's router, its iterations 1 and 2 under
    # addition_only: kept together, they ran under no one set of snapshots.
    before = every_row(cli_env)
    with pytest.raises(NotForkable, match="two sets of snapshots"):
        fork(cli_env, first, 2)
    assert every_row(cli_env) == before
    again = fork(cli_env, first, 1, text="6 + 7")
    assert again.report["first_change"]["field"] == "router_decision"  # 6 + 7 is math again
    with Ledger.open(cli_env) as ledger:
        lineage = lineage_of(ledger.jobs.get(again.fork_job_id).provenance)
        replay = ledger.replays.run(again.fork_job_id, ReplayMode.AUDIT, ANA)
    assert lineage is not None
    assert lineage.job_id == first
    assert lineage.prefix_snapshot_ids["router"] != addition_only
    assert replay.outcome.ok, replay.outcome.steps[-1]
