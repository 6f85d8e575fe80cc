"""Replay races and crashes, on SQLite and PostgreSQL: every REPLAY_REQUEST gets its result, or
is seen as abandoned.

Concurrent replays of one job race for the next version of its governance record; a loser reads
the record again and appends again, for its request and for its result, so no attempt fails with
"try again" and none is left without a result. A replay whose process dies between its request
and its result (SIGKILL, or the store refusing the result) leaves a request that will never get
one: the governance log, ``mace verify --all`` (text and JSON), the dashboard and ``/metrics``
call it abandoned; while its process still holds its lease, it is running.
"""

from __future__ import annotations

import signal
from threading import Barrier, Event, Thread
from typing import Any

import orjson
import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic
from support.api_support import Api, checked_client, parse_metrics
from support.cli_output import canonical_line
from support.ledger_fixtures import RawTable, run, store_of
from support.stalled_replays import stalled_replay

from domain.canonical import canonical_json
from domain.errors import IntegrityFailure
from domain.governance import Actor, Governance
from domain.naming import DEFAULT_TENANT
from domain.replay_access import ReplayMode
from domain.replay_record import ReplayRecord, replay_record_name
from infrastructure.application.governance import ABANDONED, RUNNING
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayService
from infrastructure.storage.backends.connection import connect_postgres
from infrastructure.storage.records.signed_record import sign_record, verify_record
from infrastructure.storage.settings import PostgresStore, Settings, SQLiteStore

AUDITOR = Actor.of("aude", ["auditor"])
CONCURRENT = 24
LEDGERS = 6
"""24 concurrent replays through 6 ledgers, as 6 service processes of 4 threads each would (each
ledger holds its own connections: 24 would exhaust a default PostgreSQL's 100)."""
RESULT_TOPIC = get_topic(Governance.ReplayResulted)


