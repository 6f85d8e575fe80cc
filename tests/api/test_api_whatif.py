"""``POST /v1/whatif`` on SQLite and PostgreSQL: a caller's job re-run under another router
answers what ``mace replay JOB --with ... --json`` prints (the document describes it); bad changes,
another tenant's job and a caller without a replay role are refused and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
from support.api_support import Api, assert_error
from support.hand_written_runs import R1

from domain.snapshot import Snapshot, SnapshotKind
from infrastructure.application.snapshots import default_snapshots

NEVER_MATH = r"^never$"


def stored_router(api: Api, math_pattern: str) -> str:
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": math_pattern} if rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    snapshot, _ = api.ledger.snapshots.put(Snapshot.declare("router", {"rules": rules}))
    return snapshot.snapshot_id


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
