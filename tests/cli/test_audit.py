"""``mace audit``: every job replayed from one read of the log, one signed audit result.

A ledger of Stage-0 jobs (``ledger.jobs.run``) and runs recorded by another runtime
(``ledger.run_imports``) is audited whole, with one worker and with two; then attacked: a job's
stored bytes altered, a job recorded (and signed, as with the keys) with a routing or an answer
its re-run does not give, a job deleted below the newest checkpoint. Scope (``--tenant``,
``--since``), bad input, and reading a read store while recording on the primary. Both stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from eventsourcing.persistence import StoredEvent
from support.ledger_fixtures import RawTable, run, store_of
from support.misrouted_run import WRONG_DECISION, run_lines
from support.store_copies import fingerprint

from domain.audit_record import AuditRecord
from domain.canonical import digest
from domain.job import CaptureMode, Job, JobSealWitness
from domain.naming import tenant_scoped
from domain.run_file import parse_run
from domain.sem import SemEntry
from infrastructure.application.audit_scan import AuditWindow
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import sign_record
from infrastructure.storage.settings import Settings
from projections.audit import AuditScope
from projections.replay_checks import Check
from projections.replay_report import fact_counts

SUM = "What is 2 + 3?"
AUDITOR = {"MACE_ACTOR": "ada", "MACE_ROLES": "auditor"}


@pytest.fixture
def auditor(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in AUDITOR.items():
        monkeypatch.setenv(name, value)
    return cli_env


def ingest(ledger: Ledger, lines: list[dict[str, Any]], tenant: str = "default") -> str:
    log, _ = ledger.run_imports.record_once(parse_run(map(orjson.dumps, lines)), tenant)
    return log.job_id


def record_clean(settings: Settings) -> dict[str, str]:
    """Two Stage-0 jobs, a faithful ingested copy of one, a run without snapshots, an open job:
    each job's id by what it is. The copied job keeps its responses (full_io, as the copy's run
    file says); the other keeps the default, prompts_only."""
    with Ledger.open(settings) as ledger:
        first = ledger.jobs.run(
            SUM, "s1", job_id="stage0-sum", capture_mode=CaptureMode.FULL_IO
        ).job_id
        second = ledger.jobs.run("What is the capital of France?", "s2", job_id="stage0-fr").job_id
        copy = ingest(ledger, run_lines(ledger.jobs.stream(first), "ingested-copy"))
        bare = ingest(
            ledger,
            [
                {"type": "RunStarted", "job_id": "bare", "seed": 7, "input": "x"},
                {"type": "RunCompleted", "final_output": "done"},
            ],
        )
        ledger.jobs.start("still-open", "s3", "2 + 2", {})
    return {"first": first, "second": second, "copy": copy, "bare": bare}


def audit(capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, dict[str, Any], str]:
    code, out, err = run(capsys, "audit", "--json", *options)
    return code, (orjson.loads(out) if out else {}), err


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {job["job"]: (job["verdict"], job["code"]) for job in report["jobs"]}


def head(settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        return store_of(ledger).recorder.max_notification_id() or 0


def stored_record(settings: Settings, audit_id: str) -> AuditRecord:
    with Ledger.open(settings, create=False) as ledger:
        return store_of(ledger).repository.get_one(
            AuditRecord, AuditRecord.id_for(audit_id), "audit"
        )


def test_a_clean_ledger_audits_ok_the_same_with_one_worker_or_two(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    code, one, err = audit(capsys)
    assert (code, err) == (0, "")
    assert verdicts(one) == {
        ids["first"]: ("ok", None),
        ids["second"]: ("ok", None),
        ids["copy"]: ("ok", None),
        ids["bare"]: ("not_replayable", "MISSING_SNAPSHOT"),
        "still-open": ("open", None),
    }
    assert [job["job"] for job in one["jobs"]] == sorted(verdicts(one))
    totals = one["totals"]
    assert (totals["jobs"], totals["ok"], totals["not_replayable"], totals["open"]) == (5, 3, 1, 1)
    assert (totals["diverged"], totals["integrity_failures"], totals["stream_failures"]) == (
        0,
        0,
        0,
    )
    assert one["not_replayable"] == {"MISSING_SNAPSHOT": 1}
    assert one["ok"] is True and one["stream_failures"] == []
    assert any("checkpoint" in line for line in one["checked"])

    # The record holds what the report says, and its digest is the report's results'.
    record = stored_record(auditor, one["audit_id"])
    results = {"jobs": one["jobs"], "stream_failures": one["stream_failures"]}
    assert record.results_digest == one["results_digest"] == digest(results)
    assert (record.actor_id, record.roles) == ("ada", ["auditor"])
    assert (record.since, record.through, record.totals) == (0, one["through"], totals)

    # Two workers: the same per-job results, so the same digest (over more of the log: the
    # first audit's record and checkpoint are in it now).
    code, two, err = audit(capsys, "--workers", "2")
    assert (code, err) == (0, "")
    assert two["jobs"] == one["jobs"] and two["results_digest"] == one["results_digest"]
    assert two["through"] > one["through"] and two["audit_id"] != one["audit_id"]


def test_text_output_names_each_job_and_the_record(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    code, out, err = run(capsys, "audit")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert any(line.startswith(f"job {ids['first']}: ok; of ") for line in lines)
    assert "job still-open: open (skipped: not sealed)" in lines
    assert any(line.startswith("totals: 5 jobs: 3 ok, 0 diverged") for line in lines)
    assert any(line.startswith("not checked: ") for line in lines)
    assert lines[-1].startswith("audit record ") and "written to MACE_STORE" in lines[-1]


def test_each_job_shows_how_its_facts_were_checked_and_only_a_reproduced_one_is_ok(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 point 6: per job, the replay's check counts (re-executed, compared by hash,
    taken as recorded, missing, ...); in the totals, the facts of every replayed job by how they
    were checked. A run nothing in which could be re-executed is never ok."""
    with Ledger.open(auditor) as ledger:
        reproduced = ledger.jobs.run(
            SUM, "s1", job_id="stage0-sum", capture_mode=CaptureMode.FULL_IO
        ).job_id
        outside = ingest(
            ledger,
            [
                {
                    "type": "RunStarted",
                    "job_id": "outside",
                    "seed": "s1",
                    "input": "capital of france",
                    "snapshot_ids": ledger.snapshots.default_ids(),
                },
                {"type": "GateDecision", "gate": "publish", "decision": "allow"},
                {"type": "RunCompleted", "final_output": "paris"},
            ],
        )
    expected = {}
    for job_id in (reproduced, outside):
        code, out, _ = run(capsys, "replay", job_id, "--mode", "audit", "--json")
        expected[job_id] = orjson.loads(out)["check_counts"]
    assert expected[outside]["diverged"] == 0

    code, report, err = audit(capsys)
    assert (code, err) == (0, "")
    jobs = {job["job"]: job for job in report["jobs"]}
    assert (jobs[reproduced]["verdict"], jobs[outside]["verdict"]) == ("ok", "not_replayable")
    assert {job: jobs[job]["check_counts"] for job in expected} == expected
    totals = report["totals"]
    for check in Check:
        assert totals[f"facts_{check.value}"] == sum(c[check.value] for c in expected.values())
    assert totals["facts_taken_as_recorded"] > 0

    code, out, err = run(capsys, "audit")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert f"job {reproduced}: ok; {fact_counts(expected[reproduced])}" in lines
    assert any(
        line.startswith(f"job {outside}: not replayable: taken as recorded: ")
        and line.endswith(f"; {fact_counts(expected[outside])}")
        for line in lines
    ), lines
    summed = {check.value: totals[f"facts_{check.value}"] for check in Check}
    assert f"facts of the 2 jobs replayed: {fact_counts(summed)}" in lines


