"""Run bundles end to end, on SQLite and PostgreSQL: ``mace export``, ``mace import``,
``mace replay --bundle``, ``--redact`` and ``mace export-test``.

A bundle replays with no store at all and records nothing; it imports into another store byte for
byte; any change to it fails with INTEGRITY_FAILURE (exit 1); a file that is not a bundle is bad
input (exit 2); a redacted bundle holds no PII and no model I/O content; a refused import writes
nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.bundle_files import (
    assert_integrity_failure,
    bundle_json,
    bundle_replay,
    export,
    record_index,
    rewrite,
    use_store,
)
from support.cli_output import (
    NOT_REPRODUCED_LINE,
    assert_usage_error,
    canonical_line,
    event_count,
)
from support.ledger_fixtures import RawTable, run, signing_keys
from support.replay_cli import ROUTER_ID, act, diverging_run, new_job, replay_json, write_run_file
from support.sample_job import job_ids

from domain.job import Job, JobSealWitness
from domain.sem import SemEntry
from domain.stage0.refusals import MARK
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.redaction import PII_MARK

PROJECT = Path(__file__).parents[2]
PII_VALUE = "zq81xvpii"
CANARIES = (
    "PROMPT-CANARY-7f3a",
    "RESPONSE-CANARY-9c1b",
    "TOOL-CANARY-4d2e",
    "ARGS-CANARY-2a6d",
    "ERROR-CANARY-1e5f",
    "QUERY-CANARY-8b0c",
)
ZERO_HASH = "0" * 64


# --- helpers ------------------------------------------------------------------------------------


def memory_jobs(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """A job that writes a SEM fact and a later job that reads it, both keeping prompts only (a
    job that writes SEM would keep its outputs by default, which a plain export refuses)."""
    writer = new_job(capsys, "my favorite color is blue", "w1", "prompts_only")
    reader = new_job(capsys, "what is my favorite color", "r1")
    return writer, reader


def without_attempt(report: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in report.items() if k not in {"attempt", "bundle", "uri"}}


# --- replay from a bundle -----------------------------------------------------------------------


def test_bundle_replay_needs_no_store_and_records_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    _, reader = memory_jobs(capsys)
    bundle = export(capsys, reader, tmp_path / "reader.bundle.json")
    manifest, records = bundle_json(bundle)["manifest"], bundle_json(bundle)["records"]
    assert manifest["job_id"] == reader
    assert manifest["counts"] == {
        "records": manifest["counts"]["records"],
        "streams": 8,
        "job": 1,
        "seal_witness": 1,
        "snapshot": 5,
        "sem": 1,
        "governance": 0,
    }
    assert manifest["key_ids"] == ["k1"]
    assert manifest["redacted"] is False
    code, ledger_report, _ = replay_json(capsys, reader)
    assert code == 0
    rows = event_count(cli_env)

    absent = tmp_path / "absent"
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{absent}/never.db")
    code, report, err = bundle_replay(capsys, bundle)
    assert (code, err) == (0, "")
    checkpoint = report["bundle"].pop("checkpoint")
    assert report["bundle"] == {
        "file": str(bundle),
        "recorded": False,
        "redacted": False,
        "records": manifest["counts"]["records"],
    }
    assert (checkpoint["included"], checkpoint["records_included"]) == (True, len(records))
    assert (report["attempt"], report["uri"]) == (0, None)
    # The same algorithm over the same records: the same report as the ledger's replay, but
    # that a bundle holds no tenant's SEM log to prove the read against (taken as recorded).
    assert (ledger_report["authoritative"], report["authoritative"]) == (True, False)
    assert report["non_authoritative_reasons"] == [
        "the tenant's SEM log is not among the records replayed: SEM reads and writes are"
        " rebuilt from the versions the run says it met (taken as recorded)"
    ]
    verdict = {"authoritative", "non_authoritative_reasons"}
    assert {k: v for k, v in without_attempt(report).items() if k not in verdict} == {
        k: v for k, v in without_attempt(ledger_report).items() if k not in verdict
    }
    code, out, err = run(capsys, "replay", "--bundle", str(bundle))
    assert (code, err) == (0, "")
    assert out.splitlines()[-2:] == [
        f"bundle {bundle}: {checkpoint['summary']}",
        f"replayed from bundle {bundle}: nothing was recorded (no store)",
    ]
    assert not absent.exists()

    monkeypatch.setenv("MACE_STORE", cli_env.store)
    assert event_count(cli_env) == rows
    code, out, err = run(capsys, "replay", "another-job", "--bundle", str(bundle))
    assert_usage_error(code, out, err, f"bundle {bundle} holds job {reader}, not another-job")


def test_bundle_replay_keeps_the_verdict_of_a_diverging_job(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    real = new_job(capsys)
    code, _, err = run(capsys, "ingest", write_run_file(tmp_path, diverging_run(capsys, real)))
    assert code == 0, err
    bundle = export(capsys, "diverged-1", tmp_path / "diverged.json")
    code, ledger_report, _ = replay_json(capsys, "diverged-1")
    assert code == 1
    code, report, err = bundle_replay(capsys, bundle)
    assert code == 1
    assert err == f"mace: REPLAY_DIVERGENCE: {ledger_report['error_message']}\n"
    assert without_attempt(report) == without_attempt(ledger_report)


def test_bundle_replay_decides_access_from_the_bundles_governance(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    real = new_job(capsys)
    code, _, err = run(capsys, "ingest", write_run_file(tmp_path, diverging_run(capsys, real)))
    assert code == 0, err
    before = export(capsys, "diverged-1", tmp_path / "before.json")
    act(monkeypatch, "ops", "operator")
    code, report, _ = bundle_replay(capsys, before, "--mode", "production")
    assert (code, report["error_code"]) == (1, "ACCESS_DENIED")
    code, report, _ = bundle_replay(capsys, before, "--force-continue")
    assert (code, report["error_code"]) == (1, "FORCE_CONTINUE_REQUIRED")

    act(monkeypatch, "adm", "admin")
    reason = ("--reason", "known router fix")
    assert (
        run(capsys, "governance", "request", "diverged-1", "--action", "force_continue", *reason)[0]
        == 0
    )
    act(monkeypatch, "cou", "council")
    for action in ("force_continue", "production_replay"):
        assert run(capsys, "governance", "approve", "diverged-1", "--action", action)[0] == 0
    after = export(capsys, "diverged-1", tmp_path / "after.json")
    act(monkeypatch, "ops", "operator")
    code, report, _ = bundle_replay(capsys, after, "--mode", "production")
    assert report["error_code"] == "REPLAY_DIVERGENCE"  # allowed now, and still diverging
    code, report, _ = bundle_replay(capsys, after, "--force-continue")
    assert code == 1
    assert report["authoritative"] is False
    assert (
        "forced past divergences with a council-approved force-continue"
        in report["non_authoritative_reasons"]
    )
    assert [d["field"] for d in report["divergences"]][:1] == ["router_decision"]

    act(monkeypatch, "sec", "admin")
    assert run(capsys, "governance", "halt", ROUTER_ID, "--reason", "key leak")[0] == 0
    halted = export(capsys, "diverged-1", tmp_path / "halted.json")
    act(monkeypatch, "ops", "operator")
    code, report, _ = bundle_replay(capsys, halted)
    assert (code, report["error_code"]) == (1, "FORCE_HALT_REPLAY")


# --- import -------------------------------------------------------------------------------------


def test_export_import_into_another_store_then_verify_and_replay(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    other_store: str,
) -> None:
    act(monkeypatch, "ana", "auditor")
    writer, reader = memory_jobs(capsys)
    assert replay_json(capsys, reader)[0] == 0  # a governance record, which stays behind
    bundles = [export(capsys, j, tmp_path / f"{j}.json") for j in (writer, reader)]
    source = RawTable(cli_env)

    target = use_store(monkeypatch, other_store)
    code, out, err = run(capsys, "import", str(bundles[0]), "--json")
    assert (code, err) == (0, ""), err
    first = canonical_line(out)
    assert first["job_id"] == writer
    assert first["streams_present"] == []
    code, out, err = run(capsys, "import", str(bundles[1]), "--json")
    assert (code, err) == (0, ""), err
    second = canonical_line(out)
    assert second["streams_written"] == [f"job:{reader}", f"job-seal:{reader}"]
    assert len(second["streams_present"]) == 6  # five snapshots and the SEM entry: same bytes
    assert second["governance_not_imported"] == [f"governance:job:{reader}"]

    for job_id in (writer, reader):
        assert run(capsys, "verify", job_id)[0] == 0
        code, report, _ = replay_json(capsys, job_id)
        assert (code, report["ok"], report["attempt"]) == (0, True, 1)
        for stream in (Job.id_for(job_id), JobSealWitness.id_for(job_id)):
            assert RawTable(target).rows(stream) == source.rows(stream)
    key = "user/person/default/favorite_color"
    assert RawTable(target).rows(SemEntry.id_for(key)) == source.rows(SemEntry.id_for(key))
    with Ledger.open(target, create=False) as ledger:
        assert job_ids(ledger) == [writer, reader]

    rows = event_count(target)
    code, out, err = run(capsys, "import", str(bundles[1]))
    assert_usage_error(code, out, err, f"job {reader} already exists in this store")
    assert event_count(target) == rows


@pytest.mark.parametrize("which", ["writer", "reader"])
def test_a_sem_job_imported_alone_replays_against_the_sem_it_met(
    which: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    other_store: str,
) -> None:
    """Its SEM versions are placed in the new store's log as the job met them: the one it read
    ahead of it, the one it wrote after it (replay meets SEM where the job's record stands)."""
    act(monkeypatch, "ana", "auditor")
    writer, reader = memory_jobs(capsys)
    job_id = writer if which == "writer" else reader
    bundle = export(capsys, job_id, tmp_path / "job.json")
    use_store(monkeypatch, other_store)
    code, _, err = run(capsys, "import", str(bundle))
    assert (code, err) == (0, ""), err
    code, report, _ = replay_json(capsys, job_id)
    assert (code, report["ok"], report["reproduced"], report["divergences"]) == (0, True, True, [])


def test_import_refusals_write_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    other_store: str,
) -> None:
    writer, _ = memory_jobs(capsys)
    bundle = export(capsys, writer, tmp_path / "writer.json")
    redacted = export(capsys, writer, tmp_path / "redacted.json", "--redact")

    target = use_store(monkeypatch, other_store)
    assert run(capsys, "sem", "put", "user/person/default/favorite_color", '"green"')[0] == 0
    rows = event_count(target)
    code, out, err = run(capsys, "import", str(bundle))
    assert_usage_error(
        code,
        out,
        err,
        "sem:user/person/default/favorite_color is in this store with different content"
        " (version 1): nothing imported",
    )
    code, out, err = run(capsys, "import", str(redacted))
    assert_usage_error(code, out, err, f"bundle {redacted} is redacted")
    assert event_count(target) == rows

    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k2").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k2")
    code, out, err = run(capsys, "import", str(bundle))
    assert_usage_error(
        code, out, err, f"bundle {bundle} is signed with key id(s) ['k1'], which this keyring lacks"
    )
    assert event_count(target) == rows


