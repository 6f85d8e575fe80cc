"""The ledger on eventsourcing, on SQLite and PostgreSQL: storage, ids, determinism, rotation."""

from __future__ import annotations

import hashlib

import pytest
from support.ledger_fixtures import RawTable, settings_for, store_of
from support.sample_job import ROUTER, record_sample_job

from domain.determinism import DeterministicClock, event_id
from domain.errors import ConflictError, NotFoundError
from domain.governance import AccessDenied, Actor, Governance, HaltCause
from domain.job import Job, JobSealedError
from domain.naming import aggregate_id
from domain.receipt import BODY_KEYS, Receipt
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.key_checks import MissingSigningKey


def test_snapshot_is_content_addressed_and_stored_once(ledger: Ledger) -> None:
    first, created = ledger.snapshots.put(Snapshot.declare("router", ROUTER))
    again, created_again = ledger.snapshots.put(
        Snapshot.declare("router", {"rules": [{"weight": 0.3, "pattern": "x", "id": "R1"}]})
    )
    assert (created, created_again) == (True, False)
    assert again.snapshot_id == first.snapshot_id
    # The live aggregate holds what storage gives back: canonical values, not 0.30000000000000004.
    assert first.payload["rules"][0]["weight"] == 0.3
    stored = ledger.snapshots.get(first.snapshot_id)
    assert stored.version == 1
    assert stored.kind == "router"
    assert stored.generator["snapshot_id"] == "sha256(config_hash:schema_version:seed_namespace)"


def test_snapshot_id_follows_seed_000_section_5(ledger: Ledger) -> None:
    snapshot = Snapshot.declare("privacy", {"pii_fields": ["email"]}, 2, "tenant-a/privacy")
    # sha256(config_hash:schema_version:seed_namespace), config_hash over the canonical JSON
    config_hash = hashlib.sha256(b'{"pii_fields":["email"]}').hexdigest()
    expected = hashlib.sha256(f"{config_hash}:2:tenant-a/privacy".encode()).hexdigest()
    assert (snapshot.config_hash, snapshot.snapshot_id) == (config_hash, expected)


def test_unknown_snapshot_is_not_found(ledger: Ledger) -> None:
    with pytest.raises(NotFoundError, match="no snapshot"):
        ledger.snapshots.get("0" * 64)
    with pytest.raises(ValueError, match="64 lowercase hex"):
        ledger.snapshots.get("not-an-id")


def test_job_round_trip_with_deterministic_ids_and_time(ledger: Ledger) -> None:
    record_sample_job(ledger)
    job = ledger.jobs.get("job-1")
    assert job.sealed and job.sealed_event_count == 3 and job.version == 4
    assert job.id == aggregate_id("job:job-1")
    assert job.created_on == DeterministicClock("s1").at(1)
    assert job.modified_on == DeterministicClock("s1").at(4)
    events = list(store_of(ledger).events.get(job.id))
    assert [e.payload["agent"] for e in events[1:2]] == ["math_agent"]  # type: ignore[attr-defined]
    assert events[1].event_id == event_id("s1", 0, "ROUTER_DECISION")  # type: ignore[attr-defined]
    assert events[2].sequence_index == 1  # type: ignore[attr-defined]
    assert events[2].payload == {"text": "4", "score": 0.3, "parts": [1, 2]}  # type: ignore[attr-defined]


def test_same_job_gives_byte_identical_events_in_two_stores(
    ledger: Ledger, raw_table: RawTable, tmp_path: object
) -> None:
    record_sample_job(ledger)
    other_settings = settings_for(f"sqlite:///{tmp_path}/other.db")
    with Ledger.open(other_settings) as other:
        record_sample_job(other)
    stream = Job.id_for("job-1")
    assert raw_table.rows(stream) == RawTable(other_settings).rows(stream)


def test_starting_the_same_job_twice_conflicts(ledger: Ledger) -> None:
    ledger.jobs.start("job-1", "s1", "hi", {})
    with pytest.raises(ConflictError, match="job job-1 already exists"):
        ledger.jobs.start("job-1", "s2", "hello", {})
    assert ledger.jobs.get("job-1").job_seed == "s1"


def test_sealed_job_takes_no_more_events(ledger: Ledger) -> None:
    record_sample_job(ledger)
    with pytest.raises(JobSealedError):
        ledger.jobs.record_events("job-1", [("LATE", {})])
    with pytest.raises(JobSealedError):
        ledger.jobs.seal("job-1")
    assert ledger.jobs.get("job-1").version == 4


