"""``POST /v1/jobs/{id}/fork`` on SQLite and PostgreSQL: a caller's job forked from an iteration
answers what ``mace fork JOB --at N --json`` prints and records a new job in the caller's
tenant; the same fork again, a policy change, another tenant's job and a caller without a replay
role are refused, and nothing is written."""

from __future__ import annotations

from support.api_support import Api, assert_error

from domain.job import Job


def test_a_fork_is_answered_and_recorded_in_the_callers_tenant(api: Api) -> None:
    job_id = api.new_job()
    body = {"at": 0, "input": "4 * 5"}
    response = api.post(f"/v1/jobs/{job_id}/fork", body, "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["kind"], answer["verdict"], answer["authoritative"]) == (
        "fork",
        "changed",
        False,
    )
    assert answer["forked_from"]["job_id"] == job_id
    assert answer["forked_from"]["input"] == "4 * 5"
    fork: Job = api.ledger.jobs.get(answer["fork_job_id"], tenant="acme")
    assert fork.job_input == "4 * 5"
    record = api.ledger.whatif.get(answer["record_id"], tenant="acme")
    assert record.report == {k: v for k, v in answer.items() if k != "record_id"}

    before = api.position()
    response = api.post(f"/v1/jobs/{job_id}/fork", body, "auditor")
    assert_error(response, 409, "CONFLICT")
    response = api.post(
        f"/v1/jobs/{job_id}/fork", {"at": 0, "changes": {"policy": "ab" * 32}}, "auditor"
    )
    assert_error(response, 422, "FORK_NOT_REDECIDABLE")
    response = api.post(f"/v1/jobs/{job_id}/fork", {"at": -1}, "auditor")
    assert_error(response, 422, "INVALID_INPUT", field="body.at")
    assert api.position() == before


def test_another_tenants_job_and_a_caller_without_a_replay_role_write_nothing(api: Api) -> None:
    theirs = api.new_job(seed="b1", who="beta_operator")
    ours = api.new_job()
    before = api.position()
    response = api.post(f"/v1/jobs/{theirs}/fork", {"at": 0, "input": "1 + 1"}, "auditor")
    assert_error(response, 404, "NOT_FOUND")
    response = api.post(f"/v1/jobs/{ours}/fork", {"at": 0, "input": "1 + 1"}, "council")
    assert_error(response, 403, "ACCESS_DENIED")
    assert api.position() == before