def test_altered_bytes_fail_that_job_only(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    table = RawTable(auditor)
    stream = Job.id_for(ids["second"])
    state = table.state(stream, 3)
    table.set_column(stream, 3, "state", state.replace(b'"', b"'", 1)[:-1] + b"}")
    code, report, _ = audit(capsys, "--workers", "2")
    assert code == 1
    found = verdicts(report)
    assert found[ids["second"]] == ("integrity_failure", "INTEGRITY_FAILURE")
    assert found[ids["first"]] == found[ids["copy"]] == ("ok", None)
    assert report["totals"]["integrity_failures"] == 1 and report["ok"] is False
    failed = next(job for job in report["jobs"] if job["job"] == ids["second"])
    assert f"stream {stream} version 3" in failed["detail"]


def test_a_signed_record_its_re_run_disagrees_with_diverges(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    with Ledger.open(auditor) as ledger:
        entries = ledger.jobs.stream(ids["first"])
        misrouted = ingest(ledger, run_lines(entries, "misrouted", WRONG_DECISION))
        wrong = ingest(ledger, run_lines(entries, "wrong-answer", final_output="2 + 3 = 6"))
    code, report, _ = audit(capsys)
    assert code == 1
    found = verdicts(report)
    assert found[misrouted] == ("diverged", "REPLAY_DIVERGENCE")
    assert found[wrong] == ("diverged", "RESULT_MISMATCH")
    assert found[ids["first"]] == ("ok", None)
    first = {job["job"]: job["divergence"] for job in report["jobs"]}
    assert first[misrouted]["field"] == "router_decision"
    assert first[misrouted]["recorded"] == WRONG_DECISION
    answer = next(e for e in entries if e["event_type"] == "JobCompleted")["payload"]
    assert (first[wrong]["recorded"], first[wrong]["replayed"]) == (
        "2 + 3 = 6",
        answer["final_output"],
    )
    assert report["totals"]["diverged"] == 2


def test_a_job_deleted_below_the_checkpoint_is_not_passed_over(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)  # the ledger checkpointed as it closed
    table = RawTable(auditor)
    job, witness = Job.id_for(ids["second"]), JobSealWitness.id_for(ids["second"])
    for stream in (job, witness):
        table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(stream),))
    code, report, _ = audit(capsys)
    assert code == 1
    assert ids["second"] not in verdicts(report)
    failures = {f["stream"]: f for f in report["stream_failures"]}
    assert set(failures) == {str(job), str(witness)}
    assert "the newest checkpoint counts" in failures[str(job)]["reason"]
    assert report["ok"] is False


