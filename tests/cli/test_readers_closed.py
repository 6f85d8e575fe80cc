"""Every reader holds what it shows to the checkpointed heads (issue 27 point 5).

Each test records through ``mace`` (every writing command ends with a checkpoint, as users have
their stores), then edits the store as someone with database access could, and asks the reader:
the governance log, the listings and ``receipts verify`` fail closed on what was deleted or edited
below the newest checkpoint; ``verify --all`` also checks the stored Merkle nodes and the read
models, and ``mace rebuild`` makes both again; a wrong checkpoint key is a configuration error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.api_support import Api, assert_error, auth, checked_client
from support.cli_output import (
    assert_failure_line,
    canonical_line,
    failed,
    listed_jobs,
    ok,
)
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, RawTable, run, signing_keys
from support.receipt_tampering import edit_receipt
from support.replay_cli import ROUTER_ID, act, council_rejection, new_job

from domain.governance import Governance
from domain.job import Job
from domain.receipt import Receipt
from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import add_token
from infrastructure.storage.checkpoints.tables import LOG_LEAVES, LOG_NODES
from infrastructure.storage.settings import Settings

TENANT = "acme"


def assert_truncated(err: str, stream: object, missing: int) -> None:
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert f"stream {stream} version {missing}: " in err, err
    assert "checkpoint " in err, err


# --- the governance log ------------------------------------------------------------------------


def test_the_governance_log_without_its_council_rejection_fails_closed(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = council_rejection(capsys, monkeypatch)
    table = RawTable(cli_env)
    stream = Governance.id_for(f"job:{job_id}")
    head = table.rows(stream)[-1][0]
    assert table.rows(stream)[-1][1].endswith("Governance.VoteCast")
    table.delete(stream, head)  # the rejection: the log would show the approval standing

    for argv in (["governance", "log", job_id], ["governance", "log"]):
        err = failed(capsys, *argv)
        assert_truncated(err, stream, head)
        assert "truncated below checkpoint" in err, err

    with Ledger.open(cli_env) as ledger, checked_client(cli_env, ledger) as client:
        response = client.get(f"/v1/jobs/{job_id}/governance", headers=auth("default_operator"))
    assert response.status_code == 500, response.content
    assert response.json()["error"]["code"] == "INTEGRITY_FAILURE"
    assert f"stream {stream} version {head}: truncated below checkpoint" in response.text


def test_the_governance_log_without_a_halt_set_in_its_middle_fails_closed(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "sec", "admin")
    ok(capsys, "governance", "halt", ROUTER_ID, "--reason", "key leak")
    act(monkeypatch, "cou", "council")
    ok(capsys, "governance", "clear", ROUTER_ID)
    table = RawTable(cli_env)
    (stream, version), *_ = table.execute(
        "SELECT originator_id, originator_version FROM {table} WHERE topic LIKE %s",
        ("%Governance.HaltSet",),
    )
    table.execute(
        "DELETE FROM {table} WHERE originator_id = %s AND originator_version = %s",
        (stream, version),
    )
    for argv in (["governance", "log", job_id], ["governance", "log"]):
        err = failed(capsys, *argv)
        assert_failure_line(err, "INTEGRITY_FAILURE")
        assert f"version {version}: " in err, err
        assert "missing" in err, err


def test_the_whole_governance_log_fails_closed_on_a_governance_stream_deleted_whole(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = council_rejection(capsys, monkeypatch)
    table = RawTable(cli_env)
    stream = Governance.id_for(f"job:{job_id}")
    table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(stream),))

    assert_truncated(failed(capsys, "governance", "log", job_id), stream, 1)
    err = failed(capsys, "governance", "log")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert "deleted below it" in err, err


# --- listings ----------------------------------------------------------------------------------


def test_the_job_listing_fails_closed_on_a_job_deleted_below_the_checkpoint(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = new_job(capsys)
    ok(capsys, "jobs", "--json")  # the view has the job
    table = RawTable(cli_env)
    stream = Job.id_for(job_id)
    head = table.rows(stream)[-1][0]
    table.delete(stream, head)

    for argv in (["jobs"], ["jobs", "--non-replayable"]):
        assert_truncated(failed(capsys, *argv), stream, head)
    with Ledger.open(cli_env) as ledger, checked_client(cli_env, ledger) as client:
        api = Api(client, ledger)
        listed = api.get("/v1/jobs", "default_operator")
        with api.unchecked() as html:  # the dashboard answers HTML
            dashboard = html.get("/dashboard", headers=auth("default_operator"))
    assert listed.status_code == 500, listed.content
    assert f"stream {stream} version {head}: truncated below checkpoint" in listed.text
    assert dashboard.status_code == 500, dashboard.text
    assert f"stream {stream} version {head}: truncated below checkpoint" in dashboard.text


# --- receipts verify ---------------------------------------------------------------------------


def a_receipt(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    act(monkeypatch, "wes", "operator")
    fact = ("--fact", "user/customer/alice/plan", '"gold"')
    ok(capsys, "memories", "add", *fact, "--tenant", TENANT)
    out = ok(capsys, "context", "plan", "--tenant", TENANT, "--json")
    receipt_id = canonical_line(out)["receipt"]["receipt_id"]
    assert isinstance(receipt_id, str)
    act(monkeypatch, "ada", "auditor")
    return receipt_id


def rewrap(settings: Settings, receipt_id: str, key_id: str) -> None:
    """Edit the receipt's body and store it under ``key_id``, a key this ledger does not hold."""

    def edit(fields: dict[str, Any]) -> None:
        fields["body"]["entries"].pop()
        fields["body"]["signature"]["key_id"] = key_id

    edit_receipt(settings, receipt_id, edit)
    raw = RawTable(settings)
    stream = Receipt.id_for(receipt_id)
    state = raw.state(stream, 1)
    _, _, mac, rest = state.split(b".", 3)
    raw.set_column(stream, 1, "state", b".".join([b"mace1", key_id.encode(), mac, rest]))