def replay_entries(
    ledger: Ledger, job_id: str, tenant: str = DEFAULT_TENANT
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tenant's job's REPLAY_REQUEST and REPLAY_RESULT entries in its governance log."""
    log = ledger.governance.log(job_id, tenant=tenant)
    requests = [e for e in log if e["event"] == "REPLAY_REQUEST"]
    results = [e for e in log if e["event"] == "REPLAY_RESULT"]
    return requests, results


# Races


def test_concurrent_replays_of_one_job_each_get_exactly_one_result(settings: Settings) -> None:
    with Ledger.open(settings) as ledger:
        job_id = ledger.jobs.run("2 + 3", "s1").job_id
    ledgers = [Ledger.open(settings) for _ in range(LEDGERS)]
    start = Barrier(CONCURRENT)
    attempts: list[int] = []
    errors: list[BaseException] = []

    def replay(ledger: Ledger) -> None:
        start.wait()
        try:
            attempts.append(ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR).attempt)
        except BaseException as exc:
            errors.append(exc)

    workers = [Thread(target=replay, args=(ledgers[n % LEDGERS],)) for n in range(CONCURRENT)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    try:
        assert errors == []
        assert sorted(attempts) == list(range(1, CONCURRENT + 1))
        requests, results = replay_entries(ledgers[0], job_id)
        assert sorted(r["attempt"] for r in requests) == sorted(attempts)
        assert sorted(r["attempt"] for r in results) == sorted(attempts)
        assert {r["result"] for r in requests} == {"recorded"}
        assert all(r["ok"] for r in results)
        assert ledgers[0].governance.unanswered_replays() == []
        for attempt in attempts:
            record = ledgers[0].replays.record(job_id, attempt)
            assert record.report is not None and record.report["attempt"] == attempt
    finally:
        for ledger in ledgers:
            ledger.close()


def test_a_conflict_that_is_no_race_fails_instead_of_retrying_for_ever(
    ledger: Ledger, raw_table: RawTable
) -> None:
    """The governance record lost its last attempt (deleted rows): the next replay gets the same
    number, whose replay record exists. That is no race; the replay fails, its request abandoned."""
    job_id = ledger.jobs.run("2 + 3", "s1").job_id
    ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)
    stream = Governance.id_for(f"job:{job_id}")
    for version, _, _ in raw_table.rows(stream)[-2:]:  # attempt 1's request and result
        raw_table.delete(stream, version)

    with pytest.raises(IntegrityFailure, match=f"replay record {job_id}#1 exists before"):
        ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)

    [unanswered] = ledger.governance.unanswered_replays()
    assert (unanswered.request.attempt, unanswered.status) == (1, ABANDONED)
    assert store_of(ledger).stream_exists(ReplayRecord.id_for(replay_record_name(job_id, 1)))


# A replay in progress is running, not abandoned


def test_a_replay_in_progress_is_running_until_its_result_is_stored(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = ledger.jobs.run("2 + 3", "s1").job_id
    requested, go_on = Event(), Event()
    run_replay = ReplayService._run_replay

    def paused(self: ReplayService, source: Any, request: Any) -> Any:
        requested.set()
        go_on.wait()
        return run_replay(self, source, request)

    monkeypatch.setattr(ReplayService, "_run_replay", paused)
    worker = Thread(target=ledger.replays.run, args=(job_id, ReplayMode.AUDIT, AUDITOR))
    worker.start()
    try:
        assert requested.wait(timeout=60)
        [unanswered] = ledger.governance.unanswered_replays()
        assert (unanswered.request.attempt, unanswered.status) == (1, RUNNING)
        [request], results = replay_entries(ledger, job_id)
        assert (request["result"], results) == (RUNNING, [])
    finally:
        go_on.set()
        worker.join()
    [request], [result] = replay_entries(ledger, job_id)
    assert (request["result"], result["attempt"]) == ("recorded", 1)
    assert ledger.governance.unanswered_replays() == []


# Crashes: a request whose process is gone is abandoned, everywhere it is shown


def test_a_result_the_store_refuses_leaves_the_request_abandoned(
    ledger: Ledger,
    settings: Settings,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real trigger refuses the REPLAY_RESULT insert: the process fails after its request."""
    job_id = ledger.jobs.run("2 + 3", "s1").job_id
    refuse_replay_results(RawTable(settings))

    with pytest.raises(IntegrityFailure) as refused:
        ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)
    record = Governance.id_for(f"job:{job_id}")
    assert (refused.value.stream, refused.value.version) == (str(record), 2)  # after the request
    assert refused.value.reason == (
        f"replay result for {job_id}: the store refused it though no other writer appended first"
    )

    [request], results = replay_entries(ledger, job_id)
    assert (request["attempt"], request["result"], results) == (1, ABANDONED, [])
    [unanswered] = ledger.governance.unanswered_replays()
    assert unanswered.as_json() == {
        "job_id": job_id,
        "attempt": 1,
        "mode": "audit",
        "actor_id": "aude",
        "requested_at": request["recorded_at"],
        "status": ABANDONED,
    }
    assert not store_of(ledger).stream_exists(ReplayRecord.id_for(replay_record_name(job_id, 1)))

    # On the command line: exit 1 with the code, not a usage error; verify lists both requests.
    monkeypatch.setenv("MACE_ACTOR", "aude")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    code, out, err = run(capsys, "replay", job_id)
    assert (code, out) == (1, "")
    assert err == (
        f"mace: INTEGRITY_FAILURE: stream {record} version 3: replay result for {job_id}:"
        " the store refused it though no other writer appended first\n"
    )
    code, out, _ = run(capsys, "verify", "--all")
    assert code == 0
    assert out.splitlines()[1] == "replay requests without a result: 2 abandoned, 0 running"


