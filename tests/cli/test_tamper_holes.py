"""The specific holes of issue 15 closed, each attacked by editing the store directly, on SQLite
and PostgreSQL: what no checkpoint is needed to catch. Every command here ends with a checkpoint,
so ``verify --all`` names the checkpoint that no longer holds first (its own checks of the log
against checkpoints are tests/storage/test_checkpoint_verification.py)."""

from __future__ import annotations

import pytest
from support.cli_output import assert_failure_line, canonical_line, json_lines
from support.ledger_fixtures import RawTable, run
from support.replay_cli import ROUTER_ID, act, governance_log, new_job, replay_entries, replay_json

from domain.checkpoint import CHECKPOINT_STREAM
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


def assert_checkpoint_broken(capsys: pytest.CaptureFixture[str]) -> None:
    """``verify --all`` fails on the first checkpoint that no longer holds."""
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert err.startswith(f"mace: INTEGRITY_FAILURE: stream {CHECKPOINT_STREAM} version ")
    assert " no longer holds: the log differs from it first at position " in err


def test_a_completed_job_without_its_seal_is_an_integrity_failure(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    seal_version = delete_seal_and_witness(RawTable(cli_env), job_id)
    failure = (
        f"stream {Job.id_for(job_id)} version {seal_version}: seal missing: the job's"
        " completion is not followed by its seal"
    )

    code, out, err = run(capsys, "verify", job_id)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE", failure)
    assert_checkpoint_broken(capsys)

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


def test_a_deleted_sem_version_a_job_read_fails_its_verify_and_its_replay(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = job_reading_the_newest_sem_version(capsys)
    stream = SemEntry.id_for(SEM_KEY)
    RawTable(cli_env).delete(stream, 2)  # the stream stays contiguous: only the job can tell

    code, out, err = run(capsys, "verify", job_id)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert f"stream {stream} version 2: SEM entry {SEM_KEY}: the version stamped" in err
    assert "that the job read is missing" in err

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "INTEGRITY_FAILURE"), report
    assert not report["divergences"]


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
    RawTable(cli_env).execute(
        "DELETE FROM {table} WHERE originator_id = %s", (RawTable(cli_env).key(stream),)
    )

    assert_checkpoint_broken(capsys)

    code, out, err = run(capsys, "jobs", "--non-replayable", "--json")
    assert (code, err) == (0, "")
    (listed,) = json_lines(out)
    assert (listed["job_id"], listed["replayable"]) == (job_id, False)
    assert listed["missing_artifacts"][-1]["reason"] == (
        f"snapshot {ROUTER_ID} was in the ledger when the job completed and is gone"
    )
    with Ledger.open(cli_env) as ledger:  # what the dashboard's gaps show
        gaps = ledger.read_models.rows(NON_REPLAYABLE)
    assert [g["job_id"] for g in gaps] == [job_id]