# --- tampering ----------------------------------------------------------------------------------


def _flip_record_byte(data: dict[str, Any], job: Any) -> str:
    index = record_index(data, job, 2)
    data["records"][index]["state"] = data["records"][index]["state"].replace("2 + 3", "2 + 4")
    return f"stream {job} version 2: MAC mismatch"


def _edit_manifest(data: dict[str, Any], job: Any) -> str:
    data["manifest"]["capture_mode"] = "none"
    return "the manifest's signature does not verify"


def _drop_middle_record(data: dict[str, Any], job: Any) -> str:
    del data["records"][record_index(data, job, 3)]
    return f"stream {job} version 3: version 3 is missing"


def _drop_seal(data: dict[str, Any], job: Any) -> str:
    last = max(r["version"] for r in data["records"] if r["originator_id"] == str(job))
    del data["records"][record_index(data, job, last)]
    return f"stream {job} version {last}: seal missing: the job's completion is not followed by"


def _reorder_streams(data: dict[str, Any], job: Any) -> str:
    """Swap two one-record streams: each stream's own order still holds."""
    records = data["records"]
    counts: dict[str, int] = {}
    for record in records:
        counts[record["originator_id"]] = counts.get(record["originator_id"], 0) + 1
    a, b = [i for i, r in enumerate(records) if counts[r["originator_id"]] == 1][:2]
    records[a], records[b] = records[b], records[a]
    return "records are not those its manifest lists, in that order"


