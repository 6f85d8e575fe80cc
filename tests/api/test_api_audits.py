"""``POST /v1/audits`` on SQLite and PostgreSQL: `mace audit` for the caller's tenant only, one
signed record written; a caller who may not replay gets 403 and nothing is written."""

from __future__ import annotations

from support.api_support import Api, assert_error
from support.ledger_fixtures import RawTable

from domain.job import Job
from domain.naming import tenant_scoped
from infrastructure.storage.settings import Settings


def record_job(api: Api, who: str, seed: str) -> str:
    response = api.post("/v1/jobs", {"input": "2 + 3", "seed": seed}, who)
    assert response.status_code == 201, response.text
    job_id = response.json()["job_id"]
    assert isinstance(job_id, str)
    return job_id


def test_an_auditor_audits_the_jobs_of_its_own_tenant_and_one_record_is_written(api: Api) -> None:
    ours = [record_job(api, "operator", f"s{n}") for n in range(2)]
    theirs = record_job(api, "beta_operator", "b0")  # another seed: another id
    before = api.position()

    response = api.post("/v1/audits", {}, "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["ok"] is True
    assert answer["tenant"] == "acme"
    assert (answer["totals"]["jobs"], answer["totals"]["ok"]) == (2, 2)
    audited = sorted(job["job"] for job in answer["jobs"])
    assert all(any(name.endswith(job_id) for name in audited) for job_id in ours)
    assert not any(name.endswith(theirs) for name in audited)
    assert answer["audit_id"]
    assert api.position() > before  # the audit record

    # A later window holds none of the jobs recorded before it.
    later = api.post("/v1/audits", {"since": api.position()}, "auditor").json()
    assert later["totals"]["jobs"] == 0


def test_a_caller_who_may_not_replay_is_refused_and_nothing_is_written(api: Api) -> None:
    record_job(api, "operator", "s1")
    before = api.position()
    response = api.post("/v1/audits", {}, "council")
    assert_error(response, 403, "ACCESS_DENIED")
    assert api.position() == before


def test_a_bad_window_is_refused_with_its_field(api: Api) -> None:
    before = api.position()
    for body in ({"since": -1}, {"since": "3"}, {"tenant": "beta"}):
        response = api.post("/v1/audits", body, "auditor")
        assert response.status_code == 422, body
    assert api.position() == before


def test_another_tenants_damaged_job_is_counted_never_named(api: Api, settings: Settings) -> None:
    record_job(api, "operator", "s1")
    theirs = record_job(api, "beta_operator", "b1")
    table = RawTable(settings)
    stream = Job.id_for(tenant_scoped("beta", theirs))
    table.set_column(stream, 2, "state", table.state(stream, 2)[:-2] + b"x}")

    answer = api.post("/v1/audits", {}, "auditor").json()
    assert answer["ok"] is False
    assert (answer["totals"]["jobs"], answer["totals"]["stream_failures"]) == (1, 1)
    text = str(answer)
    assert theirs not in text and "beta" not in text and str(stream) not in text