def test_bad_job_input_is_refused_and_nothing_written(ledger: Ledger, raw_table: RawTable) -> None:
    with pytest.raises(ValueError, match="invalid job id"):
        ledger.jobs.start("bad id!", "s1", "x", {})
    with pytest.raises(ValueError, match="unknown snapshot kind"):
        ledger.jobs.start("job-2", "s1", "x", {"weather": "0" * 64})
    ledger.jobs.start("job-3", "s1", "x", {})
    with pytest.raises(ValueError, match=r"\$\.x"):
        ledger.jobs.record_events("job-3", [("OK", {"a": 1}), ("BAD", {"x": float("nan")})])
    # A completion is the ledger's own, stored with the seal: one without is tampering.
    with pytest.raises(ValueError, match="JobCompleted is recorded by the ledger"):
        ledger.jobs.record_events("job-3", [("OK", {}), ("JobCompleted", {})])
    # job-3's start and the check record of the key that signed it, no more.
    assert raw_table.execute("SELECT COUNT(*) FROM {table}") == [(2,)]


def test_key_rotation_keeps_old_events_verifiable(settings: object, store_url: str) -> None:
    with Ledger.open(settings_for(store_url, "k1")) as ledger:
        record_sample_job(ledger, "old")
    with Ledger.open(settings_for(store_url, "k1", "k2", active="k2")) as rotated:
        record_sample_job(rotated, "new")
        assert rotated.jobs.get("old").sealed and rotated.jobs.get("new").sealed
        summary = store_of(rotated).verify_all()
        assert (summary.jobs, summary.sealed_jobs) == (2, 2)
        table = RawTable(settings_for(store_url))
        assert table.state(Job.id_for("old"), 1).startswith(b"mace1.k1.")
        assert table.state(Job.id_for("new"), 1).startswith(b"mace1.k2.")
    with (
        Ledger.open(settings_for(store_url, "k2", active="k2")) as without_k1,
        pytest.raises(MissingSigningKey, match="MACE_SIGNING_KEYS lacks key k1"),
    ):
        without_k1.jobs.get("old")


def test_verify_all_counts_everything(ledger: Ledger) -> None:
    record_sample_job(ledger, "a")
    record_sample_job(ledger, "b", seed="s2")
    ledger.jobs.start("open", "s3", "still running", {})
    summary = store_of(ledger).verify_all()
    # 1 snapshot + 2 sealed jobs (4 events + 1 witness each) + 1 open job
    # + the signing key's check record
    assert (summary.events, summary.streams, summary.jobs, summary.sealed_jobs) == (13, 7, 3, 2)


def test_governance_and_receipts_are_stored_signed_and_read_back(ledger: Ledger) -> None:
    council = Governance.open("job:job-1")
    ada, ops = Actor.of("ada", ["council"]), Actor.of("ops", ["admin"])
    council.cast_vote("force_continue", "approve", ada, "2026-11-22T10:00:00Z")
    halts = Governance.open("tenant-snapshot:acme|" + "f" * 64)
    halts.halt("f" * 64, HaltCause.INTEGRITY_FAILURE, "MAC mismatch", ops, "2026-11-22T10:01:00Z")
    body = dict.fromkeys(BODY_KEYS) | {
        "receipt_id": "rct-" + "1" * 32,
        "context_hash": "abc",
        "entries": [{"memory_id": "m1", "score": 0.1 + 0.2}],
        "policy_snapshot": {"bundle_hash": None, "bundle_yaml": None, "captured_at": "t"},
    }
    receipt = Receipt.emit(body, "00" * 32)
    store_of(ledger).save(council, halts, receipt)

    stored_council: Governance = store_of(ledger).repository.get(Governance.id_for("job:job-1"))
    stored_halts: Governance = store_of(ledger).repository.get(
        Governance.id_for("tenant-snapshot:acme|" + "f" * 64)
    )
    stored_receipt: Receipt = store_of(ledger).repository.get(Receipt.id_for("rct-" + "1" * 32))
    assert stored_council.votes == {"force_continue": [("ada", "approve")]}
    assert stored_halts.halted == {"f" * 64: "INTEGRITY_FAILURE: MAC mismatch"}
    assert stored_receipt.body["entries"][0]["score"] == 0.3
    assert stored_receipt.body["policy_snapshot"]["captured_at"] == "t"
    summary = store_of(ledger).verify_all()
    assert (summary.events, summary.streams) == (6, 4)  # and the signing key's check record
    with pytest.raises(AccessDenied, match="only the council role may clear a halt"):
        stored_halts.clear_halt("f" * 64, ops, "2026-11-22T10:02:00Z")
