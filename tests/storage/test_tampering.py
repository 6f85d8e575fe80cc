"""Tampering with the database directly fails closed, on SQLite and PostgreSQL.

Each case edits stored rows the way someone with database access could, then asserts that both
reading the job and verifying the whole ledger report INTEGRITY_FAILURE with the stream and
version, and that no value decoded from tampered bytes reaches the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import pytest
from eventsourcing.utils import get_topic
from support.ledger_fixtures import RawTable, store_of
from support.sample_job import record_sample_job

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import ErrorCode, IntegrityFailure
from domain.job import Job, JobSealWitness
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import mac_message
from infrastructure.storage.verification import ledger as verification
from infrastructure.storage.verification import scan

JOB = Job.id_for("job-1")


def flip_byte(table: RawTable) -> None:
    state = bytearray(table.state(JOB, 2))
    state[-3] ^= 0x01
    table.set_column(JOB, 2, "state", bytes(state))


def change_topic(table: RawTable) -> None:
    table.set_column(JOB, 2, "topic", get_topic(Job.Sealed))


def change_version(table: RawTable) -> None:
    table.set_column(JOB, 2, "originator_version", 7)


def swap_events(table: RawTable) -> None:
    second, third = table.state(JOB, 2), table.state(JOB, 3)
    table.set_column(JOB, 2, "state", third)
    table.set_column(JOB, 3, "state", second)


def delete_middle(table: RawTable) -> None:
    table.delete(JOB, 3)


def delete_seal(table: RawTable) -> None:
    table.delete(JOB, 4)


def rewrite_input(table: RawTable) -> None:
    table.set_column(JOB, 1, "state", table.state(JOB, 1).replace(b'"2 + 2"', b'"6 * 7"'))


def break_envelope(table: RawTable) -> None:
    table.set_column(JOB, 2, "state", b"not json, not signed")


CASES: dict[str, tuple[Callable[[RawTable], None], int, str]] = {
    "flip-one-byte": (flip_byte, 2, "MAC mismatch"),
    "change-topic": (change_topic, 2, "MAC mismatch"),
    "change-version": (change_version, 2, "version 2 is missing"),
    "swap-two-events": (swap_events, 2, "MAC mismatch"),
    "delete-middle-event": (delete_middle, 3, "version 3 is missing"),
    "delete-sealed-jobs-last-event": (delete_seal, 4, "seal missing: witnessed after 3 events"),
    "rewrite-input-to-valid-json": (rewrite_input, 1, "MAC mismatch"),
    "replace-envelope": (break_envelope, 2, "not a signed MACE record"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_tampering_fails_closed(ledger: Ledger, raw_table: RawTable, case: str) -> None:
    record_sample_job(ledger)
    tamper, version, reason = CASES[case]
    tamper(raw_table)

    with pytest.raises(IntegrityFailure) as on_read:
        ledger.jobs.get("job-1")
    with pytest.raises(IntegrityFailure) as on_verify:
        store_of(ledger).verify_all()

    for failure in (on_read.value, on_verify.value):
        assert failure.code == ErrorCode.INTEGRITY_FAILURE
        assert (failure.stream, failure.version) == (str(JOB), version)
        assert reason in failure.reason
        assert str(failure).startswith(f"INTEGRITY_FAILURE: stream {JOB} version {version}: ")


def test_deleting_the_seal_witness_is_detected(ledger: Ledger, raw_table: RawTable) -> None:
    record_sample_job(ledger)
    raw_table.delete(JobSealWitness.id_for("job-1"), 1)
    with pytest.raises(IntegrityFailure, match="seal has no witness"):
        ledger.jobs.get("job-1")
    with pytest.raises(IntegrityFailure, match="seal has no witness"):
        store_of(ledger).verify_all()


def test_a_seal_its_witness_contradicts_fails_a_read_and_a_whole_store_verify_alike(
    ledger: Ledger, raw_table: RawTable
) -> None:
    # A correctly signed witness that disagrees with the seal (a bug, or a stolen key): one
    # check holds the two against each other, for a job read and for the whole store.
    record_sample_job(ledger)
    raw_table.delete(JobSealWitness.id_for("job-1"), 1)
    store_of(ledger).save(JobSealWitness(job_id="job-1", event_count=3, mac_digest="0" * 64))
    for check in (lambda: ledger.jobs.get("job-1"), store_of(ledger).verify_all):
        with pytest.raises(IntegrityFailure, match="seal disagrees with its witness") as failure:
            check()
        assert (failure.value.stream, failure.value.version) == (str(JOB), 4)


def test_seals_and_witnesses_looked_up_in_batches_are_each_held_to_the_other(
    ledger: Ledger, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A whole-store verify holds each seal to the witness it meets in the log; those it does not
    # meet are looked up once the log is read, in batches: every batch is checked, the last one
    # too, and the first failure in stream order is the one reported.
    monkeypatch.setattr(scan, "LOOKUPS_PER_QUERY", 2)
    names = [f"job-{n}" for n in range(5)]
    for name in names:
        record_sample_job(ledger, name, seed=name)
    assert store_of(ledger).verify_all().sealed_jobs == len(names)
    for name in names:
        raw_table.delete(JobSealWitness.id_for(name), 1)
    with pytest.raises(IntegrityFailure, match="seal has no witness") as failure:
        store_of(ledger).verify_all()
    assert failure.value.stream == str(min(Job.id_for(name) for name in names))


def test_a_seal_checked_late_is_still_reported_before_a_later_streams_failure(
    ledger: Ledger, raw_table: RawTable
) -> None:
    # A seal's witness is looked up after the pass has read on; the first failure in stream
    # order is still the one reported, as one check after the other would report it.
    names = sorted((f"job-{n}" for n in range(6)), key=Job.id_for)
    for name in names:
        record_sample_job(ledger, name, seed=name)
    first, later = names[0], names[-1]
    raw_table.delete(JobSealWitness.id_for(first), 1)
    state = bytearray(raw_table.state(Job.id_for(later), 2))
    state[-3] ^= 0x01
    raw_table.set_column(Job.id_for(later), 2, "state", bytes(state))
    # One pass over every stream (no checkpoint pass beside it, which splits the streams).
    with pytest.raises(IntegrityFailure) as failure:
        verification.verify_ledger(
            store_of(ledger).location, raw_table.table, store_of(ledger).keyring, None
        )
    assert (failure.value.stream, failure.value.reason) == (
        str(Job.id_for(first)),
        "seal has no witness",
    )


def test_tampered_snapshot_is_refused(ledger: Ledger, raw_table: RawTable) -> None:
    snapshot = record_sample_job(ledger).snapshot_ids["router"]
    stream = Snapshot.id_for(snapshot)
    raw_table.set_column(stream, 1, "state", raw_table.state(stream, 1).replace(b"R1", b"R9"))
    with pytest.raises(IntegrityFailure, match="MAC mismatch"):
        ledger.snapshots.get(snapshot)


def test_snapshot_whose_id_no_longer_matches_its_content_is_refused(ledger: Ledger) -> None:
    # A correctly signed record that claims a wrong content address (a bug, or a stolen key).
    declared = Snapshot.declare("router", {"rules": []})
    forged = Snapshot(
        snapshot_id=declared.snapshot_id,
        kind="router",
        schema_version=1,
        payload={"rules": ["something else"]},
        config_hash=declared.config_hash,
        seed_namespace=declared.seed_namespace,
        generator=declared.generator,
    )
    store_of(ledger).save(forged)
    with pytest.raises(IntegrityFailure, match="snapshot id does not match its content"):
        ledger.snapshots.get(declared.snapshot_id)


def test_deleting_a_whole_job_is_caught_by_the_checkpoint_and_the_head_index(
    ledger: Ledger, raw_table: RawTable
) -> None:
    # No store-wide job registry counts the jobs: what covers a job deleted whole, witness and
    # all, is the checkpoint written after it (the tree over the log, and the head index).
    record_sample_job(ledger, "job-1")
    record_sample_job(ledger, "job-2", seed="s2")
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    raw_table.execute(
        "DELETE FROM {table} WHERE originator_id IN (%s, %s)",
        (raw_table.key(JOB), raw_table.key(JobSealWitness.id_for("job-1"))),
    )
    with pytest.raises(IntegrityFailure, match="checkpoint 1 no longer holds"):
        store_of(ledger).verify_all()
    store_of(ledger).checkpoint_saved()  # forget the head check's cached checkpoint
    with pytest.raises(IntegrityFailure, match="truncated below checkpoint 1"):
        ledger.jobs.get("job-1")


def test_a_snapshot_never_stored_is_no_tampering(ledger: Ledger) -> None:
    # Only a snapshot a completed job found in the ledger must still be there; a job recorded
    # piece by piece records no completion, so what it declares is not claimed present.
    ledger.jobs.start("job-1", "s1", "2 + 2", {"router": "0" * 64})
    ledger.jobs.seal("job-1")
    assert store_of(ledger).verify_all().sealed_jobs == 1


@pytest.mark.parametrize(
    ("originator_id", "version", "topic"),
    [
        (UUID("12345678-1234-5678-1234-567812345678"), 1, "domain.job:Job.Started"),
        (UUID(int=0), 2**63 - 1, "t"),
        ('job:a"b\\c\u2028é', 7, 'quote"d\ttopic\x01'),
        (UUID(int=1), -(2**63), ""),
        (UUID(int=1), True, "t"),
        (UUID(int=1), 1.0, "t"),
    ],
)
def test_the_mac_message_is_the_canonical_json_of_its_header_then_the_body(
    originator_id: UUID | str, version: int, topic: str
) -> None:
    expected = canonical_json([str(originator_id), version, topic]) + b"{}"
    assert mac_message(originator_id, version, topic, b"{}") == expected


@pytest.mark.parametrize("version", [2**63, -(2**63) - 1])
def test_a_header_the_canonical_form_refuses_is_refused_by_the_mac_message_too(
    version: object,
) -> None:
    with pytest.raises(CanonicalJSONError):
        mac_message(UUID(int=1), version, "t", b"")  # type: ignore[arg-type]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("stored_id", [None, "not-a-uuid"])
def test_a_stream_id_that_is_no_uuid_fails_verify_closed(
    ledger: Ledger, raw_table: RawTable, stored_id: str | None
) -> None:
    """SQLite's text column holds whatever is written there (PostgreSQL's uuid column refuses
    it): verify --all reports an integrity failure, never a crash."""
    stream = record_sample_job(ledger).id
    raw_table.set_column(stream, 2, "originator_id", stored_id)
    with pytest.raises(IntegrityFailure, match="stream id is not a UUID"):
        store_of(ledger).verify_all()


@pytest.mark.parametrize("case", sorted(CASES))
def test_tampering_fails_closed_on_a_checkpointed_store_too(
    ledger: Ledger, raw_table: RawTable, case: str
) -> None:
    """The same edits on the store as every CLI write leaves it: checkpointed after the job."""
    record_sample_job(ledger)
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    checkpoints.write()
    store_of(ledger).checkpoint_saved()
    tamper, _, _ = CASES[case]
    tamper(raw_table)

    with pytest.raises(IntegrityFailure) as on_read:
        ledger.jobs.get("job-1")
    with pytest.raises(IntegrityFailure) as on_verify:
        store_of(ledger).verify_all()

    assert on_read.value.stream == str(JOB), on_read.value
    assert on_verify.value.code == ErrorCode.INTEGRITY_FAILURE
