"""The specific holes of issue 15 closed, each attacked by editing the store directly, on SQLite
and PostgreSQL: what no checkpoint is needed to catch (so each attack also removes the
checkpoints, which would catch it first: tests/cli/test_truncated_streams.py)."""

from __future__ import annotations

import pytest
from support.cli_output import assert_failure_line, canonical_line, listed_jobs
from support.ledger_fixtures import RawTable, run
from support.replay_cli import ROUTER_ID, act, governance_log, new_job, replay_entries, replay_json

from domain.job import Job, JobSealWitness
from domain.sem import SemEntry
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.read_model_rows import NON_REPLAYABLE

SEM_KEY = "user/person/u1/favorite_color"


def job_reading_the_newest_sem_version(capsys: pytest.CaptureFixture[str]) -> str:
    """A job that read version 2 (the newest) of a SEM entry; its id."""
    for text, seed in (("my favorite color is red", "s1"), ("my favorite color is blue", "s2")):
        code, _, err = run(capsys, "run", text, "--seed", seed, "--user", "u1")
        assert (code, err) == (0, ""), err
    code, out, err = run(
        capsys, "run", "what is my favorite color", "--seed", "s3", "--user", "u1", "--json"
    )
    assert (code, err) == (0, ""), err
    report = canonical_line(out)
    assert [r["value"] for r in report["sem_reads"]] == ["blue"]
    return str(report["job_id"])


def delete_seal_and_witness(table: RawTable, job_id: str) -> int:
    """Delete a sealed job's seal and its witness together; the version the seal had."""
    stream = Job.id_for(job_id)
    seal_version = table.rows(stream)[-1][0]
    table.delete(stream, seal_version)
    table.delete(JobSealWitness.id_for(job_id), 1)
    return seal_version


def test_a_completed_job_without_its_seal_is_an_integrity_failure(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    table = RawTable(cli_env)
    seal_version = delete_seal_and_witness(table, job_id)
    table.forget_checkpoints()
    failure = (
        f"stream {Job.id_for(job_id)} version {seal_version}: seal missing: the job's"
        " completion is not followed by its seal"
    )

    for argv in (["verify", "--all"], ["verify", job_id]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (1, "")
        assert_failure_line(err, "INTEGRITY_FAILURE", failure)

    # Replay fails closed (exit 1, recorded), never "job is open" (exit 2).
    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "INTEGRITY_FAILURE")
    assert_failure_line(err, "INTEGRITY_FAILURE", f"job stream: {failure}")
    entries = [e for e in replay_entries(governance_log(capsys)) if e["scope"] == f"job:{job_id}"]
    assert [(e["event"], e.get("error_code")) for e in entries] == [
        ("REPLAY_REQUEST", None),
        ("REPLAY_RESULT", "INTEGRITY_FAILURE"),
    ]


@pytest.mark.parametrize("checkpoints", ["kept", "deleted too"])
def test_a_deleted_sem_version_a_job_read_is_caught_by_the_heads_or_diverges(
    checkpoints: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The job's claim is no evidence of tampering (an emitter could claim any version): the
    store's checkpointed heads are. With them, the shortened stream is an integrity failure;
    without them, the replay meets the key as the log now holds it and diverges on the read."""
    job_id = job_reading_the_newest_sem_version(capsys)
    stream = SemEntry.id_for(SEM_KEY)
    table = RawTable(cli_env)
    table.delete(stream, 2)  # the stream stays contiguous
    act(monkeypatch, "ana", "admin,auditor")
    if checkpoints == "kept":
        code, out, err = run(capsys, "verify", job_id)
        assert (code, out) == (1, "")
        assert_failure_line(err, "INTEGRITY_FAILURE")
        assert f"stream {stream}" in err and "checkpoint" in err
        code, report, err = replay_json(capsys, job_id)
        assert (code, report["error_code"]) == (1, "INTEGRITY_FAILURE"), report
        return
    table.forget_checkpoints()
    code, out, err = run(capsys, "verify", job_id)
    assert (code, err) == (0, "")
    assert "1 SEM entries verified to their checkpointed heads (a deleted version fails" in out
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE"), report
    (divergence,) = report["divergences"]
    assert (divergence["iteration"], divergence["field"]) == (0, f"sem_read {SEM_KEY}")
    assert (divergence["recorded"]["value"], divergence["replayed"]["value"]) == ("blue", "red")


def test_per_job_verify_covers_the_sem_versions_the_job_read(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = job_reading_the_newest_sem_version(capsys)
    table = RawTable(cli_env)
    stream = SemEntry.id_for(SEM_KEY)
    state = bytearray(table.state(stream, 2))
    state[-3] ^= 0x01
    table.set_column(stream, 2, "state", bytes(state))

    code, out, err = run(capsys, "verify", job_id)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE", f"stream {stream} version 2: MAC mismatch")


def test_a_job_whose_declared_snapshot_is_gone_fails_verify_and_is_listed_as_a_gap(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = new_job(capsys)
    stream = Snapshot.id_for(ROUTER_ID)
    table = RawTable(cli_env)
    table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(stream),))
    table.forget_checkpoints()

    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "INTEGRITY_FAILURE",
        f"stream {stream} version 1: snapshot {ROUTER_ID} declared by job {job_id} is gone",
    )

    code, out, err = run(capsys, "jobs", "--non-replayable", "--json")
    assert (code, err) == (0, "")
    (listed,) = listed_jobs(out)
    assert (listed["job_id"], listed["replayable"]) == (job_id, False)
    assert listed["missing_artifacts"][-1]["reason"] == (
        f"snapshot {ROUTER_ID} was in the ledger when the job completed and is gone"
    )
    with Ledger.open(cli_env) as ledger:  # what the dashboard's gaps show
        gaps = ledger.read_models.rows(NON_REPLAYABLE)
    assert [g["job_id"] for g in gaps] == [job_id]