def test_tenant_and_since_narrow_the_jobs_audited(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    middle = head(auditor)
    with Ledger.open(auditor) as ledger:
        ledger.jobs.run(SUM, "s9", job_id="acme-sum", tenant="acme")
        later = ledger.jobs.run(SUM, "s10", job_id="later").job_id
    code, report, _ = audit(capsys, "--tenant", "acme")
    assert code == 0
    assert verdicts(report) == {tenant_scoped("acme", "acme-sum"): ("ok", None)}
    assert report["tenant"] == "acme"
    assert any("other tenants' jobs" in line for line in report["not_checked"])
    code, report, _ = audit(capsys, "--since", str(middle))
    assert code == 0
    assert set(verdicts(report)) == {tenant_scoped("acme", "acme-sum"), later}
    assert ids["first"] not in verdicts(report)
    assert report["since"] == middle and report["first_notification_id"] > middle


def test_a_job_begun_before_the_window_and_sealed_in_it_is_not_a_false_alarm(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its seal and witness come after N, its start before: neither is held to the other (the
    job is not audited, as the report says), and nothing fails."""
    with Ledger.open(auditor) as ledger:
        ledger.jobs.start("straddles", "s1", "what?", {})
    since = head(auditor)
    with Ledger.open(auditor) as ledger:
        ledger.jobs.record_events("straddles", [("StageTransition", {"to_stage": "answer"})])
        ledger.jobs.seal("straddles")
        later = ledger.jobs.run(SUM, "s2", job_id="later").job_id
    code, report, _ = audit(capsys, "--since", str(since))
    assert (code, report["ok"], report["stream_failures"]) == (0, True, [])
    assert set(verdicts(report)) == {later}
    assert any("at or before notification" in line for line in report["not_checked"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (("--workers", "0"), "argument --workers: must be at least 1, got 0"),
        (("--since", "-1"), "argument --since: must be at least 0, got -1"),
        (("--workers", "two"), "argument --workers: expected a whole number, got 'two'"),
        (("--tenant", "no such/tenant"), "argument --tenant: "),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    auditor: Settings, capsys: pytest.CaptureFixture[str], options: tuple[str, ...], message: str
) -> None:
    record_clean(auditor)
    before = head(auditor)
    code, out, err = run(capsys, "audit", *options)
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: INVALID_INPUT: {message}") and err.count("\n") == 1
    assert head(auditor) == before


def test_an_actor_without_a_replay_role_is_refused_before_reading(
    auditor: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    record_clean(auditor)
    before = head(auditor)
    monkeypatch.setenv("MACE_ROLES", "council")
    code, out, err = run(capsys, "audit")
    assert (code, out) == (1, "")
    assert err.startswith("mace: ACCESS_DENIED: an audit needs one of the roles")
    assert head(auditor) == before


def test_the_audit_reads_the_read_store_and_records_on_the_primary(
    auditor: Settings,
    capsys: pytest.CaptureFixture[str],
    store_copy: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = record_clean(auditor)
    replica = store_copy()
    with Ledger.open(auditor) as ledger:
        newer = ledger.jobs.run(SUM, "s11", job_id="after-the-copy").job_id
    monkeypatch.setenv("MACE_READ_STORE", replica)
    before, primary_head = fingerprint(replica), head(auditor)
    code, report, err = audit(capsys)
    assert (code, err) == (0, "")
    assert ids["first"] in verdicts(report) and newer not in verdicts(report)
    assert report["read_store"]["head"] == report["through"]
    assert fingerprint(replica) == before
    assert head(auditor) > primary_head
    assert stored_record(auditor, report["audit_id"]).through == report["through"]


def test_a_worker_reads_the_window_and_nothing_after_it(auditor: Settings) -> None:
    record_clean(auditor)
    with Ledger.open(auditor, create=False) as ledger:
        through = (store_of(ledger).recorder.max_notification_id() or 0) - 5
        window = AuditWindow(AuditScope(since=3), through, checkpointed=0)
        found = ledger.audits.audit_range(window, (None, None), lambda done: None)
    assert (found.first_notification_id, found.last_notification_id) == (4, through)
    assert found.events == through - 3


def test_a_seal_without_its_witness_fails_its_job_with_no_checkpoint_to_tell(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = record_clean(auditor)
    table = RawTable(auditor)
    table.forget_checkpoints()
    witness = JobSealWitness.id_for(ids["first"])
    table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(witness),))
    code, report, _ = audit(capsys, "--workers", "2")
    assert code == 1
    failed = next(job for job in report["jobs"] if job["job"] == ids["first"])
    assert (failed["verdict"], failed["code"]) == ("integrity_failure", "INTEGRITY_FAILURE")
    assert failed["detail"].endswith("seal has no witness")
    assert verdicts(report)[ids["second"]] == ("ok", None)
    assert "no checkpoint: a stream deleted whole leaves no trace" in report["not_checked"]


def test_a_tenants_audit_names_none_of_another_tenants_jobs_or_streams(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another tenant's damaged job is counted in a tenant's audit, never named: a tenant's id
    behaves for everyone else as a free one; the store's damage still makes the audit fail."""
    with Ledger.open(auditor) as ledger:
        ours = ledger.jobs.run(SUM, "s1", job_id="acme-sum", tenant="acme").job_id
        theirs = ledger.jobs.run(SUM, "s2", job_id="beta-sum", tenant="beta").job_id
    table = RawTable(auditor)
    stream = Job.id_for(tenant_scoped("beta", theirs))
    table.set_column(stream, 2, "state", table.state(stream, 2)[:-2] + b"x}")

    code, report, _ = audit(capsys, "--tenant", "acme")
    assert code == 1
    assert verdicts(report) == {tenant_scoped("acme", ours): ("ok", None)}
    assert report["stream_failures"] == []
    assert report["totals"]["stream_failures"] == 1 and report["ok"] is False
    assert "beta" not in orjson.dumps(report).decode()
    assert str(stream) not in orjson.dumps(report).decode()

    code, report, _ = audit(capsys)  # over every tenant: named
    assert verdicts(report)[tenant_scoped("beta", theirs)][0] == "integrity_failure"


def test_since_still_holds_every_stream_the_checkpoint_counts(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream whose events after the window's start were all deleted is not met by the scan:
    its last stored version still falls short of the checkpoint, and the audit says so."""
    key = "user/customer/alice/plan"
    with Ledger.open(auditor) as ledger:
        ledger.sem.put(key, "silver")
    since = head(auditor)
    with Ledger.open(auditor) as ledger:
        ledger.sem.put(key, "gold")  # checkpointed as the ledger closes
    code, report, _ = audit(capsys, "--since", str(since))
    assert (code, report["ok"]) == (0, True)

    RawTable(auditor).delete(SemEntry.id_for(key), 2)
    code, report, _ = audit(capsys, "--since", str(since))
    assert (code, report["ok"]) == (1, False)
    failure = report["stream_failures"][0]
    assert failure["stream"] == str(SemEntry.id_for(key)) and failure["version"] == 2
    assert "the log holds 1" in failure["reason"]


def test_an_event_after_the_seal_fails_the_job_judged_at_its_seal(
    auditor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """Signed with the key (an insider, or a stolen key): the job was judged ok at its seal,
    and the event after it fails the job, as any read of the job fails it."""
    ids = record_clean(auditor)
    stream = Job.id_for(ids["first"])
    with Ledger.open(auditor, checkpoint_on_close=False) as ledger:
        records = store_of(ledger).recorder.select_events(stream)
        copied = records[1]
        body = copied.state.split(b".", 3)[3]
        version = records[-1].originator_version + 1
        state = sign_record(store_of(ledger).keyring, stream, version, copied.topic, body)
        store_of(ledger).recorder.insert_events([StoredEvent(stream, version, copied.topic, state)])
    code, report, _ = audit(capsys)
    assert code == 1
    assert verdicts(report)[ids["first"]] == ("integrity_failure", "INTEGRITY_FAILURE")
    failed = next(job for job in report["jobs"] if job["job"] == ids["first"])
    assert "event recorded after the seal" in failed["detail"]
    assert str(stream) not in {f["stream"] for f in report["stream_failures"]}
