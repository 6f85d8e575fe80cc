"""Stage-0 jobs recorded through the ledger, end to end on SQLite and PostgreSQL.

Covers the router rules R1-R4 and failure paths F1-F5 as recorded ReflectiveLogs (seed 000
sections 3, 5, 9 and seed 004), SEM through the ledger, determinism of the stored bytes and of
derived job ids (seed 004 D3), capture modes (seed 003), conflicts, runs recorded by an outside
emitter, and tampering with the new streams.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from support.ledger_fixtures import RawTable, settings_for, store_of
from support.sample_job import job_ids

from domain.checkpoint import CHECKPOINT_STREAM
from domain.determinism import derive_id
from domain.errors import ConflictError, ErrorCode, IntegrityFailure
from domain.events import (
    EQUALITY_FIELDS,
    ModelCallEnvelope,
    RunCompleted,
    RunEvent,
    RunStarted,
    hash_of,
)
from domain.job import CaptureMode, Job
from domain.sem import SemEntry, SemKeyError, SemValueError
from domain.snapshot import Snapshot, SnapshotKind
from domain.stage0.replies import F1_SEM_MISS, F3_NO_AGENT, F4_AGENT_FAILURE, F5_SEM_WRITE_FAILURE
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.reflective_log import ReflectiveLog

# --- helpers ------------------------------------------------------------------------------------


def event_count(settings: Settings) -> int:
    rows = RawTable(settings).execute("SELECT COUNT(*) FROM {table}")
    return int(rows[0][0])


def all_rows(settings: Settings) -> list[tuple[UUID, int, str, bytes]]:
    """Every stored event but the checkpoints as (stream, version, topic, state), ids normalised
    across backends.

    A checkpoint carries its wall-clock ``written_at`` and an Ed25519 signature, so two stores
    never hold the same checkpoint bytes; every other stream is what recording guarantees to be
    byte-identical (the checkpoint tables are left out likewise: they are not the event table).
    """
    rows = RawTable(settings).execute(
        "SELECT originator_id, originator_version, topic, state FROM {table}"
    )
    every = ((UUID(str(i)), int(v), str(t), bytes(s)) for i, v, t, s in rows)
    return sorted(row for row in every if row[0] != CHECKPOINT_STREAM)


def trace_of(log: ReflectiveLog) -> dict[str, Any]:
    traces = log.as_json()["iteration_trace"]
    assert len(traces) == 1
    trace: dict[str, Any] = traces[0]
    return trace


def selfrep_agents(log: ReflectiveLog) -> dict[str, Any]:
    """The agents of the SelfRepresentation the job ended with (from JobCompleted)."""
    assert log.completion is not None and log.completion.selfrep is not None
    state: dict[str, Any] = log.completion.selfrep.model_dump()["state"]
    agents: dict[str, Any] = state["agents"]
    return agents


def stream_events(ledger: Ledger, job_id: str, event_type: str) -> list[dict[str, Any]]:
    return [e for e in ledger.jobs.stream(job_id) if e["event_type"] == event_type]


def snapshot_fields(ids: dict[str, str]) -> dict[str, str]:
    return {f"{kind.value}_snapshot_id": ids[kind.value] for kind in SnapshotKind}


@pytest.fixture
def other_store(
    store_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Callable[[], str]:
    """Call it for another fresh, empty store of the same kind as ``store_url``."""
    numbers = itertools.count(1)
    if store_url.startswith("sqlite"):
        return lambda: f"sqlite:///{tmp_path}/other{next(numbers)}.db"
    make: Callable[[], str] = request.getfixturevalue("make_postgres_database")
    return make


# --- router rules R1-R4 -------------------------------------------------------------------------

RULES = {
    "R1": ("2 + 3", "math_agent", "matched_R1_math", "2 + 3 = 5"),
    "R2": (
        "my favorite color is blue",
        "profile_agent",
        "matched_R2_profile",
        "Noted: your favorite color is blue.",
    ),
    "R3": ("what is the capital of france", "knowledge_agent", "matched_R3_knowledge", F1_SEM_MISS),
    "R4": ("hello there", "generic_agent", "matched_R4_fallback", F3_NO_AGENT),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_router_rule_is_recorded_as_a_sealed_reflective_log(ledger: Ledger, rule: str) -> None:
    text, agent, why, answer = RULES[rule]
    log = ledger.jobs.run(text, "seed-1", capture_mode=CaptureMode.FULL_IO)
    data = log.as_json()

    assert data["job_id"] == log.job_id
    assert (data["job_seed"], data["input"], data["capture_mode"]) == ("seed-1", text, "full_io")
    defaults = ledger.snapshots.default_ids()
    assert set(defaults) == {k.value for k in SnapshotKind}
    for field, snapshot_id in snapshot_fields(defaults).items():
        assert data[field] == snapshot_id

    trace = trace_of(log)
    assert set(trace) == set(EQUALITY_FIELDS)
    assert trace["router_decision"] == {
        "rule_id": rule,
        "agent": agent,
        "why": why,
        "fallback": None,
    }
    assert trace["selected_agents"] == [agent]
    assert [o["agent"] for o in trace["agent_outputs"]] == [agent]
    assert trace["agent_outputs"][0]["status"] == "ok"
    assert trace["council_votes"] == []
    assert trace["final_output"] == answer
    assert data["final_answer"] == answer
    assert (data["replayable"], data["missing_artifacts"], data["sealed"]) == (True, [], True)

    # Read back from the store, the log says the same.
    assert ledger.jobs.reflective_log(log.job_id).as_json() == data
    assert ledger.jobs.get(log.job_id).sealed
    summary = store_of(ledger).verify_all()
    assert (summary.jobs, summary.sealed_jobs) == (1, 1)
    stream = ledger.jobs.stream(log.job_id)
    types = [e["event_type"] for e in stream]
    assert (types[0], types[-2:]) == ("JobStarted", ["JobCompleted", "JobSealed"])


# --- failure paths F1-F5 ------------------------------------------------------------------------


def test_f1_knowledge_and_profile_misses_answer_f1_and_invent_nothing(
    ledger: Ledger, raw_table: RawTable
) -> None:
    world = ledger.jobs.run("What is the capital of France?", "s1")
    trace = trace_of(world)
    assert world.as_json()["final_answer"] == F1_SEM_MISS
    assert trace["router_decision"]["rule_id"] == "R3"
    assert trace["sem_reads"] == [
        {
            "key": "world/country/france/capital",
            "exists": False,
            "value": None,
            "last_updated": None,
        }
    ]
    assert (trace["sem_writes"], trace["claims"], trace["evidence_items"]) == ([], [], [])

    profile = ledger.jobs.run("what is my favorite color", "s1")
    assert profile.as_json()["final_answer"] == F1_SEM_MISS
    assert trace_of(profile)["sem_reads"] == [
        {
            "key": "user/person/default/favorite_color",
            "exists": False,
            "value": None,
            "last_updated": None,
        }
    ]
    # S9: the miss is stored as nothing; reading the key again still says so.
    for key in ("world/country/france/capital", "user/person/default/favorite_color"):
        assert ledger.sem.get(key)[1].as_json() == {
            "exists": False,
            "value": None,
            "last_updated": None,
        }
        assert raw_table.rows(SemEntry.id_for(key)) == []


def test_f2_latest_write_wins_across_synonyms(ledger: Ledger, raw_table: RawTable) -> None:
    # Through jobs: "favourite colour" is a synonym of favorite_color (S4).
    first = ledger.jobs.run("my favorite color is blue", "s1")
    second = ledger.jobs.run("my favourite colour is green", "s1")
    first_write = trace_of(first)["sem_writes"][0]
    second_write = trace_of(second)["sem_writes"][0]
    assert first_write["key"] == second_write["key"] == "user/person/default/favorite_color"
    assert (first_write["status"], second_write["status"]) == ("written", "written")
    assert second_write["last_updated"] > first_write["last_updated"]
    read = ledger.jobs.run("what is my favourite colour?", "s1")
    assert read.as_json()["final_answer"] == "Your favourite colour is green."
    assert trace_of(read)["sem_reads"][0]["last_updated"] == second_write["last_updated"]

    # From outside any job: the second write goes through synonyms of type and attribute.
    key, kyoto = ledger.sem.put("world/country/japan/capital", "Kyoto")
    synonym_key, tokyo = ledger.sem.put("world/countries/japan/capital_city", "Tokyo")
    assert key == synonym_key == "world/country/japan/capital"
    assert kyoto.last_updated is not None and tokyo.last_updated is not None
    assert tokyo.last_updated > kyoto.last_updated
    assert ledger.sem.get("world/countries/japan/capital_city") == (key, tokyo)
    answer = ledger.jobs.run("what is the capital of japan?", "s1")
    assert answer.as_json()["final_answer"] == "Tokyo"
    assert trace_of(answer)["sem_reads"] == [
        {"key": key, "exists": True, "value": "Tokyo", "last_updated": tokyo.last_updated}
    ]
    # One stream per canonical key: no separate entries for the synonyms.
    assert len(raw_table.rows(SemEntry.id_for(key))) == 2
    assert raw_table.rows(SemEntry.id_for("world/countries/japan/capital_city")) == []


def test_f3_no_agent_available(ledger: Ledger) -> None:
    fallback = ledger.jobs.run("sing me a song", "s1")
    assert fallback.as_json()["final_answer"] == F3_NO_AGENT
    assert trace_of(fallback)["router_decision"]["rule_id"] == "R4"

    selfrep = {
        "agents": {
            "math_agent": {"status": "unavailable"},
            "profile_agent": {},
            "knowledge_agent": {},
            "generic_agent": {},
        }
    }
    custom, created = ledger.snapshots.put(Snapshot.declare("selfrep", selfrep))
    assert created
    ids = {"selfrep": custom.snapshot_id}
    log = ledger.jobs.run("2 + 3", "s1", snapshot_ids=ids, capture_mode=CaptureMode.FULL_IO)
    data = log.as_json()
    assert data["selfrep_snapshot_id"] == custom.snapshot_id
    defaults = ledger.snapshots.default_ids()
    assert data["router_snapshot_id"] == defaults["router"]
    assert data["final_answer"] == F3_NO_AGENT
    trace = trace_of(log)
    assert trace["router_decision"] == {
        "rule_id": "R1",
        "agent": "generic_agent",
        "why": "matched_R1_math",
        "fallback": "F3",
    }
    assert trace["selected_agents"] == ["generic_agent"]
    assert [o["agent"] for o in trace["agent_outputs"]] == ["generic_agent"]
    assert (data["replayable"], data["sealed"]) == (True, True)
    assert selfrep_agents(log)["math_agent"]["status"] == "unavailable"
    store_of(ledger).verify_all()


def test_f4_failing_agent_is_degraded_and_the_job_still_sealed(ledger: Ledger) -> None:
    log = ledger.jobs.run("4 / 0", "s1", capture_mode=CaptureMode.FULL_IO)
    data = log.as_json()
    assert data["final_answer"] == F4_AGENT_FAILURE
    trace = trace_of(log)
    assert trace["router_decision"]["agent"] == "math_agent"
    assert trace["selected_agents"] == ["math_agent", "generic_agent"]
    failed, fallback = trace["agent_outputs"]
    assert (failed["agent"], failed["status"], failed["response"]) == ("math_agent", "failed", None)
    assert failed["error"].startswith("ZeroDivisionError")
    assert (fallback["agent"], fallback["status"]) == ("generic_agent", "ok")
    stored = ledger.jobs.reflective_log(log.job_id)
    assert stored.sealed
    agents = selfrep_agents(stored)
    assert agents["math_agent"]["status"] == "degraded"
    assert (agents["math_agent"]["failures"], agents["generic_agent"]["status"]) == (1, "available")
    completed = stream_events(ledger, log.job_id, "JobCompleted")[0]["payload"]
    assert completed["selfrep"]["state"]["agents"]["math_agent"]["status"] == "degraded"
    assert data["replayable"] is True
    store_of(ledger).verify_all()


def test_f5_privacy_denied_write_stores_nothing_in_sem(ledger: Ledger, raw_table: RawTable) -> None:
    ledger.snapshots.default_ids()
    log = ledger.jobs.run("remember my password is hunter2", "s1")
    data = log.as_json()
    assert data["final_answer"] == F5_SEM_WRITE_FAILURE
    (write,) = trace_of(log)["sem_writes"]
    assert (write["status"], write["last_updated"]) == ("failed", None)
    assert "password" in write["reason"]
    key = "user/person/default/password"
    assert ledger.sem.get(key)[1].as_json() == {
        "exists": False,
        "value": None,
        "last_updated": None,
    }
    assert raw_table.rows(SemEntry.id_for(key)) == []
    assert data["sealed"] is True


# --- SEM through the ledger ---------------------------------------------------------------------


def test_profile_fact_written_by_one_job_is_read_by_a_later_one(ledger: Ledger) -> None:
    writer = ledger.jobs.run("My favorite color is Blue", "s1", user="alice")
    written = trace_of(writer)["sem_writes"][0]
    assert written["key"] == "user/person/alice/favorite_color"
    (stored_write,) = stream_events(ledger, writer.job_id, "SemWrite")
    assert stored_write["payload"]["value"] == "Blue"

    reader = ledger.jobs.run("what is my favorite color?", "s2", user="alice")
    assert reader.as_json()["final_answer"] == "Your favorite color is Blue."
    (read,) = stream_events(ledger, reader.job_id, "SemRead")
    assert read["payload"] == {
        "iteration": 0,
        "schema_version": 1,
        "key": "user/person/alice/favorite_color",
        "exists": True,
        "value": "Blue",
        "last_updated": written["last_updated"],
    }
    assert ledger.sem.get("user/person/alice/favorite_color")[1].value == "Blue"
    # Another user's profile is another key: a miss, not alice's value.
    other = ledger.jobs.run("what is my favorite color?", "s3", user="bob")
    assert other.as_json()["final_answer"] == F1_SEM_MISS


@pytest.mark.parametrize(
    ("key", "rule"),
    [
        ("World/country/japan/capital", "S2"),
        ("world/country/japan/capital city", "S2"),
        ("world/country/japan", "S1"),
        ("world//japan/capital", "S1"),
        ("world/country/japan/_capital", "S3"),
        ("world/1country/japan/capital", "S3"),
    ],
)
def test_sem_put_with_a_bad_key_names_the_rule_and_writes_nothing(
    ledger: Ledger, raw_table: RawTable, key: str, rule: str
) -> None:
    ledger.snapshots.default_ids()
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    with pytest.raises(SemKeyError, match=f"rule {rule}: ") as raised:
        ledger.sem.put(key, "Tokyo")
    assert raised.value.rule == rule
    with pytest.raises(SemKeyError, match=f"rule {rule}: "):
        ledger.sem.get(key)
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before


def test_sem_put_refuses_denied_attributes_and_null_values(
    ledger: Ledger, raw_table: RawTable
) -> None:
    ledger.snapshots.default_ids()
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    with pytest.raises(SemValueError, match="privacy policy denies storing attribute 'pin'"):
        ledger.sem.put("user/person/alice/pin", "1234")
    with pytest.raises(SemValueError, match="must not be null"):
        ledger.sem.put("world/country/japan/capital", None)
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before
    # S9: a key never written is a miss, with no value.
    key, record = ledger.sem.get("world/countries/japan/capital_city")
    assert (key, record.as_json()) == (
        "world/country/japan/capital",
        {"exists": False, "value": None, "last_updated": None},
    )


# --- determinism --------------------------------------------------------------------------------

EMITTED_PROMPT = {"messages": [{"role": "user", "content": "summarise"}]}
EMITTED_RESPONSE = {"text": "a summary", "score": 0.1 + 0.2}


def model_call(call_id: str = "c1") -> RunEvent:
    envelope: RunEvent = ModelCallEnvelope.model_validate(
        {
            "call_id": call_id,
            "model_id": "test-model",
            "model_version": "2026-01",
            "prompt_bundle_hash": "a" * 64,
            "temperature": 0.0,
            "prompt": EMITTED_PROMPT,
            "response": EMITTED_RESPONSE,
        }
    )
    return envelope


def emitted_run(
    ledger: Ledger, capture: str, seed: str = "e1", job_id: str | None = None
) -> ReflectiveLog:
    started = RunStarted.model_validate(
        {
            "job_id": job_id,
            "seed": seed,
            "input": "summarise the report",
            "snapshot_ids": ledger.snapshots.default_ids(),
            "capture_mode": capture,
        }
    )
    completed = RunCompleted(final_output="a summary")
    return ledger.runs.record(started, [model_call()], completed)


SEQUENCE = (
    "2 + 3",
    "my favorite color is blue",
    "what is my favorite color",
    "what is the capital of japan",
    "hello there",
    "4 / 0",
    "2 + 3",
)


def record_sequence(ledger: Ledger, seed: str) -> list[tuple[str, Any]]:
    results: list[tuple[str, Any]] = []
    ledger.sem.put("world/countries/japan/capital_city", "Tokyo")
    for text in SEQUENCE:
        log = ledger.jobs.run(text, seed)
        results.append((log.job_id, log.as_json()))
    emitted = emitted_run(ledger, "prompts_only", seed)
    results.append((emitted.job_id, emitted.as_json()))
    return results


def test_same_runs_give_byte_identical_stores_and_ids(
    ledger: Ledger,
    settings: Settings,
    store_url: str,
    other_store: Callable[[], str],
    tmp_path: Path,
) -> None:
    """Every stream but the checkpoints holds the same bytes in every store (see `all_rows`)."""
    first = record_sequence(ledger, "s1")
    second_settings = settings_for(other_store())
    with Ledger.open(second_settings) as second:
        second_results = record_sequence(second, "s1")
        assert job_ids(second) == [job_id for job_id, _ in first]

    assert second_results == first
    assert [log["final_answer"] for _, log in first][:2] == [
        "2 + 3 = 5",
        "Noted: your favorite color is blue.",
    ]
    rows = all_rows(settings)
    assert len(rows) > 50
    assert all_rows(second_settings) == rows
    # The same bytes on the other backend too.
    if not store_url.startswith("sqlite"):
        sqlite_settings = settings_for(f"sqlite:///{tmp_path}/cross.db")
        with Ledger.open(sqlite_settings) as on_sqlite:
            assert record_sequence(on_sqlite, "s1") == first
        assert all_rows(sqlite_settings) == rows

    # A different seed gives different job ids.
    with Ledger.open(settings_for(other_store())) as third:
        different = record_sequence(third, "s2")
    assert {job_id for job_id, _ in different}.isdisjoint({job_id for job_id, _ in first})
    assert [log["final_answer"] for _, log in different] == [
        log["final_answer"] for _, log in first
    ]


def test_derived_job_ids_follow_seed_004_d3(ledger: Ledger) -> None:
    # The counter is how many jobs of the same seed and input the tenant recorded before.
    runs = [("2 + 3", "s1", 0), ("2 + 3", "s1", 1), ("hello", "s2", 0)]
    ids = []
    for text, seed, count in runs:
        log = ledger.jobs.run(text, seed)
        assert log.job_id == derive_id(seed, "job", text, count)
        ids.append(log.job_id)
    assert len(set(ids)) == 3
    # Other jobs, named or recorded from runs, do not move the count of these.
    ledger.jobs.run("hello", "s3", job_id="explicit-1")
    ids.append("explicit-1")
    emitted = emitted_run(ledger, "full_io", seed="e9")
    assert emitted.job_id == derive_id("e9", "job", "summarise the report", 0)
    ids.append(emitted.job_id)
    last = ledger.jobs.run("2 + 3", "s1")
    assert last.job_id == derive_id("s1", "job", "2 + 3", 2)
    ids.append(last.job_id)
    # Another tenant's count starts from 0: the same id, its own job.
    theirs = ledger.jobs.run("2 + 3", "s1", tenant="acme")
    assert theirs.job_id == derive_id("s1", "job", "2 + 3", 0)
    assert job_ids(ledger) == ids
    assert job_ids(ledger, "acme") == [theirs.job_id]


# --- capture modes ------------------------------------------------------------------------------


def test_capture_modes_decide_replayability(ledger: Ledger) -> None:
    expected = {
        CaptureMode.NONE: ["prompt", "response"],
        CaptureMode.PROMPTS_ONLY: ["response"],
        CaptureMode.FULL_IO: [],
    }
    for mode, missing in expected.items():
        log = ledger.jobs.run("2 + 3", "s1", capture_mode=mode)
        data = log.as_json()
        assert data["capture_mode"] == mode.value
        assert data["final_answer"] == "2 + 3 = 5"
        (output,) = stream_events(ledger, log.job_id, "AgentOutput")
        payload = output["payload"]
        # Hashes are always kept.
        assert payload["request_hash"] == hash_of(
            {"text": "2 + 3", "user": "default", "after_failure": False}
        )
        assert len(payload["response_hash"]) == 64
        for field in ("prompt", "response"):
            assert (payload[field] is None) == (field in missing)
        if not missing:
            assert (data["replayable"], data["missing_artifacts"]) == (True, [])
            continue
        assert data["replayable"] is False
        assert data["missing_artifacts"] == [
            {
                "sequence_index": output["sequence_index"],
                "event_type": "AgentOutput",
                "step": "iteration 0 agent math_agent",
                "missing": missing,
                "reason": f"capture mode {mode} stores the hash of {' and '.join(missing)} only",
            }
        ]
        assert ledger.jobs.reflective_log(log.job_id).as_json()["replayable"] is False
    # Not asked for one, the Python API keeps prompts_only (seed 003), as `mace run` does.
    assert ledger.jobs.run("2 + 3", "s2").as_json()["capture_mode"] == "prompts_only"
    store_of(ledger).verify_all()


def test_declined_agent_under_full_io_is_replayable(ledger: Ledger) -> None:
    # A declined agent (F3 hand-off) has no response to store: nothing is missing.
    log = ledger.jobs.run("I love my favorite band", "s1", capture_mode=CaptureMode.FULL_IO)
    trace = trace_of(log)
    assert trace["selected_agents"] == ["profile_agent", "generic_agent"]
    assert trace["agent_outputs"][0]["status"] == "declined"
    assert log.as_json()["final_answer"] == F3_NO_AGENT
    assert (log.as_json()["replayable"], log.as_json()["missing_artifacts"]) == (True, [])


# --- conflicts ----------------------------------------------------------------------------------


def test_an_existing_explicit_job_id_conflicts_and_writes_nothing(
    ledger: Ledger, raw_table: RawTable
) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="job-a")
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    with pytest.raises(ConflictError, match="job job-a already exists"):
        ledger.jobs.run("my favorite color is red", "s2", job_id="job-a")
    with pytest.raises(ConflictError, match="job job-a already exists"):
        emitted_run(ledger, "full_io", job_id="job-a")
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before
    assert ledger.jobs.reflective_log("job-a").job_input == "2 + 3"
    # The conflicting job's SEM write was not stored either.
    assert not ledger.sem.get("user/person/default/favorite_color")[1].exists
    assert job_ids(ledger) == ["job-a"]


# --- runs recorded by an outside emitter --------------------------------------------------------


def test_record_run_capture_modes(ledger: Ledger) -> None:
    full = emitted_run(ledger, "full_io")
    assert full.as_json()["replayable"] is True
    assert full.as_json()["missing_artifacts"] == []
    assert full.as_json()["final_answer"] == "a summary"
    assert full.snapshot_ids == snapshot_fields(ledger.snapshots.default_ids())
    (stored,) = stream_events(ledger, full.job_id, "ModelCallEnvelope")
    assert stored["payload"]["prompt"] == EMITTED_PROMPT
    assert stored["payload"]["response"] == {"text": "a summary", "score": 0.3}
    assert stored["payload"]["response_hash"] == hash_of(EMITTED_RESPONSE)

    reduced = emitted_run(ledger, "prompts_only")
    data = reduced.as_json()
    assert (data["capture_mode"], data["replayable"], data["sealed"]) == (
        "prompts_only",
        False,
        True,
    )
    (kept,) = stream_events(ledger, reduced.job_id, "ModelCallEnvelope")
    assert kept["payload"]["prompt"] == EMITTED_PROMPT
    assert kept["payload"]["response"] is None
    assert kept["payload"]["response_hash"] == hash_of(EMITTED_RESPONSE)
    assert kept["payload"]["request_hash"] == hash_of(EMITTED_PROMPT)
    assert data["missing_artifacts"] == [
        {
            "sequence_index": kept["sequence_index"],
            "event_type": "ModelCallEnvelope",
            "step": "model call c1 (test-model 2026-01)",
            "missing": ["response"],
            "reason": "capture mode prompts_only stores the hash of response only",
        }
    ]
    # A run that declares no snapshots cannot be replayed either.
    bare = ledger.runs.record(
        RunStarted(seed=7, input="x", capture_mode=CaptureMode.FULL_IO),
        [],
        RunCompleted(final_output=None),
    )
    assert bare.job_seed == "7"
    assert [m["step"] for m in bare.as_json()["missing_artifacts"]] == [
        f"{kind.value} snapshot" for kind in SnapshotKind
    ]
    assert bare.as_json()["replayable"] is False
    summary = store_of(ledger).verify_all()
    assert (summary.jobs, summary.sealed_jobs) == (3, 3)


# --- tampering ----------------------------------------------------------------------------------


def test_flipping_a_byte_of_a_recorded_job_fails_closed(
    ledger: Ledger, raw_table: RawTable
) -> None:
    log = ledger.jobs.run("2 + 3", "s1")
    stream = Job.id_for(log.job_id)
    version = 3  # the RouterDecision
    state = bytearray(raw_table.state(stream, version))
    state[-3] ^= 0x01
    raw_table.set_column(stream, version, "state", bytes(state))

    failures = []
    for read in (
        lambda: ledger.jobs.reflective_log(log.job_id),
        lambda: ledger.jobs.stream(log.job_id),
        store_of(ledger).verify_all,
    ):
        with pytest.raises(IntegrityFailure) as raised:
            read()
        failures.append(raised.value)
    for failure in failures:
        assert failure.code == ErrorCode.INTEGRITY_FAILURE
        assert (failure.stream, failure.version) == (str(stream), version)
        assert str(failure).startswith("INTEGRITY_FAILURE: ")


def test_a_job_reading_a_tampered_sem_entry_fails_closed(
    ledger: Ledger, raw_table: RawTable
) -> None:
    ledger.jobs.run("my favorite color is blue", "s1")
    stream = SemEntry.id_for("user/person/default/favorite_color")
    raw_table.set_column(
        stream, 1, "state", raw_table.state(stream, 1).replace(b'"blue"', b'"gree"')
    )
    with pytest.raises(IntegrityFailure):
        ledger.sem.get("user/person/default/favorite_color")
    before = raw_table.execute("SELECT COUNT(*) FROM {table}")
    with pytest.raises(IntegrityFailure):
        ledger.jobs.run("what is my favorite color", "s1")
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == before