def test_a_receipt_edited_and_rewrapped_under_an_unknown_key_is_altered(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    receipt_id = a_receipt(capsys, monkeypatch)
    rewrap(cli_env, receipt_id, "k9")

    code, out, err = run(capsys, "receipts", "verify", receipt_id, "--tenant", TENANT, "--json")
    verdict = canonical_line(out)
    assert (code, verdict["valid"], verdict["reason"]) == (1, False, "record_altered"), (out, err)


def test_a_receipt_under_a_retired_and_removed_key_names_the_key_until_edited(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    receipt_id = a_receipt(capsys, monkeypatch)
    # Rotated: k2 signs from now on, and a checkpoint signed then covers the receipt.
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k1", "k2").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k2")
    act(monkeypatch, "wes", "operator")
    ok(capsys, "memories", "add", "--episode", "alice called", "--tenant", TENANT)
    # k1 retired and removed: the checkpoint holds the receipt's record as stored, so the keyring
    # lacks one of the store's keys (configuration), and the record is not said to be altered.
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k2").get_secret_value())
    act(monkeypatch, "ada", "auditor")
    code, out, err = run(capsys, "receipts", "verify", receipt_id, "--tenant", TENANT)
    assert (code, out) == (2, ""), (code, err)
    assert_failure_line(err, "KEY_MISMATCH")
    assert "MACE_SIGNING_KEYS lacks key k1" in err, err

    # Now edited under that retired key: no longer what the checkpoint holds.
    rewrap(cli_env, receipt_id, "k1")
    code, out, err = run(capsys, "receipts", "verify", receipt_id, "--tenant", TENANT, "--json")
    verdict = canonical_line(out)
    assert (code, verdict["valid"], verdict["reason"]) == (1, False, "record_altered"), (out, err)


# --- the checkpoint key ------------------------------------------------------------------------


def another_checkpoint_key(directory: Path) -> Path:
    """A valid Ed25519 key that is not the one the test stores' checkpoints are signed with."""
    path = directory / "other-checkpoint-key.pem"
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def test_a_wrong_checkpoint_key_is_a_key_mismatch_not_tampering(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    new_job(capsys)  # checkpointed under the test key
    other = another_checkpoint_key(tmp_path)
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(other))
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "ana", ["auditor"], "acme")
    monkeypatch.setenv("MACE_TOKENS_FILE", str(tokens))

    def never(*_: object, **__: object) -> None:
        raise AssertionError("the service started with a wrong checkpoint key")

    monkeypatch.setattr(uvicorn, "run", never)
    for argv in (["run", "2 + 2", "--seed", "s9"], ["serve"], ["verify", "--all"]):
        code, out, err = run(capsys, *argv)
        assert (code, out) == (2, ""), (argv, code, err)
        assert_failure_line(err, "KEY_MISMATCH")
        assert f"checkpoint key {other}" in err, err


