"""``POST /v1/whatif`` on SQLite and PostgreSQL: a caller's job re-run under another router
answers what ``mace replay JOB --with ... --json`` prints (the document describes it); bad changes,
another tenant's job and a caller without a replay role are refused and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from support.api_support import NEVER_MATH, Api, assert_error, stored_router
from support.hand_written_runs import R1

FREE = "0123456789abcdef-1"


def test_a_route_changed_by_new_router_rules_is_answered_first_then_the_rest(api: Api) -> None:
    job_id = api.new_job()
    router = stored_router(api, NEVER_MATH)
    before = api.position()
    response = api.post("/v1/whatif", {"job_id": job_id, "changes": {"router": router}}, "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["verdict"], answer["authoritative"], answer["tenant"]) == (
        "changed",
        False,
        "acme",
    )
    assert answer["changes"] == {"router": router}
    first = answer["first_change"]
    assert (first["iteration"], first["field"], first["recorded"]) == (0, "router_decision", R1)
    assert first["replayed"]["agent"] == "generic_agent"
    assert len(answer["differences"]) > 1
    assert api.position() > before  # the what-if's record
    record = api.ledger.whatif.get(answer["record_id"], tenant="acme")
    assert record.report == {k: v for k, v in answer.items() if k != "record_id"}


def test_a_missing_snapshot_is_recorded_and_answered_with_its_code(api: Api) -> None:
    job_id = api.new_job()
    before = api.position()
    response = api.post(
        "/v1/whatif", {"job_id": job_id, "changes": {"router": "ab" * 32}}, "auditor"
    )
    assert response.status_code == 200, response.text
    assert api.position() > before  # recorded all the same
    answer = response.json()
    assert (answer["verdict"], answer["error"]["code"]) == ("failed", "MISSING_SNAPSHOT")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({}, None),
        ({"router": None}, None),
        ({"model": "ab" * 32}, "body.changes.model"),
        ({"router": "xyz"}, "body.changes.router"),
    ],
)
def test_bad_changes_are_refused_and_nothing_is_written(
    api: Api, changes: dict[str, Any], field: str | None
) -> None:
    job_id = api.new_job()
    before = api.position()
    response = api.post("/v1/whatif", {"job_id": job_id, "changes": changes}, "auditor")
    assert_error(response, 422, "INVALID_INPUT", field=field)
    assert api.position() == before


def test_another_tenants_job_and_a_caller_without_a_replay_role_write_nothing(api: Api) -> None:
    theirs = api.new_job(seed="b1", who="beta_operator")  # another seed: another id
    ours = api.new_job()
    router = stored_router(api, NEVER_MATH)
    before = api.position()
    response = api.post("/v1/whatif", {"job_id": theirs, "changes": {"router": router}}, "auditor")
    assert_error(response, 404, "NOT_FOUND")
    response = api.post("/v1/whatif", {"job_id": ours, "changes": {"router": router}}, "council")
    assert_error(response, 403, "ACCESS_DENIED")
    assert api.position() == before


def batch_ask(router: str, **selection: Any) -> dict[str, Any]:
    return {"changes": {"router": router}, **selection}


def test_a_batch_over_the_callers_jobs_is_answered_recorded_once_and_read_back(api: Api) -> None:
    product = api.new_job("4 * 5")
    greeting = api.new_job("hello there")
    api.new_job("4 * 5", seed="b1", who="beta_operator")  # another tenant's: never selected
    router = stored_router(api, NEVER_MATH)
    before = api.position()
    response = api.post("/v1/whatif/batch", batch_ask(router), "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["kind"], answer["verdict"], answer["authoritative"]) == (
        "whatif_batch",
        "changed",
        False,
    )
    assert answer["totals"] == {
        "jobs": 2,
        "unchanged": 1,
        "changed": 1,
        "unexpected": 1,
        "failed": 0,
        "open": 0,
    }
    assert answer["selection"] == {"tenant": "acme", "since": 0, "until": before, "jobs": None}
    rows = {row["job_id"]: row for row in answer["jobs"]}
    assert list(rows) == [product, greeting]
    assert {row["tenant"] for row in answer["jobs"]} == {"acme"}
    first = rows[product]["first_change"]
    assert (first["iteration"], first["field"], first["recorded"]) == (0, "router_decision", R1)
    assert rows[greeting]["verdict"] == "unchanged"
    assert api.position() == before + 1  # one record for the batch

    read = api.get(f"/v1/whatif/{answer['record_id']}", "auditor")
    assert read.status_code == 200, read.text
    record = read.json()
    assert (record["record_id"], record["kind"], record["authoritative"]) == (
        answer["record_id"],
        "whatif_batch",
        False,
    )
    assert (record["actor_id"], record["tenant"], record["outcome"]) == ("aude", "acme", "changed")
    assert record["report"] == {k: v for k, v in answer.items() if k != "record_id"}
    assert record["parameters"]["changes"] == {"router": router}
    # Another tenant's record is not found, as a free id is; reading needs a replay role.
    for record_id, who in ((answer["record_id"], "beta_admin_auditor"), (FREE, "auditor")):
        missing = api.get(f"/v1/whatif/{record_id}", who)
        assert_error(missing, 404, "NOT_FOUND", f"no what-if record {record_id}")
    assert_error(api.get(f"/v1/whatif/{answer['record_id']}", "council"), 403, "ACCESS_DENIED")


def test_a_one_job_whatif_is_read_back_by_its_record_id(api: Api) -> None:
    job_id = api.new_job()
    router = stored_router(api, NEVER_MATH)
    answer = api.post(
        "/v1/whatif", {"job_id": job_id, "changes": {"router": router}}, "auditor"
    ).json()
    read = api.get(f"/v1/whatif/{answer['record_id']}", "admin_auditor")
    assert read.status_code == 200, read.text
    record = read.json()
    assert (record["kind"], record["parameters"]["job_id"]) == ("whatif", job_id)
    assert record["report"] == {k: v for k, v in answer.items() if k != "record_id"}


def test_a_batch_by_job_list_with_expected_changes_passes_and_another_tenants_job_fails(
    api: Api,
) -> None:
    product = api.new_job("4 * 5")
    theirs = api.new_job("4 * 5", seed="b1", who="beta_operator")
    router = stored_router(api, NEVER_MATH)
    expected = [{"job_id": product, "field": "router_decision"}]
    answer = api.post(
        "/v1/whatif/batch", batch_ask(router, jobs=[product], expected=expected), "auditor"
    ).json()
    assert (answer["verdict"], answer["totals"]["unexpected"]) == ("expected", 0)
    assert answer["expected"] == expected
    answer = api.post("/v1/whatif/batch", batch_ask(router, jobs=[theirs]), "auditor").json()
    assert answer["verdict"] == "failed"
    assert answer["jobs"][0]["error"]["code"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"since": 5, "until": 5}, "body"),
        ({"since": -1}, "body.since"),
        ({"jobs": []}, "body.jobs"),
        ({"jobs": ["a", "a"]}, "body"),
        ({"jobs": ["bad id!"]}, "body.jobs.0"),
        ({"jobs": ["a"], "since": 3}, "body"),
        ({"expected": [{"job_id": "a"}]}, "body.expected.0.field"),
        ({"tenant": "beta"}, "body.tenant"),
    ],
)
def test_a_bad_batch_body_is_one_line_and_writes_nothing(
    api: Api, extra: dict[str, Any], field: str
) -> None:
    api.new_job()
    router = stored_router(api, NEVER_MATH)
    before = api.position()
    response = api.post("/v1/whatif/batch", batch_ask(router, **extra), "auditor")
    assert_error(response, 422, "INVALID_INPUT", field=field)
    assert api.position() == before


def test_a_batch_needs_a_replay_role_and_writes_nothing_without_it(api: Api) -> None:
    api.new_job()
    router = stored_router(api, NEVER_MATH)
    before = api.position()
    response = api.post("/v1/whatif/batch", batch_ask(router), "council")
    assert_error(response, 403, "ACCESS_DENIED")
    assert api.position() == before
