"""Job and run ids are scoped by tenant, on SQLite and PostgreSQL.

The attack: tenant beta probes ids by trying to record them. Before, opening a run or running a
job with an id tenant acme held answered 409 ("already exists"), which told beta the id existed.
Now ids are scoped by tenant in storage: another tenant's id behaves exactly as a free one (the
same status and body), the holder's data stays as it was, and each tenant reads only its own.
Replays, governance, whole-store verification and bundles of one id in two tenants stay apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, Response, assert_error, stage_event
from support.cli_output import event_count, json_lines, listed_jobs
from support.ledger_fixtures import run, store_of
from support.sample_job import job_ids

from domain.determinism import derive_id
from domain.errors import NotFoundError
from domain.events import RunStarted
from domain.governance import (
    Actor,
    Governance,
    GovernanceError,
    Motion,
    Vote,
    governance_scope_of_job,
)
from domain.job import Job, validate_job_id, validate_tenant
from domain.naming import tenant_and_key, tenant_scoped
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.bundles.export import export_bundle
from infrastructure.bundles.format import read_bundle
from infrastructure.bundles.importing import import_bundle
from infrastructure.bundles.replay import replay_bundle
from infrastructure.storage.settings import Settings

SHARED = "shared-id-1"
AUDITOR = Actor.of("aude", ["auditor"])
ADMIN = Actor.of("adam", ["admin"])
COUNCIL = Actor.of("cleo", ["council"])


def _without(body: dict[str, Any], job_id: str) -> bytes:
    """An answer with the id it names taken out, to compare the answers for two ids."""
    return orjson.dumps(body).replace(job_id.encode(), b"<id>")


def _acme_view(api: Api, job_id: str) -> list[bytes]:
    """Everything acme reads about its job (reflective log, events, governance)."""
    paths = (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events", f"/v1/jobs/{job_id}/governance")
    return [api.get(path, "operator").content for path in paths]


def test_scoped_names_never_meet_and_split_back() -> None:
    """The default tenant's name is the id itself; another tenant's holds a character no id or
    tenant may hold, so it is never a default-tenant id, and it splits back one way only."""
    assert tenant_scoped("default", "job-1") == "job-1"
    assert tenant_scoped("acme", "job-1") == "acme|job-1"
    for tenant, key in (("default", "a:b.c-d"), ("acme", "a:b"), ("a.b-c", "x|y")):
        assert tenant_and_key(tenant_scoped(tenant, key)) == (tenant, key)
    with pytest.raises(ValueError, match="invalid job id"):
        validate_job_id("acme|job-1")
    with pytest.raises(ValueError, match="invalid tenant"):
        validate_tenant("acme|x")
    assert Governance.open(governance_scope_of_job("acme|job-1")).scope == "job:acme|job-1"
    with pytest.raises(GovernanceError, match="invalid governance scope"):
        Governance.open("job:Acme|job-1")


# --- HTTP -----------------------------------------------------------------------------------------


def test_a_job_id_another_tenant_holds_runs_as_a_free_one_would(api: Api) -> None:
    held = api.post("/v1/jobs", {"input": "2 + 3", "seed": "s1", "job_id": SHARED}, "operator")
    assert held.status_code == 201
    assert api.replay(SHARED, who="admin_auditor").status_code == 200
    acme_before = _acme_view(api, SHARED)

    job = {"input": "2 * 3", "seed": "s2"}
    taken = api.post("/v1/jobs", {**job, "job_id": SHARED}, "beta_operator")
    free = api.post("/v1/jobs", {**job, "job_id": "free-id-1"}, "beta_operator")
    assert (taken.status_code, free.status_code) == (201, 201)
    assert _without(taken.json(), SHARED) == _without(free.json(), "free-id-1")
    assert taken.headers["content-type"] == free.headers["content-type"]

    # acme's job is as it was; each tenant reads its own job under the one id.
    assert _acme_view(api, SHARED) == acme_before
    assert api.get(f"/v1/jobs/{SHARED}", "operator").json()["input"] == "2 + 3"
    assert api.get(f"/v1/jobs/{SHARED}", "beta_operator").json()["input"] == "2 * 3"
    acme_jobs = api.get("/v1/jobs", "operator").json()["jobs"]
    beta_jobs = api.get("/v1/jobs", "beta_operator").json()["jobs"]
    assert [(j["job_id"], j["tenant"]) for j in acme_jobs] == [(SHARED, "acme")]
    assert [(j["job_id"], j["tenant"]) for j in beta_jobs] == [
        (SHARED, "beta"),
        ("free-id-1", "beta"),
    ]

    # Replays and governance of the one id stay apart: each tenant's attempts count from 1.
    beta_replay = api.replay(SHARED, who="beta_admin_auditor")
    assert (beta_replay.status_code, beta_replay.json()["attempt"]) == (200, 1)
    beta_log = api.governance(SHARED, "beta_operator")
    assert [e["actor_id"] for e in beta_log if e["event"] == "REPLAY_REQUEST"] == ["bea"]
    assert {e["job_id"] for e in beta_log if "job_id" in e} == {SHARED}
    assert {e["scope"] for e in beta_log if e["scope"].startswith("job:")} == {f"job:{SHARED}"}
    attempt = api.get(f"/v1/jobs/{SHARED}/replays/1", "beta_operator").json()
    assert (attempt["job_id"], attempt["replay_id"]) == (SHARED, f"{SHARED}#1")
    assert attempt["report"]["actor"]["actor_id"] == "bea"
    assert _acme_view(api, SHARED) == acme_before

    # The tenant's own id is still its own: naming it again is a conflict, and writes nothing.
    before = api.position()
    again = api.post("/v1/jobs", {**job, "job_id": SHARED}, "beta_operator")
    assert_error(again, 409, "CONFLICT", f"job {SHARED} already exists")
    assert api.position() == before


def _run_answers(api: Api, run_id: str) -> list[Response]:
    """Open the run, send a batch, read it, complete it: as beta, in that order."""
    start = {"type": "RunStarted", "seed": 7, "input": "say hello", "job_id": run_id}
    return [
        api.post("/v1/runs", start, "beta_operator"),
        api.send(run_id, [stage_event("e1")], "beta_operator"),
        api.get(f"/v1/runs/{run_id}", "beta_operator"),
        api.post(f"/v1/runs/{run_id}/complete", {"final_output": "hi"}, "beta_operator"),
    ]


def test_a_run_id_another_tenant_holds_opens_as_a_free_one_would(api: Api) -> None:
    # acme holds a completed job under one id and an open run under another.
    api.post("/v1/jobs", {"input": "2 + 3", "seed": "s1", "job_id": "held-job"}, "operator")
    acme_start = {"type": "RunStarted", "seed": 9, "input": "acme's run", "job_id": "held-run"}
    assert api.post("/v1/runs", acme_start, "operator").status_code == 201
    assert api.send("held-run", [stage_event("a1"), stage_event("a2")]).status_code == 200
    acme_before = [*_acme_view(api, "held-job"), api.get("/v1/runs/held-run").content]

    free = _run_answers(api, "free-run")
    for held in ("held-job", "held-run"):
        answers = _run_answers(api, held)
        assert (
            [r.status_code for r in answers]
            == [r.status_code for r in free]
            == [
                201,
                200,
                200,
                200,
            ]
        )
        for mine, other in zip(answers, free, strict=True):
            assert _without(mine.json(), held) == _without(other.json(), "free-run")

    assert [*_acme_view(api, "held-job"), api.get("/v1/runs/held-run").content] == acme_before
    assert api.get("/v1/runs/held-run").json() == {
        "run_id": "held-run",
        "status": "open",
        "events": 2,
    }
    assert api.get("/v1/runs/held-job", "beta_operator").json()["status"] == "completed"
    assert api.get("/v1/runs/held-job", "operator").status_code == 404


# --- the ledger ---------------------------------------------------------------------------------


def _same_id_in_three_tenants(ledger: Ledger) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id=SHARED)
    ledger.jobs.run("2 * 3", "s2", job_id=SHARED, tenant="acme")
    ledger.jobs.run("4 - 1", "s3", job_id=SHARED, tenant="beta")


def test_one_id_in_three_tenants_is_three_jobs_and_the_store_verifies(ledger: Ledger) -> None:
    _same_id_in_three_tenants(ledger)
    inputs = {t: ledger.jobs.get(SHARED, tenant=t).job_input for t in ("default", "acme", "beta")}
    assert inputs == {"default": "2 + 3", "acme": "2 * 3", "beta": "4 - 1"}
    # The default tenant's job lives where every job lived before tenants had their own ids.
    assert Job.id_in("default", SHARED) == Job.id_for(SHARED)
    assert len({Job.id_in(t, SHARED) for t in ("default", "acme", "beta")}) == 3
    assert [job_ids(ledger, t) for t in ("default", "acme", "beta", "gamma")] == [
        [SHARED],
        [SHARED],
        [SHARED],
        [],
    ]
    assert not ledger.jobs.exists(SHARED, tenant="gamma")
    outside = RunRecorder(
        ledger.run_uploads, RunStarted(seed=7, input="x", job_id=SHARED), tenant="gamma"
    )
    assert outside.complete("done").job_id == SHARED
    assert job_ids(ledger, "gamma") == [SHARED]
    with pytest.raises(NotFoundError):
        ledger.jobs.get(SHARED, tenant="delta")
    summary = store_of(ledger).verify_all()
    assert (summary.jobs, summary.sealed_jobs) == (4, 4)
    for tenant in ("default", "acme", "beta"):
        assert ledger.jobs.verify(SHARED, check_sequence=True, tenant=tenant).sealed


def test_a_job_recorded_piece_by_piece_is_its_tenants(ledger: Ledger) -> None:
    for tenant in ("acme", "default"):
        ledger.jobs.start(SHARED, f"seed-{tenant}", "in parts", {}, tenant=tenant)
        ledger.jobs.record_events(SHARED, [("StageTransition", {"to": tenant})], tenant=tenant)
        ledger.jobs.seal(SHARED, tenant=tenant)
    for tenant in ("acme", "default"):
        job = ledger.jobs.get(SHARED, tenant=tenant)
        assert (job.job_seed, job.facts[0].payload, job.sealed) == (
            f"seed-{tenant}",
            {"to": tenant},
            True,
        )
        assert ledger.jobs.verify(SHARED, tenant=tenant).events == 3
    assert [e["event_type"] for e in ledger.jobs.stream(SHARED, tenant="acme")] == [
        "JobStarted",
        "StageTransition",
        "JobSealed",
    ]
    assert store_of(ledger).verify_all().sealed_jobs == 2


def test_replays_and_governance_of_one_id_in_two_tenants_stay_apart(ledger: Ledger) -> None:
    _same_id_in_three_tenants(ledger)
    ledger.governance.request_force_continue(SHARED, "diverged", ADMIN, tenant="acme")
    ledger.governance.vote(SHARED, Motion.FORCE_CONTINUE, Vote.APPROVE, COUNCIL, tenant="acme")
    acme = ledger.replays.run(SHARED, ReplayMode.AUDIT, AUDITOR, tenant="acme")
    default = ledger.replays.run(SHARED, ReplayMode.AUDIT, AUDITOR)
    assert (acme.attempt, default.attempt) == (1, 1)
    assert acme.outcome.ok and default.outcome.ok

    acme_log = ledger.governance.log(SHARED, tenant="acme")
    default_log = ledger.governance.log(SHARED)
    assert [e["event"] for e in acme_log if e["scope"] == f"job:{SHARED}"] == [
        "GOVERNANCE_OPENED",
        "FORCE_CONTINUE_REQUEST",
        "COUNCIL_VOTE",
        "REPLAY_REQUEST",
        "REPLAY_RESULT",
    ]
    assert [e["event"] for e in default_log if e["scope"] == f"job:{SHARED}"] == [
        "REPLAY_REQUEST",  # the job's first replay request opened its record
        "REPLAY_RESULT",
    ]
    assert {e["job_id"] for e in acme_log + default_log if "job_id" in e} == {SHARED}
    # acme's approval is acme's: the default tenant's job of the same id has none.
    default_record = ledger.governance.record(governance_scope_of_job(SHARED))
    acme_record = ledger.governance.record(governance_scope_of_job(f"acme|{SHARED}"))
    assert default_record is not None and acme_record is not None
    assert acme_record.force_continue_allowed() and not default_record.force_continue_allowed()
    assert ledger.replays.record(SHARED, 1, tenant="acme").job_id == f"acme|{SHARED}"
    assert ledger.replays.record(SHARED, 1).job_id == SHARED
    with pytest.raises(NotFoundError):
        ledger.replays.record(SHARED, 1, tenant="beta")
    outcomes = ledger.read_models.rows("replay_outcomes")
    assert sorted((r["tenant"], r["job_id"], r["attempt"]) for r in outcomes) == [
        ("acme", SHARED, 1),
        ("default", SHARED, 1),
    ]


def test_a_non_default_tenants_bundle_round_trips(
    ledger: Ledger, settings: Settings, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _same_id_in_three_tenants(ledger)
    ledger.replays.run(SHARED, ReplayMode.AUDIT, AUDITOR, tenant="acme")
    data = export_bundle(ledger, SHARED, tenant="acme")
    manifest = orjson.loads(data)["manifest"]
    assert (manifest["job_id"], manifest["tenant"]) == (SHARED, "acme")
    assert f"job:acme|{SHARED}" in {s["name"] for s in manifest["streams"]}
    path = tmp_path / "acme.bundle.json"
    path.write_bytes(data)
    bundle = read_bundle(path, store_of(ledger).keyring)
    replayed = replay_bundle(bundle, ReplayMode.AUDIT, AUDITOR)
    assert replayed.report["ok"] is True

    if settings.store.startswith("sqlite"):
        other_url = f"sqlite:///{tmp_path}/other.db"
    else:
        other_url = request.getfixturevalue("make_postgres_database")()
    with Ledger.open(settings.model_copy(update={"store": other_url})) as other:
        other.jobs.run("9 - 9", "s9", job_id=SHARED)  # the default tenant's, already there
        summary = import_bundle(other, bundle)
        assert (summary.job_id, summary.tenant) == (SHARED, "acme")
        assert other.jobs.get(SHARED, tenant="acme").job_input == "2 * 3"
        assert other.jobs.get(SHARED).job_input == "9 - 9"
        assert job_ids(other, "acme") == [SHARED]
        assert other.replays.run(SHARED, ReplayMode.AUDIT, AUDITOR, tenant="acme").outcome.ok
        assert store_of(other).verify_all().jobs == 2


# --- the command line -----------------------------------------------------------------------------


def test_every_job_command_takes_the_tenant(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin,auditor")
    for tenant, text in (("default", "2 + 3"), ("acme", "2 * 3")):
        code, _, err = run(
            capsys, "run", text, "--seed", "s1", "--job-id", SHARED, "--tenant", tenant
        )
        assert code == 0, err

    code, out, _ = run(capsys, "events", SHARED, "--tenant", "acme", "--json")
    assert code == 0
    assert json_lines(out)[0]["payload"]["job_input"] == "2 * 3"
    code, out, _ = run(capsys, "events", SHARED, "--json")
    assert json_lines(out)[0]["payload"]["job_input"] == "2 + 3"
    code, out, _ = run(capsys, "verify", SHARED, "--tenant", "acme", "--check-sequence", "--json")
    assert (code, json_lines(out)[0]["ok"]) == (0, True)
    code, out, _ = run(capsys, "verify", "--all", "--json")
    assert (code, json_lines(out)[0]["jobs"]) == (0, 2)  # the same id, two tenants: two jobs
    code, out, _ = run(capsys, "replay", SHARED, "--tenant", "acme", "--json")
    assert (code, json_lines(out)[0]["ok"]) == (0, True)

    request = ("request", SHARED, "--tenant", "acme", "--action", "force_continue", "--reason", "r")
    code, _, err = run(capsys, "governance", *request)
    assert code == 0, err
    code, out, _ = run(capsys, "governance", "log", SHARED, "--tenant", "acme", "--json")
    assert [e["event"] for e in json_lines(out) if e["scope"] == f"job:{SHARED}"] == [
        "REPLAY_REQUEST",  # the job's first replay request opened its record
        "REPLAY_RESULT",
        "FORCE_CONTINUE_REQUEST",
    ]
    code, out, _ = run(capsys, "governance", "log", SHARED, "--json")
    assert json_lines(out) == []  # the default tenant's job has no governance yet

    run_file = tmp_path / "run.jsonl"
    lines = [
        {"type": "RunStarted", "seed": 7, "input": "outside", "job_id": SHARED},
        {"type": "RunCompleted", "final_output": "done"},
    ]
    run_file.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, _, err = run(capsys, "ingest", str(run_file), "--tenant", "beta")
    assert code == 0, err
    code, out, _ = run(capsys, "jobs", "--json")
    assert [(j["job_id"], j["tenant"]) for j in listed_jobs(out)] == [
        (SHARED, "default"),
        (SHARED, "acme"),
        (SHARED, "beta"),
    ]
    code, out, _ = run(capsys, "jobs", "--tenant", "acme")
    # Run with the default capture mode, prompts_only: kept, but not replayable in production.
    assert out.splitlines() == [
        f"{'JOB ID':<{len(SHARED)}}  STATUS  REPLAYABLE  TENANT",
        f"{SHARED}  sealed  no          acme",
        "    missing response of iteration 0 agent math_agent: capture mode prompts_only stores"
        " the hash of response only",
    ]

    bundle = tmp_path / "acme.bundle.json"
    code, out, _ = run(capsys, "export", SHARED, "--tenant", "acme", "-o", str(bundle), "--json")
    assert (code, json_lines(out)[0]["tenant"]) == (0, "acme")
    code, out, _ = run(capsys, "replay", "--bundle", str(bundle), "--tenant", "acme", "--json")
    assert (code, json_lines(out)[0]["ok"]) == (0, True)
    code, _, err = run(capsys, "export-test", SHARED, "--tenant", "acme", "-o", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / "test_replay_acme_shared_id_1.py").is_file()

    # A tenant that holds no such job answers as for any unknown job; a bad name is bad input.
    before = event_count(cli_env)
    code, _, err = run(capsys, "replay", SHARED, "--tenant", "gamma")
    assert (code, err) == (2, f"mace: NOT_FOUND: no job {SHARED}\n")
    vote = ("approve", SHARED, "--tenant", "Bad!", "--action", "force_continue")
    code, _, err = run(capsys, "governance", *vote)
    assert code == 2 and "invalid tenant 'Bad!'" in err
    code, _, err = run(capsys, "verify", "--all", "--tenant", "acme")
    assert code == 2 and "--tenant" in err
    assert event_count(cli_env) == before


# --- jobs recorded before ids were scoped by tenant ---------------------------------------------


def test_a_tenants_job_recorded_before_ids_were_scoped_stays_its_own(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every job lived under its id alone, whatever its tenant: acme's job stays acme's
    (readable, replayable, verified), and the default tenant, whose names those are, never
    reads it."""
    with monkeypatch.context() as before_scoping:
        before_scoping.setattr(Job, "name_of", classmethod(lambda cls, fields: fields["job_id"]))
        before_scoping.setattr(Job, "scoped_id", property(lambda job: job.job_id))
        api.ledger.jobs.run("2 + 3", "s1", job_id="legacy", tenant="acme")
    assert store_of(api.ledger).stream_exists(Job.id_for("legacy"))
    assert not store_of(api.ledger).stream_exists(Job.id_in("acme", "legacy"))

    assert api.ledger.jobs.name("legacy", "acme") == "legacy"
    assert api.ledger.jobs.name("legacy") is None
    assert (job_ids(api.ledger, "acme"), job_ids(api.ledger)) == (["legacy"], [])
    assert api.get("/v1/jobs/legacy", "operator").json()["input"] == "2 + 3"
    for other in ("default_operator", "beta_operator"):
        assert_error(api.get("/v1/jobs/legacy", other), 404, "NOT_FOUND", "no job legacy")
    replay = api.replay("legacy", who="admin_auditor")
    assert (replay.status_code, replay.json()["ok"]) == (200, True)
    assert api.get("/v1/jobs/legacy/replays/1", "operator").json()["job_id"] == "legacy"
    assert [(j["job_id"], j["tenant"]) for j in api.get("/v1/jobs").json()["jobs"]] == [
        ("legacy", "acme")
    ]
    assert api.get("/v1/jobs", "default_operator").json()["total"] == 0
    outcomes = api.ledger.read_models.rows("replay_outcomes")
    assert [(r["tenant"], r["job_id"]) for r in outcomes] == [("acme", "legacy")]
    assert store_of(api.ledger).verify_all().sealed_jobs == 1
    with pytest.raises(NotFoundError):
        api.ledger.jobs.get("legacy")


def test_a_derived_id_never_lands_on_another_tenants_unscoped_job(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme's job from before ids were scoped has the id the default tenant's first such job
    would derive: the default tenant counts on (its stream names are the ids alone)."""
    first = derive_id("s1", "job", "2 + 3", 0)
    with monkeypatch.context() as before_scoping:
        before_scoping.setattr(Job, "name_of", classmethod(lambda cls, fields: fields["job_id"]))
        before_scoping.setattr(Job, "scoped_id", property(lambda job: job.job_id))
        ledger.jobs.run("2 + 3", "s1", job_id=first, tenant="acme")
    mine = ledger.jobs.run("2 + 3", "s1")
    assert mine.job_id == derive_id("s1", "job", "2 + 3", 1)
    assert ledger.jobs.run("2 + 3", "s1", tenant="beta").job_id == first  # scoped: no clash
