"""The specific holes of issue 15 closed, each attacked by editing the store directly, on SQLite
and PostgreSQL: what no checkpoint is needed to catch."""

from __future__ import annotations

import pytest
from support.cli_output import assert_failure_line
from support.ledger_fixtures import RawTable, run
from support.replay_cli import act, governance_log, new_job, replay_entries, replay_json

from domain.job import Job, JobSealWitness
from infrastructure.storage.settings import Settings


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
    seal_version = delete_seal_and_witness(RawTable(cli_env), job_id)
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
