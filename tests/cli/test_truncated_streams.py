"""No use case acts on a stream shorter than the newest checkpoint says (issue 15 point 4).

Each test records through ``mace`` (every writing command ends with a checkpoint), deletes a
stream's tail, or the whole stream, below that checkpoint as someone with database access could,
and runs the use case: INTEGRITY_FAILURE, exit 1, naming the stream, the first missing version
and the checkpoint. Without the head check each of these answered from the shorter stream.
"""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest
from support.cli_output import (
    assert_failure_line,
    canonical_line,
    failed,
    json_error_as_line,
    listed_jobs,
    ok,
)
from support.ledger_fixtures import RawTable, run
from support.receipt_examples import BUNDLE
from support.replay_cli import ROUTER_ID, act, council_rejection, new_job, replay_json

from domain.governance import Governance
from domain.job import Job, JobSealWitness
from domain.memories import MemoryLog
from domain.policy_book import PolicyBook, scope_of
from domain.receipt import Receipt
from domain.sem import SemEntry
from domain.snapshot import Snapshot
from infrastructure.storage.settings import Settings

TENANT = "acme"
SEM_KEY = "user/customer/alice/plan"


def assert_truncated(err: str, stream: UUID, missing: int, head: int) -> None:
    """One line: INTEGRITY_FAILURE naming the stream, its first missing version, the checkpoint
    and the head it records."""
    if err.startswith("{"):
        err = json_error_as_line(err)
    assert_failure_line(err, "INTEGRITY_FAILURE")
    held = f"ends at version {missing - 1}" if missing > 1 else "holds none of it"
    assert f"stream {stream} version {missing}: truncated below checkpoint " in err, err
    assert f", which records the stream's head at version {head}; the store {held}" in err, err


def delete_from(table: RawTable, stream: UUID, version: int) -> None:
    """Delete the stream's events from ``version`` on (1: the whole stream)."""
    table.execute(
        "DELETE FROM {table} WHERE originator_id = %s AND originator_version >= %s",
        (table.key(stream), version),
    )


def last_version(table: RawTable, stream: UUID) -> int:
    return table.rows(stream)[-1][0]


def the_stream_with(table: RawTable, topic_end: str) -> tuple[UUID, int]:
    """The one stored event whose topic ends with ``topic_end``: its stream and version."""
    rows = table.execute(
        "SELECT originator_id, originator_version FROM {table} WHERE topic LIKE %s",
        (f"%{topic_end}",),
    )
    assert len(rows) == 1, rows
    stream, version = rows[0]
    return UUID(str(stream)), int(version)


# --- replay -------------------------------------------------------------------------------------


def test_replay_of_a_job_whose_tail_and_witness_were_deleted_fails_closed(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    table = RawTable(cli_env)
    stream = Job.id_for(job_id)
    head = last_version(table, stream)
    delete_from(table, stream, head - 1)  # the completion and its seal: the job looks open
    delete_from(table, JobSealWitness.id_for(job_id), 1)

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "INTEGRITY_FAILURE"), err
    assert "truncated below checkpoint" in err


def test_replay_of_a_job_whose_snapshot_was_deleted_names_it_missing_with_the_proof(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """REPLAY-02 as a user meets it: presence before signatures (seed 000 section 6), so
    MISSING_SNAPSHOT naming the snapshot, the checkpoint as the proof it was deleted, and a halt
    on it as on a forged one."""
    job_id = new_job(capsys)
    stream = Snapshot.id_for(ROUTER_ID)
    delete_from(RawTable(cli_env), stream, 1)

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "MISSING_SNAPSHOT"), err
    assert report["error_message"].startswith(
        f"missing router {ROUTER_ID} (deleted: checkpoint "
    ), report["error_message"]
    assert report["error_message"].endswith(
        f" records its stream {stream} at version 1; the store holds none of it)"
    )
    the_stream_with(RawTable(cli_env), "Governance.HaltSet")  # the halt, stored once
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"]) == (1, "MISSING_SNAPSHOT"), err

    # Listing gaps is what the read models are for: the job is listed, the snapshot named.
    code, out, err = run(capsys, "jobs", "--non-replayable", "--json")
    assert (code, err) == (0, "")
    (listed,) = listed_jobs(out)
    assert (listed["job_id"], listed["replayable"]) == (job_id, False)
    assert ROUTER_ID in listed["missing_artifacts"][-1]["reason"]


# --- governance ---------------------------------------------------------------------------------


