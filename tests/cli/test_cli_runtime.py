"""``mace run``, ``mace events``, ``mace jobs``, ``mace sem``, ``mace schema`` and ``mace ingest``.

Every storage test runs on SQLite and PostgreSQL. Bad input must exit 2 with one line on stderr
and leave the event table as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.cli_output import (
    assert_usage_error,
    canonical_line,
    event_count,
    json_lines,
    listed_jobs,
)
from support.ledger_fixtures import run
from support.stage0_support import SEED_003_TYPES

from domain.determinism import derive_id, event_id
from domain.events import hash_of
from domain.snapshot import SnapshotKind
from domain.stage0.replies import F1_SEM_MISS
from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings

DEFAULT_IDS = {kind.value: s.snapshot_id for kind, s in default_snapshots().items()}


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, *argv, "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


# --- mace run -----------------------------------------------------------------------------------


def test_run_json_report(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    report = run_json(capsys, "run", "2 + 3", "--seed", "s1", "--capture", "full_io")
    assert report["job_id"] == derive_id("s1", "job", "2 + 3", 0)
    assert (report["job_seed"], report["input"], report["capture_mode"]) == (
        "s1",
        "2 + 3",
        "full_io",
    )
    assert report["final_output"] == "2 + 3 = 5"
    assert (report["replayable"], report["missing_artifacts"]) == (True, [])
    assert report["router_decision"] == {
        "rule_id": "R1",
        "agent": "math_agent",
        "why": "matched_R1_math",
        "fallback": None,
    }
    assert report["selected_agents"] == ["math_agent"]
    assert (report["sem_reads"], report["sem_writes"]) == ([], [])
    assert report["snapshot_ids"] == {
        f"{kind.value}_snapshot_id": DEFAULT_IDS[kind.value] for kind in SnapshotKind
    }
    # The same seed and input again: the tenant's second such job, counter 1 (seed 004 D3).
    again = run_json(capsys, "run", "2 + 3", "--seed", "s1")
    assert again["job_id"] == derive_id("s1", "job", "2 + 3", 1)
    code, out, _ = run(capsys, "verify", "--all")
    # With the signing key's check record, and the checkpoint stream: one checkpoint per `run`.
    assert (code, out) == (
        0,
        "ok: 24 events in 11 streams verified (2 jobs, 2 sealed); checkpoints: 2 verified,"
        " the newest covers 22 events; not yet checkpointed: 0\n"
        "replay requests without a result: 0 abandoned, 0 running\n",
    )


def test_run_text_mode(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "run", "what is the capital of France?", "--seed", "7", "--capture", "full_io"
    )
    job_id = derive_id("7", "job", "what is the capital of France?", 0)
    assert (code, err) == (0, "")
    assert out == (
        f"job {job_id}\n"
        f"  answer: {F1_SEM_MISS}\n"
        "  route: R3 -> knowledge_agent (matched_R3_knowledge)\n"
        "  agents: knowledge_agent\n"
        "  capture: full_io (as asked)\n"
        "  replayable: yes\n"
    )
    code, out, _ = run(capsys, "run", "2 + 3", "--seed", "7", "--capture", "prompts_only")
    assert code == 0
    assert out.splitlines()[-2:] == [
        "  replayable: no",
        "    missing response of iteration 0 agent math_agent",
    ]


def test_run_with_job_id_and_capture_modes(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    report = run_json(
        capsys, "run", "2 + 3", "--seed", "s1", "--job-id", "my-job.1", "--capture", "none"
    )
    assert report["job_id"] == "my-job.1"
    assert (report["capture_mode"], report["replayable"]) == ("none", False)
    (missing,) = report["missing_artifacts"]
    assert (missing["step"], missing["missing"]) == (
        "iteration 0 agent math_agent",
        ["prompt", "response"],
    )
    assert report["final_output"] == "2 + 3 = 5"

    # The same explicit id again is refused, and nothing is written.
    before = event_count(cli_env)
    code, out, err = run(capsys, "run", "hello", "--seed", "s2", "--job-id", "my-job.1")
    assert_usage_error(code, out, err, "job my-job.1 already exists")
    assert event_count(cli_env) == before


def test_run_profile_write_then_read_for_a_user(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    written = run_json(
        capsys, "run", "my favorite color is teal", "--seed", "s1", "--user", "alice"
    )
    assert written["router_decision"]["rule_id"] == "R2"
    (write,) = written["sem_writes"]
    assert (write["key"], write["value"], write["status"]) == (
        "user/person/alice/favorite_color",
        "teal",
        "written",
    )
    read = run_json(capsys, "run", "what is my favorite color", "--seed", "s2", "--user", "alice")
    assert read["final_output"] == "Your favorite color is teal."
    assert read["sem_reads"] == [
        {
            "key": "user/person/alice/favorite_color",
            "exists": True,
            "value": "teal",
            "last_updated": write["last_updated"],
        }
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--capture", "bogus"], "argument --capture: invalid choice: 'bogus'"),
        (["--seed", ""], "--seed must not be empty"),
        (["--job-id", "bad id!"], "invalid job id 'bad id!'"),
        (["--snapshot", "router=notanid"], "invalid snapshot id 'notanid'"),
        (["--snapshot", "weather=" + "a" * 64], "unknown snapshot kind 'weather'"),
        (["--snapshot", "router"], "expected KIND=SNAPSHOT_ID"),
        (["--snapshot", "router=" + "0" * 64], "no router snapshot " + "0" * 64),
        (["--snapshot", "router=" + DEFAULT_IDS["selfrep"]], "is a selfrep snapshot, not router"),
    ],
)
def test_run_bad_input_exits_2_and_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert run(capsys, "run", "hello", "--seed", "s0")[0] == 0  # the default snapshots exist
    before = event_count(cli_env)
    code, out, err = run(capsys, "run", "2 + 3", "--seed", "s1", *extra)
    assert_usage_error(code, out, err, message)
    assert event_count(cli_env) == before


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "2 + 3", "--seed", "s1", "--job-id", "bad id!"],
        ["run", "2 + 3", "--seed", "s1", "--snapshot", "router=notanid"],
        ["sem", "put", "World/country/japan/capital", '"Tokyo"'],
        ["sem", "get", "world/country/japan"],
    ],
)
def test_bad_input_on_a_fresh_store_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert event_count(cli_env) == 0


# --- mace sem -----------------------------------------------------------------------------------


def test_sem_put_and_get(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    put = run_json(capsys, "sem", "put", "world/countries/japan/capital_city", '"Tokyo"')
    assert set(put) == {"key", "exists", "value", "last_updated"}
    assert (put["key"], put["exists"], put["value"]) == (
        "world/country/japan/capital",
        True,
        "Tokyo",
    )
    got = run_json(capsys, "sem", "get", "world/country/japan/capital")
    assert got == put

    code, out, _ = run(capsys, "sem", "get", "world/countries/japan/capital_city")
    assert (code, out) == (
        0,
        f'world/country/japan/capital = "Tokyo" (last updated {put["last_updated"]})\n',
    )
    # S8: the later write wins, with a later timestamp.
    later = run_json(capsys, "sem", "put", "world/country/japan/capital", '{"name": "Tokyo"}')
    assert later["value"] == {"name": "Tokyo"}
    assert later["last_updated"] > put["last_updated"]

    # S9: a miss.
    miss = run_json(capsys, "sem", "get", "world/country/peru/capital")
    assert miss == {
        "key": "world/country/peru/capital",
        "exists": False,
        "value": None,
        "last_updated": None,
    }
    code, out, _ = run(capsys, "sem", "get", "world/country/peru/capital")
    assert (code, out) == (0, "world/country/peru/capital: not stored\n")

    # A job reads what the CLI stored.
    answer = run_json(capsys, "run", "what is the capital of japan", "--seed", "s1")
    assert answer["final_output"] == '{"name":"Tokyo"}'


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("World/country/japan/capital", '"Tokyo"', "rule S2: only a-z, 0-9, _ and / are allowed"),
        ("world/country/japan", '"Tokyo"', "rule S1: expected <scope>/<entity_type>"),
        ("world/country/japan/_capital", '"Tokyo"', "rule S3: attribute '_capital'"),
        ("world/country/japan/capital", "Tokyo", "value 'Tokyo' is not JSON"),
        ("world/country/japan/capital", "null", "must not be null"),
        ("user/person/alice/password", '"hunter2"', "denies storing attribute 'password'"),
    ],
)
def test_sem_put_bad_input_exits_2_and_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], key: str, value: str, message: str
) -> None:
    assert run(capsys, "init")[0] == 0
    before = event_count(cli_env)
    code, out, err = run(capsys, "sem", "put", key, value)
    assert_usage_error(code, out, err, message)
    assert event_count(cli_env) == before
    assert run_json(capsys, "sem", "get", "world/country/japan/capital")["exists"] is False


# --- mace events and mace jobs ------------------------------------------------------------------


def test_events_of_a_job(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = run_json(capsys, "run", "my favorite color is blue", "--seed", "s9")["job_id"]
    code, out, err = run(capsys, "events", job_id, "--json")
    assert (code, err) == (0, "")
    events = json_lines(out)
    assert all(
        {"version", "sequence_index", "event_id", "event_type", "payload"} <= set(e) for e in events
    )
    assert [e["version"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["event_type"] == "JobStarted"
    assert events[-1]["event_type"] == "JobSealed"
    assert (events[0]["sequence_index"], events[0]["event_id"]) == (None, None)
    assert events[0]["payload"]["job_seed"] == "s9"
    assert events[-1]["payload"]["event_count"] == len(events) - 1
    recorded = events[1:-1]
    assert [e["event_type"] for e in recorded] == [
        "InputReceived",
        "RouterDecision",
        "SemWrite",
        "AgentOutput",
        "IterationTrace",
        "JobCompleted",
    ]
    assert [e["sequence_index"] for e in recorded] == list(range(len(recorded)))
    for entry in recorded:
        assert entry["event_id"] == event_id("s9", entry["sequence_index"], entry["event_type"])

    code, out, _ = run(capsys, "events", job_id, "--type", "RouterDecision", "--json")
    (decision,) = json_lines(out)
    assert code == 0
    assert decision["payload"]["why"] == "matched_R2_profile"
    code, out, _ = run(capsys, "events", job_id, "--type", "JobSealed")
    assert code == 0 and out.count("\n") == 1 and " JobSealed " in out

    code, out, _ = run(capsys, "events", job_id)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(events)
    assert lines[2].startswith("   3 #1 RouterDecision {")


def test_events_bad_input(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = run_json(capsys, "run", "2 + 3", "--seed", "s1")["job_id"]
    before = event_count(cli_env)
    code, out, err = run(capsys, "events", job_id, "--type", "Bogus")
    assert_usage_error(code, out, err, "unknown event type 'Bogus'")
    code, out, err = run(capsys, "events", "no-such-job")
    assert (code, out, err) == (2, "", "mace: NOT_FOUND: no job no-such-job\n")
    code, out, err = run(capsys, "events", "bad id!")
    assert_usage_error(code, out, err, "invalid job id 'bad id!'")
    assert event_count(cli_env) == before


def test_jobs_lists_replayability(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    first = run_json(capsys, "run", "2 + 3", "--seed", "s1", "--capture", "full_io")["job_id"]
    second = run_json(capsys, "run", "2 * 3", "--seed", "s1", "--capture", "none")["job_id"]
    third = run_json(capsys, "run", "4 / 0", "--seed", "s1", "--capture", "prompts_only")["job_id"]

    code, out, _ = run(capsys, "jobs", "--json")
    assert code == 0
    listed = listed_jobs(out)
    assert [j["job_id"] for j in listed] == [first, second, third]
    assert all(
        set(j) == {"job_id", "tenant", "status", "capture_mode", "replayable", "missing_artifacts"}
        for j in listed
    )
    assert [(j["status"], j["capture_mode"], j["replayable"]) for j in listed] == [
        ("sealed", "full_io", True),
        ("sealed", "none", False),
        ("sealed", "prompts_only", False),
    ]
    # The failed math_agent has no response to lose; the fallback's response is missing.
    assert [m["step"] for m in listed[2]["missing_artifacts"]] == [
        "iteration 0 agent generic_agent"
    ]

    code, out, _ = run(capsys, "jobs", "--non-replayable", "--json")
    assert [j["job_id"] for j in listed_jobs(out)] == [second, third]
    code, out, _ = run(capsys, "jobs", "--non-replayable")
    assert code == 0
    assert out.splitlines()[1].split() == [second, "sealed", "no", "default"]
    assert first not in out


# --- mace schema --------------------------------------------------------------------------------


def test_schema_describes_run_event_schema_v1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/never.db")
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    schema = canonical_line(out)
    assert schema["title"] == "MACE Run Event Schema v1"
    for name in (*SEED_003_TYPES, "RunStarted", "RunCompleted"):
        assert name in schema["$defs"], name
    assert set(schema["discriminator"]["mapping"]) >= set(SEED_003_TYPES)
    assert "capture_mode" in schema["$defs"]["RunStarted"]["properties"]
    assert list(tmp_path.iterdir()) == []


# --- mace ingest --------------------------------------------------------------------------------

PROMPT = {"messages": [{"role": "user", "content": "hello"}]}
RESPONSE = {"text": "hi there"}


def run_lines(capture: str = "full_io", job_id: str | None = None) -> list[dict[str, Any]]:
    started: dict[str, Any] = {
        "type": "RunStarted",
        "seed": "ing-1",
        "input": "say hello",
        "snapshot_ids": DEFAULT_IDS,
        "capture_mode": capture,
    }
    if job_id is not None:
        started["job_id"] = job_id
    return [
        started,
        {"type": "StageTransition", "to_stage": "answer"},
        {
            "type": "ModelCallEnvelope",
            "call_id": "c1",
            "model_id": "m",
            "model_version": "1",
            "prompt_bundle_hash": "b" * 64,
            "temperature": 0.2,
            "prompt": PROMPT,
            "response": RESPONSE,
        },
        {"type": "RunCompleted", "final_output": "hi there"},
    ]


def write_lines(tmp_path: Path, lines: list[Any], name: str = "run.jsonl") -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def test_ingest_records_a_sealed_job(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Store the default snapshots (full_io: only the prompts_only job below is non-replayable).
    assert run(capsys, "run", "hello", "--seed", "s0", "--capture", "full_io")[0] == 0
    result = run_json(capsys, "ingest", write_lines(tmp_path, run_lines(job_id="ext-1")))
    assert result == {
        "job_id": "ext-1",
        "events": 2,
        "replayable": True,
        "missing_artifacts": [],
        "duplicate": False,
    }

    code, out, _ = run(capsys, "events", "ext-1", "--type", "ModelCallEnvelope", "--json")
    (envelope,) = json_lines(out)
    assert code == 0
    assert envelope["payload"]["response"] == RESPONSE
    assert envelope["payload"]["response_hash"] == hash_of(RESPONSE)

    reduced = run_json(
        capsys, "ingest", write_lines(tmp_path, run_lines("prompts_only"), "b.jsonl")
    )
    # The first job of that seed and input without a named id: counter 0 (seed 004 D3).
    assert reduced["job_id"] == derive_id("ing-1", "job", "say hello", 0)
    assert reduced["replayable"] is False
    assert [(m["step"], m["missing"]) for m in reduced["missing_artifacts"]] == [
        ("model call c1 (m 1)", ["response"])
    ]
    code, out, _ = run(capsys, "events", reduced["job_id"], "--type", "ModelCallEnvelope", "--json")
    (kept,) = json_lines(out)
    assert kept["payload"]["response"] is None
    assert kept["payload"]["response_hash"] == hash_of(RESPONSE)
    assert kept["payload"]["prompt"] == PROMPT

    code, out, _ = run(capsys, "jobs", "--non-replayable", "--json")
    assert [j["job_id"] for j in listed_jobs(out)] == [reduced["job_id"]]


def _bad_json_on_line_3(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    path = tmp_path / "bad.jsonl"
    raw = [orjson.dumps(line) for line in lines]
    raw[2] = b'{"type": "ModelCallEnvelope", '
    path.write_bytes(b"\n".join(raw) + b"\n")
    return str(path)


def _missing_field(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    del lines[0]["input"]
    return write_lines(tmp_path, lines, "bad.jsonl")


def _unknown_type(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    lines[1] = {"type": "Telepathy", "to_stage": "x"}
    return write_lines(tmp_path, lines, "bad.jsonl")


def _no_run_completed(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    return write_lines(tmp_path, lines[:-1], "bad.jsonl")


def _bad_field_value(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    lines[2]["temperature"] = -1
    return write_lines(tmp_path, lines, "bad.jsonl")


def _hash_mismatch(lines: list[dict[str, Any]], tmp_path: Path) -> str:
    lines[2]["response_hash"] = "0" * 64
    return write_lines(tmp_path, lines, "bad.jsonl")


MALFORMED = {
    "bad-json-line-3": (_bad_json_on_line_3, "line 3: not JSON"),
    "missing-field": (_missing_field, "line 1: field input: Field required"),
    "unknown-type": (_unknown_type, "line 2: field type: 'Telepathy', expected one of"),
    "no-run-completed": (_no_run_completed, "line 3: a run ends with RunCompleted"),
    "negative-temperature": (_bad_field_value, "line 3: field temperature: "),
    "hash-mismatch": (_hash_mismatch, "line 3: response_hash does not match"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_ingest_malformed_file_exits_2_and_writes_nothing(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    assert run(capsys, "run", "hello", "--seed", "s0")[0] == 0
    before = event_count(cli_env)
    make, message = MALFORMED[case]
    path = make(run_lines(), tmp_path)
    code, out, err = run(capsys, "ingest", path, "--json")
    assert_usage_error(code, out, err, f"{path} {message}")
    assert event_count(cli_env) == before