def refuse_replay_results(table: RawTable) -> None:
    if isinstance(table.store, SQLiteStore):
        table.execute(
            "CREATE TRIGGER refuse_results BEFORE INSERT ON {table}"
            f" WHEN NEW.topic = '{RESULT_TOPIC}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        return
    table.execute(
        "CREATE FUNCTION refuse_results() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = 'check_violation'; END $$"
    )
    table.execute(
        "CREATE TRIGGER refuse_results BEFORE INSERT ON {table} FOR EACH ROW"
        f" WHEN (NEW.topic = '{RESULT_TOPIC}') EXECUTE FUNCTION refuse_results()"
    )


def test_a_replay_killed_mid_run_is_abandoned_in_the_log_verify_dashboard_and_metrics(
    api: Api, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = api.new_job()
    finished = api.replay(job_id)
    assert finished.status_code == 200, finished.content

    lease = kill_mid_replay(job_id, "acme", cli_env)

    # The governance log, on the command line and over HTTP.
    code, out, _ = run(capsys, "governance", "log", job_id, "--tenant", "acme", "--json")
    requests = [e for e in map(orjson.loads, out.splitlines()) if e["event"] == "REPLAY_REQUEST"]
    assert code == 0
    assert [(r["attempt"], r["result"], r["lease"]) for r in requests] == [
        (1, "recorded", requests[0]["lease"]),
        (2, ABANDONED, lease),
    ]
    code, out, _ = run(capsys, "governance", "log", job_id, "--tenant", "acme")
    [line] = [line for line in out.splitlines() if '"attempt":2' in line and "REQUEST" in line]
    assert line.startswith(f"job:{job_id} #3 REPLAY_REQUEST abandoned {{")
    assert '"result":"abandoned"' in line
    http_requests = [e for e in api.governance(job_id) if e["event"] == "REPLAY_REQUEST"]
    assert [r["result"] for r in http_requests] == ["recorded", ABANDONED]

    # mace verify --all: the ledger is intact (exit 0); the abandoned request is listed, its job
    # named as across the store: scoped by its tenant.
    before = api.position()
    code, out, err = run(capsys, "verify", "--all")
    requested_at = requests[1]["recorded_at"]
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == [
        "replay requests without a result: 1 abandoned, 0 running",
        f"abandoned: job acme|{job_id} attempt 2 (audit by kim, requested {requested_at})",
    ]
    code, out, err = run(capsys, "verify", "--all", "--json")
    verdict = canonical_line(out)
    assert (code, err, verdict["ok"], verdict["running_replays"]) == (0, "", True, [])
    assert verdict["abandoned_replays"] == [
        {
            "job_id": f"acme|{job_id}",
            "attempt": 2,
            "mode": "audit",
            "actor_id": "kim",
            "requested_at": requested_at,
            "status": ABANDONED,
        }
    ]

    # The read model has only the events: no result, so pending; never a success or failure.
    [row] = [r for r in api.ledger.read_models.rows("replay_outcomes") if r["attempt"] == 2]
    assert (row["outcome"], row["finished_at"], row["error_code"]) == ("pending", None, None)

    # The dashboard and /metrics tell it apart: abandoned, counted on its own.
    page = api.get("/dashboard").text
    assert f'<tr><td><a href="/dashboard/jobs/{job_id}">{job_id}</a></td><td>#2</td>' in page
    assert '<span class="badge abandoned">abandoned</span>' in page
    assert "Abandoned replays (1)" in page
    assert "Replay success rate<b>100.0%</b>1 of 1 that ran" in page
    job_page = api.get(f"/dashboard/jobs/{job_id}").text
    assert '<li>#2 audit by kim: <span class="badge abandoned">abandoned</span>' in job_page
    metrics = parse_metrics(api.get("/metrics").text)
    attempts = "mace_replay_attempts_total"
    assert metrics.value(attempts, tenant="acme", mode="audit", outcome="abandoned") == 1
    assert metrics.value(attempts, tenant="acme", mode="audit", outcome="ok") == 1
    assert metrics.value("mace_replay_success_rate", tenant="acme") == 1

    # Telling it apart wrote nothing.
    assert api.position() == before


def kill_mid_replay(job_id: str, tenant: str, settings: Settings) -> str:
    """Start a replay in another process, SIGKILL it once its request is stored; its lease."""
    with stalled_replay(tenant, job_id) as process:
        with Ledger.open(settings, create=False) as ledger:
            requests, _ = replay_entries(ledger, job_id, tenant)
            assert requests[-1]["result"] == RUNNING
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    lease = requests[-1]["lease"]
    assert isinstance(lease, str)
    wait_for_the_server_to_let_go(settings, lease)
    return lease


def wait_for_the_server_to_let_go(settings: Settings, lease: str) -> None:
    """PostgreSQL ends a dead client's session (and its advisory locks) on its own time: block
    on the lease's lock until the server has let it go. The operating system drops a dead
    process's file locks as it exits."""
    store = settings.parsed_store()
    if not isinstance(store, PostgresStore):
        return
    key = int.from_bytes(bytes.fromhex(lease), signed=True)
    with connect_postgres(store) as connection:
        connection.execute("SET lock_timeout = '60s'")
        connection.execute("SELECT pg_advisory_lock(%s)", (key,))
        connection.execute("SELECT pg_advisory_unlock(%s)", (key,))


def test_a_request_recorded_before_leases_existed_reads_as_abandoned(
    ledger: Ledger, settings: Settings
) -> None:
    """A version-1 REPLAY_REQUEST (no lease) is upcast; without a result, nobody runs it."""
    job_id = ledger.jobs.run("2 + 3", "s1").job_id
    ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)  # the first request opens the record
    table = RawTable(settings)
    refuse_replay_results(table)
    with pytest.raises(IntegrityFailure):
        ledger.replays.run(job_id, ReplayMode.AUDIT, AUDITOR)
    stream = Governance.id_for(f"job:{job_id}")
    version, topic, state = table.rows(stream)[-1]
    body = orjson.loads(
        verify_record(store_of(ledger).keyring, StoredEvent(stream, version, topic, state)).body
    )
    assert body.pop("lease") is not None and body["class_version"] == 2
    v1_body = canonical_json({**body, "class_version": 1})
    table.set_column(
        stream,
        version,
        "state",
        sign_record(store_of(ledger).keyring, stream, version, topic, v1_body),
    )

    [_, request], _ = replay_entries(ledger, job_id)
    assert (request["attempt"], request["lease"], request["result"]) == (2, None, ABANDONED)
    [unanswered] = ledger.governance.unanswered_replays()
    assert (unanswered.request.lease, unanswered.status) == (None, ABANDONED)


def test_concurrent_replay_requests_to_two_services_all_get_their_result(
    api: Api, settings: Settings
) -> None:
    """Two services on one store (as two `mace serve` processes), requests on many threads."""
    job_id = api.new_job()
    with Ledger.open(settings) as other, checked_client(settings, other) as client:
        services = [api, Api(client, other)]
        start = Barrier(CONCURRENT)
        answers: list[tuple[int, Any]] = []

        def replay(service: Api) -> None:
            start.wait()
            response = service.replay(job_id)
            answers.append((response.status_code, response.json()))

        workers = [Thread(target=replay, args=(services[n % 2],)) for n in range(CONCURRENT)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert {status for status, _ in answers} == {200}, answers
    attempts = sorted(body["attempt"] for _, body in answers)
    assert attempts == list(range(1, CONCURRENT + 1))
    events = api.governance(job_id)
    requests = [e for e in events if e["event"] == "REPLAY_REQUEST"]
    results = [e for e in events if e["event"] == "REPLAY_RESULT"]
    assert sorted(r["attempt"] for r in results) == attempts
    assert [r["result"] for r in requests] == ["recorded"] * CONCURRENT