def test_a_halt_lifted_by_deleting_its_row_still_stops_replay_and_clear(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's first attack: delete the one HaltSet row."""
    job_id = new_job(capsys)
    act(monkeypatch, "sec", "admin")
    ok(capsys, "governance", "halt", ROUTER_ID, "--reason", "key leak")
    table = RawTable(cli_env)
    stream, version = the_stream_with(table, "Governance.HaltSet")
    delete_from(table, stream, version)

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert (code, report["error_code"], report["ok"]) == (1, "INTEGRITY_FAILURE", False)
    assert f"stream {stream} version {version}: truncated below checkpoint " in err

    act(monkeypatch, "cou", "council")
    err = failed(capsys, "governance", "clear", ROUTER_ID)
    assert_truncated(err, stream, version, version)
    act(monkeypatch, "sec", "admin")
    err = failed(capsys, "governance", "halt", ROUTER_ID, "--reason", "again")
    assert_truncated(err, stream, version, version)


def test_a_deleted_council_rejection_blocks_votes_and_force_continue(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = council_rejection(capsys, monkeypatch)
    table = RawTable(cli_env)
    stream = Governance.id_for(f"job:{job_id}")
    head = last_version(table, stream)
    delete_from(table, stream, head)  # the rejection: the approval would stand again

    act(monkeypatch, "cou2", "council")
    err = failed(capsys, "governance", "approve", job_id, "--action", "force_continue")
    assert_truncated(err, stream, head, head)
    act(monkeypatch, "ana", "admin,auditor")
    err = failed(capsys, "replay", job_id, "--force-continue")
    assert_truncated(err, stream, head, head)


# --- SEM ----------------------------------------------------------------------------------------


def test_sem_get_of_a_key_whose_newest_version_was_deleted_is_an_integrity_failure(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, "sem", "put", SEM_KEY, '"silver"')
    ok(capsys, "sem", "put", SEM_KEY, '"gold"')
    stream = SemEntry.id_for(SEM_KEY)
    delete_from(RawTable(cli_env), stream, 2)

    # Never the older value.
    assert_truncated(failed(capsys, "sem", "get", SEM_KEY), stream, 2, 2)
    assert_truncated(failed(capsys, "sem", "put", SEM_KEY, '"bronze"'), stream, 2, 2)


# --- memories and context -----------------------------------------------------------------------


def memories(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> UUID:
    act(monkeypatch, "wes", "operator")
    for value in ('"gold"', '"platinum"'):
        ok(capsys, "memories", "add", "--fact", SEM_KEY, value, "--tenant", TENANT)
    return MemoryLog.id_for(TENANT)


def test_a_memory_log_missing_its_tail_refuses_writes_reads_and_context(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = memories(capsys, monkeypatch)
    table = RawTable(cli_env)
    head = last_version(table, stream)
    delete_from(table, stream, head)

    for argv in (
        ["memories", "add", "--episode", "alice called", "--tenant", TENANT],
        ["memories", "list", "--tenant", TENANT],
        ["context", "plan", "--tenant", TENANT],
    ):
        assert_truncated(failed(capsys, *argv), stream, head, head)


# --- receipts -----------------------------------------------------------------------------------


def receipt(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    memories(capsys, monkeypatch)
    out = ok(capsys, "context", "plan", "--tenant", TENANT, "--json")
    receipt_id = canonical_line(out)["receipt"]["receipt_id"]
    assert isinstance(receipt_id, str)
    return receipt_id


def test_replay_of_a_deleted_receipt_is_an_integrity_failure_not_a_missing_one(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    receipt_id = receipt(capsys, monkeypatch)
    stream = Receipt.id_for(receipt_id)
    delete_from(RawTable(cli_env), stream, 1)

    act(monkeypatch, "ada", "auditor")
    for argv in (["receipts", "replay", receipt_id], ["receipts", "verify", receipt_id]):
        assert_truncated(failed(capsys, *argv, "--tenant", TENANT), stream, 1, 1)


def test_a_receipt_deleted_whole_refuses_the_listing_that_names_it(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No book stream lists a tenant's receipts any more: the receipt index is a read model, and
    # each receipt it names is read, head-checked, when listed.
    receipt(capsys, monkeypatch)
    out = ok(capsys, "context", "invoice", "--tenant", TENANT, "--json")
    stream = Receipt.id_for(canonical_line(out)["receipt"]["receipt_id"])
    ok(capsys, "receipts", "list", "--tenant", TENANT)  # the index names both
    delete_from(RawTable(cli_env), stream, 1)

    assert_truncated(failed(capsys, "receipts", "list", "--tenant", TENANT), stream, 1, 1)


# --- policy -------------------------------------------------------------------------------------


def test_a_policy_book_missing_its_tail_is_never_read_as_the_older_bundle(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    memories(capsys, monkeypatch)
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(BUNDLE, encoding="utf-8")
    act(monkeypatch, "ada", "auditor")
    ok(capsys, "policy", "set", str(bundle), "--tenant", TENANT)
    ok(capsys, "policy", "clear", "--tenant", TENANT)
    table = RawTable(cli_env)
    stream = PolicyBook.id_for(scope_of(TENANT))
    head = last_version(table, stream)
    delete_from(table, stream, head)  # the clear: the bundle would be in force again

    assert_truncated(failed(capsys, "policy", "show", "--tenant", TENANT), stream, head, head)
    act(monkeypatch, "wes", "operator")
    assert_truncated(failed(capsys, "context", "plan", "--tenant", TENANT), stream, head, head)


def test_a_policy_book_deleted_whole_is_an_integrity_failure(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    bundle = tmp_path / "bundle.yaml"
    bundle.write_text(BUNDLE, encoding="utf-8")
    act(monkeypatch, "ada", "auditor")
    ok(capsys, "policy", "set", str(bundle), "--tenant", TENANT)
    table = RawTable(cli_env)
    stream = PolicyBook.id_for(scope_of(TENANT))
    head = last_version(table, stream)
    delete_from(table, stream, 1)

    err = failed(capsys, "policy", "show", "--tenant", TENANT, "--json")
    assert_truncated(err, stream, 1, head)
