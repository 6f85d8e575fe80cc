"""A run recorded from outside may not carry in clear a value its privacy rules deny.

The ledger stores an outside run as sent, so it cannot mask a refused value faithfully; it
refuses the event instead (exit 2 / 422, nothing written) and the emitter records the refused
value as null. The rules are the run's declared privacy snapshot, else the Stage-0 default.
Through ``mace ingest``, the HTTP batches and the Python recorder, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error
from support.ledger_fixtures import RawTable, run, store_of

from domain.events import RunStarted, SemWrite
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.application.privacy_rules import ClearPrivateValue
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.storage.settings import Settings

SECRET = "hunter2"
DENIED = "privacy rules never let the ledger keep in clear: record a refused value as null"


def sem_write(attribute: str, value: Any) -> dict[str, Any]:
    return {
        "type": "SemWrite",
        "iteration": 0,
        "key": f"user/person/alice/{attribute}",
        "value": value,
        "status": "failed",
        "reason": "denied",
    }


def run_file(tmp_path: Path, write: dict[str, Any], **start: Any) -> str:
    lines = [
        {"type": "RunStarted", "seed": "r1", "input": "remember something", **start},
        {"type": "StageTransition", "to_stage": "answer"},
        write,
        {"type": "RunCompleted", "final_output": "no"},
    ]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def stored_bytes(settings: Settings) -> bytes:
    rows = RawTable(settings).execute("SELECT state FROM {table}")
    return b"".join(bytes(state) for (state,) in rows)


def test_ingest_refuses_a_denied_value_in_clear_and_writes_nothing(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "run", "2 + 2", "--seed", "s0")[0] == 0
    before = stored_bytes(cli_env)
    path = run_file(tmp_path, sem_write("password", SECRET))
    code, out, err = run(capsys, "ingest", path)
    assert (code, out) == (2, "")
    held = "SemWrite.value holds a value kept under 'password', which the run's"
    assert err.startswith(f"mace: INVALID_INPUT: {path} event 2: {held} {DENIED}")
    assert err.count("\n") == 1
    assert stored_bytes(cli_env) == before

    code, _, err = run(capsys, "ingest", run_file(tmp_path, sem_write("password", None)))
    assert code == 0, err
    assert SECRET.encode() not in stored_bytes(cli_env)


def test_the_runs_declared_privacy_snapshot_decides(ledger: Ledger) -> None:
    strict, _ = ledger.snapshots.put(
        Snapshot.declare("privacy", {"deny_sem_attributes": ["favorite_color"]})
    )
    write = SemWrite.model_validate(sem_write("favorite_color", "blue"))
    declared = RunRecorder(
        ledger.run_uploads,
        RunStarted(seed="r1", input="x", snapshot_ids={"privacy": strict.snapshot_id}),
    )
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ClearPrivateValue, match=DENIED):
        declared.emit(write)
    assert store_of(ledger).recorder.max_notification_id() == before
    # Under the Stage-0 default a favourite colour is no secret.
    default = RunRecorder(ledger.run_uploads, RunStarted(seed="r1", input="x"))
    default.emit(write)
    assert default.complete("ok").job_id


def test_a_batch_with_a_denied_value_in_clear_is_422_and_nothing_is_kept(
    api: Api, settings: Settings
) -> None:
    run_id = api.open_run({"type": "RunStarted", "seed": 7, "input": "remember"})
    before = api.position()
    batch = [
        {"event_id": "e1", "event": {"type": "StageTransition", "to_stage": "plan"}},
        {"event_id": "e2", "event": sem_write("ssn", "078-05-1120")},
    ]
    response = api.send(run_id, batch)
    assert_error(response, 422, "INVALID_INPUT", field="body.events.1.event")
    assert DENIED in response.json()["error"]["message"]
    assert api.position() == before
    assert b"078-05-1120" not in stored_bytes(settings)
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 0