def _reorder_in_stream(data: dict[str, Any], job: Any) -> str:
    records = data["records"]
    a, b = record_index(data, job, 2), record_index(data, job, 3)
    records[a], records[b] = records[b], records[a]
    return f"stream {job} version 2: version 2 is missing (next stored is 3)"


def _mark_redacted(data: dict[str, Any], job: Any) -> str:
    data["records"][record_index(data, job, 2)]["redacted"] = True
    return f"stream {job} version 2: redacted, but its manifest does not say so"


def _other_signing_key(data: dict[str, Any], job: Any) -> str:
    data["signature"]["key_id"] = "k2"
    return "the manifest's signature does not verify"


TAMPERING = [
    _flip_record_byte,
    _edit_manifest,
    _drop_middle_record,
    _drop_seal,
    _reorder_streams,
    _reorder_in_stream,
    _mark_redacted,
    _other_signing_key,
]


@pytest.mark.parametrize("tamper", TAMPERING, ids=lambda f: f.__name__.strip("_"))
def test_a_tampered_bundle_fails_with_integrity_failure(
    tamper: Callable[[dict[str, Any], Any], str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k1", "k2").get_secret_value())
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys)
    bundle = export(capsys, job_id, tmp_path / "job.json")
    assert bundle_replay(capsys, bundle)[0] == 0
    expected: list[str] = []
    rewrite(bundle, lambda data: expected.append(tamper(data, Job.id_for(job_id))))
    rows = event_count(cli_env)

    code, out, err = run(capsys, "replay", "--bundle", str(bundle))
    assert (code, out) == (1, "")
    assert_integrity_failure(err, expected[0])
    code, out, err = run(capsys, "import", str(bundle))
    assert (code, out) == (1, "")
    assert_integrity_failure(err, expected[0])
    assert event_count(cli_env) == rows


# --- redacted export ----------------------------------------------------------------------------


def model_io_job(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """A recorded run whose model call and tool result carry content found nowhere else."""
    real = new_job(capsys, "2 + 3", "m1")
    code, out, _ = run(capsys, "events", real, "--json")
    assert code == 0
    entries = [canonical_line(line + "\n") for line in out.splitlines()]
    started = entries[0]["payload"]
    lines: list[dict[str, Any]] = [
        {
            "type": "RunStarted",
            "job_id": "model-io-1",
            "seed": started["job_seed"],
            "input": started["job_input"],
            "snapshot_ids": started["snapshot_ids"],
            "capture_mode": "full_io",
        }
    ]
    for entry in entries[1:]:
        if entry["event_type"] not in {"JobCompleted", "JobSealed"}:
            lines.append({"type": entry["event_type"], **entry["payload"]})
    lines += [
        {
            "type": "ModelCallEnvelope",
            "call_id": "c1",
            "model_id": "m",
            "model_version": "1",
            "prompt_bundle_hash": ZERO_HASH,
            "temperature": 0,
            "prompt": {"text": CANARIES[0]},
            "response": CANARIES[1],
        },
        {
            "type": "ToolCall",
            "call_id": "t1",
            "tool": "lookup",
            "tool_schema_hash": ZERO_HASH,
            "arguments": {"q": CANARIES[3]},
        },
        {"type": "ToolResult", "call_id": "t1", "status": "ok", "result": {"out": CANARIES[2]}},
        {"type": "ErrorEvent", "code": "TOOL_DOWN", "message": CANARIES[4]},
        {
            "type": "RetrievalRequest",
            "request_id": "r1",
            "query": CANARIES[5],
        },
        {"type": "RetrievalResponse", "request_id": "r1", "hits": []},
        {"type": "RunCompleted", "final_output": "2 + 3 = 5"},
    ]
    code, _, err = run(capsys, "ingest", write_run_file(tmp_path, lines, "model-io.jsonl"))
    assert code == 0, err
    return "model-io-1"


def test_redacted_bundle_holds_no_pii_and_no_model_io(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    pii_job = new_job(capsys, f"remember that my pin is {PII_VALUE}", "p1")
    io_job = model_io_job(capsys, tmp_path)
    full = export(capsys, pii_job, tmp_path / "pii-full.json")
    # The ledger never kept the refused value, only its refusal mark: that is what must go.
    assert PII_VALUE.encode() not in full.read_bytes()
    found = MARK.search(full.read_text())
    assert found is not None  # so the search below can fail
    mark = found[0].encode()
    code, out, err = run(capsys, "export", io_job, "-o", str(tmp_path / "io-plain.json"))
    assert_usage_error(
        code,
        out,
        err,
        f"job {io_job} keeps model or tool content (event 4 ModelCallEnvelope.response, event 5"
        " ToolCall.arguments, event 6 ToolResult.result): export it with --redact to leave that"
        " out, or with --include-full-io to include it",
    )
    assert not (tmp_path / "io-plain.json").exists()
    full_io = export(capsys, io_job, tmp_path / "io-full.json", "--include-full-io")
    assert all(c.encode() in full_io.read_bytes() for c in CANARIES)

    code, out, err = run(
        capsys, "export", pii_job, "-o", str(tmp_path / "pii.json"), "--redact", "--json"
    )
    assert (code, err) == (0, "")
    assert canonical_line(out)["redacted"] is True
    pii = tmp_path / "pii.json"
    raw = pii.read_bytes()
    assert PII_VALUE.encode() not in raw
    assert mark not in raw
    assert PII_MARK.encode() in raw
    redaction = bundle_json(pii)["manifest"]["redaction"]
    assert bundle_json(pii)["manifest"]["redacted"] is True
    assert "pin" in redaction["denied_sem_attributes"]
    assert set(redaction["policy"]) == {"model_io", "pii", "verification"}
    paths = {(r["version"], p) for r in redaction["records"] for p in r["paths"]}
    assert {(1, "job_input"), (2, "payload.text"), (4, "payload.value")} <= paths
    assert {
        (5, "payload.prompt"),
        (6, "payload.final_output"),
        (7, "payload.final_output"),
    } <= paths

    redacted_io = export(capsys, io_job, tmp_path / "io.json", "--redact")
    raw = redacted_io.read_bytes()
    assert not any(c.encode() in raw for c in CANARIES)
    io_paths = [
        p for r in bundle_json(redacted_io)["manifest"]["redaction"]["records"] for p in r["paths"]
    ]
    assert {"payload.prompt", "payload.response", "payload.result"} <= set(io_paths)

    code, report, err = bundle_replay(capsys, pii)
    # Redaction hid every fact the replay could have re-executed: nothing was reproduced.
    assert (code, err) == (1, NOT_REPRODUCED_LINE), err
    assert (report["ok"], report["error_code"], report["authoritative"]) == (False, None, False)
    assert report["bundle"]["redacted"] is True
    skipped = [s for s in report["steps"] if s["outcome"] == "skipped"]
    assert skipped and all(
        s["detail"].startswith(("not compared: pii", "not compared: model_io")) for s in skipped
    )
    assert {
        "step": "compare final_answer (job)",
        "outcome": "skipped",
        "detail": "not compared: model_io content redacted: the answer is not in the bundle",
    } in skipped
    code, report, err = bundle_replay(capsys, redacted_io)
    assert (code, err) == (0, ""), err
    assert (report["ok"], report["authoritative"]) == (True, False)
    assert {m["step"] for m in report["unreconstructable"]} >= {"model call c1 (m 1)"}
    retrieval = {r["subject"]: r for r in report["checks"]}["event 8 RetrievalRequest"]
    assert (retrieval["check"], retrieval["detail"]) == (
        "taken_as_recorded",
        "a retrieval from outside the ledger, not re-run: its query is not kept (redacted),"
        " request_hash taken as recorded",
    )

    code, out, err = run(capsys, "replay", "--bundle", str(pii), "--force-continue")
    assert_usage_error(code, out, err, "--force-continue is not available on redacted bundle")

    def forge(data: dict[str, Any]) -> None:
        index = record_index(data, Job.id_for(pii_job), 2)
        data["records"][index]["state"] = data["records"][index]["state"].replace(
            PII_MARK, "something else"
        )

    rewrite(pii, forge)
    code, _, err = run(capsys, "replay", "--bundle", str(pii))
    assert code == 1
    assert_integrity_failure(
        err,
        f"stream {Job.id_for(pii_job)} version 2: redacted body differs from the one its"
        " manifest vouches for",
    )


def test_a_short_refused_value_is_in_no_bundle_and_its_mark_not_in_a_redacted_one(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    job_id = new_job(capsys, "remember that my pin is 12", "p2")
    full = export(capsys, job_id, tmp_path / "full.json")
    redacted = export(capsys, job_id, tmp_path / "pin.json", "--redact")
    for bundle, holds_mark in ((full, True), (redacted, False)):
        states = "".join(r["state"] for r in bundle_json(bundle)["records"])
        assert "my pin is 12" not in states
        assert '"value":"12"' not in states
        assert ("my pin is [refused:pin:" in states) is holds_mark
    code, report, _ = bundle_replay(capsys, redacted)
    assert (code, report["ok"], report["authoritative"]) == (1, False, False)
    assert report["error_code"] is None  # not reproduced: redaction hid the refused input


# --- bad input ----------------------------------------------------------------------------------


BAD_FILES: dict[str, tuple[bytes | None, str]] = {
    "empty": (b"", "is not a MACE bundle: not JSON"),
    "not json": (b"hello", "is not a MACE bundle: not JSON"),
    "truncated": (b'{"format":"mace-bundle/1","manifest":{"job_id"', "not JSON"),
    "a list": (b"[]", "is not a MACE bundle: expected a JSON object with 'format'"),
    "other format": (b'{"format":"mace-bundle/4"}', "unsupported bundle format 'mace-bundle/4'"),
    "no manifest": (b'{"format":"mace-bundle/1"}', "is not a valid mace-bundle/1 file"),
    "no checkpoint": (
        b'{"format":"mace-bundle/2","manifest":{},"records":[],'
        b'"signature":{"key_id":"k1","mac":"' + b"0" * 64 + b'"}}',
        "is not a valid mace-bundle/2 file: it has no checkpoint",
    ),
    "missing file": (None, "cannot read bundle"),
}


@pytest.mark.parametrize("case", BAD_FILES, ids=str)
def test_a_file_that_is_not_a_bundle_is_bad_input(
    case: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    new_job(capsys)
    content, message = BAD_FILES[case]
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    rows = event_count(cli_env)
    for argv in (("replay", "--bundle", str(path)), ("import", str(path))):
        code, out, err = run(capsys, *argv)
        assert_usage_error(code, out, err, message)
    assert event_count(cli_env) == rows


def test_export_refusals(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys)
    target = tmp_path / "out.json"
    target.write_bytes(b"keep me")
    code, out, err = run(capsys, "export", job_id, "-o", str(target))
    assert_usage_error(code, out, err, f"{target} exists: pass --force to overwrite it")
    assert target.read_bytes() == b"keep me"
    export(capsys, job_id, target, "--force")
    assert bundle_json(target)["manifest"]["job_id"] == job_id

    fresh = tmp_path / "fresh.json"
    code, out, err = run(capsys, "export", "no-such-job", "-o", str(fresh))
    assert_usage_error(code, out, err, "no job no-such-job")
    code, out, err = run(capsys, "export", "bad id!", "-o", str(fresh))
    assert_usage_error(code, out, err, "invalid job id 'bad id!'")
    code, out, err = run(capsys, "export", job_id, "-o", str(tmp_path / "no" / "dir.json"))
    assert_usage_error(code, out, err, "is not a directory")
    with Ledger.open(cli_env) as ledger:
        ids = ledger.snapshots.default_ids()
        ledger.jobs.start("open-1", "s", "2 + 3", ids)
    code, out, err = run(capsys, "export", "open-1", "-o", str(fresh))
    assert_usage_error(code, out, err, "job open-1 is open: only completed, sealed jobs")
    assert not fresh.exists()
    assert not list(tmp_path.glob(".*.json.*"))  # no temporary file left behind


# --- regression tests from incidents ------------------------------------------------------------


def run_pytest(test_file: Path, keys: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MACE_")}
    env |= {
        "MACE_SIGNING_KEYS": keys,
        "MACE_ACTIVE_KEY_ID": "k1",
        "MACE_STORE": f"sqlite:///{test_file.parent}/absent/never.db",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        cwd=test_file.parent,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_export_test_writes_a_test_asserting_the_recorded_failure(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    act(monkeypatch, "ana", "auditor")
    real = new_job(capsys)
    code, _, err = run(capsys, "ingest", write_run_file(tmp_path, diverging_run(capsys, real)))
    assert code == 0, err
    assert replay_json(capsys, "diverged-1")[0] == 1  # the incident: a recorded REPLAY_RESULT
    out_dir = tmp_path / "regressions"
    code, out, err = run(capsys, "export-test", "diverged-1", "-o", str(out_dir))
    assert (code, err) == (0, ""), err
    test_file = out_dir / "test_replay_diverged_1.py"
    bundle = out_dir / "test_replay_diverged_1.bundle.json"
    assert out == (
        f"wrote {test_file} and {bundle}: the test asserts that job diverged-1's replay fails"
        " with REPLAY_DIVERGENCE (1 divergence(s))\n"
    )
    source = " ".join(test_file.read_text().split())
    assert "most recent REPLAY_RESULT on record: attempt 1, an audit replay by ana" in source
    assert 'assert report["error_code"] == "REPLAY_DIVERGENCE"' in source
    lint = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--config",
            str(PROJECT / "pyproject.toml"),
            str(test_file),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout

    assert cli_env.signing_keys is not None
    keys = cli_env.signing_keys.get_secret_value()
    passed = run_pytest(test_file, keys)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "1 passed" in passed.stdout
    assert not (out_dir / "absent").exists()

    code, out, err = run(capsys, "export-test", "diverged-1", "-o", str(out_dir))
    assert_usage_error(code, out, err, f"{test_file} exists: pass --force to overwrite it")

    def tamper(data: dict[str, Any]) -> None:
        index = record_index(data, Job.id_for("diverged-1"), 2)
        data["records"][index]["state"] = data["records"][index]["state"].replace("2 + 3", "2+3")

    rewrite(bundle, tamper)
    failed = run_pytest(test_file, keys)
    assert failed.returncode == 1, failed.stdout
    assert "INTEGRITY_FAILURE" in failed.stdout


def test_export_test_without_a_replay_on_record_asserts_an_audit_replay(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys, "hello", "h1")
    code, _, err = run(capsys, "export-test", job_id, "-o", str(tmp_path / "out"))
    assert (code, err) == (0, ""), err
    test_file = next((tmp_path / "out").glob("test_replay_*.py"))
    source = " ".join(test_file.read_text().split())
    assert "an audit replay of the bundle made when this test was exported" in source
    assert 'assert report["ok"] is True' in source
    check = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(PROJECT / "pyproject.toml"),
            str(test_file),
        ],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout
    assert cli_env.signing_keys is not None
    passed = run_pytest(test_file, cli_env.signing_keys.get_secret_value())
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_export_test_makes_its_folder_and_names_a_missing_parent_in_one_line(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # `-o regressions/` makes the folder, as `git clone` or `pip download -d` would; a folder whose
    # parent is missing is more likely a typo than a wish for a tree of folders: one line, exit 2.
    job_id = new_job(capsys, "2 + 3", "folder-1")
    typo = tmp_path / "regresions" / "incident"
    code, out, err = run(capsys, "export-test", job_id, "-o", str(typo))
    assert (code, out) == (2, "")
    assert err == f"mace: INVALID_INPUT: cannot write to {typo}: {typo.parent} does not exist\n"
    assert not typo.parent.exists()
    folder = tmp_path / "regressions"
    code, _, err = run(capsys, "export-test", job_id, "-o", f"{folder}/")
    assert (code, err) == (0, ""), err
    assert sorted(path.suffix for path in folder.iterdir()) == [".json", ".py"]