def test_a_service_whose_store_another_checkpoint_key_signed_since_is_not_ready(
    settings: Settings, tmp_path: Path
) -> None:
    other = settings.model_copy(update={"checkpoint_key": another_checkpoint_key(tmp_path)})
    with Ledger.open(settings) as ledger, checked_client(settings, ledger) as client:
        api = Api(client, ledger)
        assert api.get("/readyz", None).json() == {"status": "ready"}
        with Ledger.open(other) as first:  # the store had no checkpoint: it opened
            first.checkpoints.write()
        head = api.position()

        assert_error(api.get("/readyz", None), 503, "NOT_READY", "not ready")
        ready = api.get("/readyz", "admin")
        assert_error(ready, 503, "NOT_READY")
        assert f"checkpoint key {TEST_CHECKPOINT_KEY} (key id " in ready.text
        refused = api.post("/v1/jobs", {"input": "2 + 3", "seed": "s1"})
        assert_error(refused, 503, "KEY_MISMATCH")
        assert api.position() == head


# --- the stored Merkle nodes -------------------------------------------------------------------


def test_emptied_log_nodes_fail_verify_all_and_rebuild_makes_them_again(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    job_id = new_job(capsys)
    ok(capsys, "checkpoint", "export", "-o", str(tmp_path / "old.json"))
    new_job(capsys, "3 + 4", "s2")
    ok(capsys, "checkpoint", "export", "-o", str(tmp_path / "new.json"))
    table = RawTable(cli_env)
    table.execute(f"DELETE FROM {LOG_NODES}")
    table.execute(f"DELETE FROM {LOG_LEAVES}")
    prove = ["checkpoint", "prove", str(tmp_path / "old.json"), str(tmp_path / "new.json")]
    export = ["export", job_id, "-o", str(tmp_path / "job.bundle")]
    for argv in (prove, export):  # every proof is made from the nodes: they fail for good
        code, _, err = run(capsys, *argv)
        assert code == 1, (argv, err)

    err = failed(capsys, "verify", "--all")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert "log node (0, 0) below checkpoint 1 is missing" in err, err

    out = ok(capsys, "rebuild", "--json")
    assert canonical_line(out)["ok"] is True
    ok(capsys, "verify", "--all")
    for argv in (prove, export):
        ok(capsys, *argv)


# --- the read models ---------------------------------------------------------------------------


def test_an_edited_read_model_row_fails_verify_all_and_rebuild_repairs_it(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = new_job(capsys, capture="none")
    listed = listed_jobs(ok(capsys, "jobs", "--non-replayable", "--json"))
    assert [j["job_id"] for j in listed] == [job_id]
    table = RawTable(cli_env)
    table.execute("DELETE FROM mace_read_models WHERE view = 'non_replayable'")
    rows = table.execute("SELECT row_key, row_json FROM mace_read_models WHERE view = 'job_index'")
    for key, text in rows:
        table.execute(
            "UPDATE mace_read_models SET row_json = %s WHERE view = 'job_index' AND row_key = %s",
            (str(text).replace('"replayable":false', '"replayable":true'), key),
        )

    err = failed(capsys, "verify", "--all")
    assert_failure_line(err, "INTEGRITY_FAILURE")
    assert "read model" in err, err

    code, _, _ = run(capsys, "rebuild")
    assert code == 1  # it differed, and is rebuilt
    ok(capsys, "verify", "--all")
    listed = listed_jobs(ok(capsys, "jobs", "--non-replayable", "--json"))
    assert [j["job_id"] for j in listed] == [job_id]
