"""``POST /v1/whatif`` with ``as_of`` (and ``compare_to``) on SQLite and PostgreSQL: a caller's
job served memory as of a log position answers what ``mace replay JOB --as-of N --json`` prints
(the document describes it), recorded; bad points, ``compare_to`` alone and ``as_of`` with
changes are one line, 422, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.api_support import Api, assert_error, churned_launch


def test_as_of_a_log_position_is_answered_and_recorded(api: Api) -> None:
    job_id = api.new_job()
    at = api.position()
    body = {"job_id": job_id, "as_of": f"position:{at}", "compare_to": f"position:{at}"}
    response = api.post("/v1/whatif", body, "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["kind"], answer["verdict"], answer["authoritative"]) == (
        "compare",
        "unchanged",  # the same point twice: nothing drifts
        False,
    )
    assert answer["as_of"]["log_position"] == answer["compare_to"]["log_position"] == at
    assert answer["policy_drift"]["differences"] == []
    assert api.position() > at  # the compare's record
    record = api.ledger.whatif.get(answer["record_id"], tenant="acme")
    assert (record.kind, record.authoritative) == ("compare", False)
    assert record.report == {k: v for k, v in answer.items() if k != "record_id"}


def test_a_compare_answers_the_hits_added_and_removed_between_two_points(
    api: Api, tmp_path: Path
) -> None:
    churned = churned_launch(api, tmp_path)
    body_asked = {
        "job_id": "launch",
        "as_of": f"position:{churned.recorded}",
        "compare_to": f"position:{api.position()}",
    }
    response = api.post("/v1/whatif", body_asked, "auditor")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["kind"], answer["verdict"]) == ("compare", "changed")
    (drift,) = answer["data_drift"]
    assert [h["uri"] for h in drift["hits"]["added"]] == [churned.added]
    assert [h["uri"] for h in drift["hits"]["removed"]] == [churned.forgotten]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"as_of": "checkpoint:999"}, "as_of checkpoint 999: no such checkpoint"),
        ({"as_of": "position:999999"}, "as_of log position 999999: beyond the log"),
        ({"as_of": "soon"}, "as_of 'soon': expected N or checkpoint:N"),
        ({"compare_to": "1"}, "compare_to needs as_of"),
        ({"as_of": "1", "changes": {"router": "ab" * 32}}, "as_of serves memory under"),
        ({}, "changes: name at least one change, or ask as_of a point of the log"),
    ],
)
def test_bad_points_are_refused_and_nothing_is_written(
    api: Api, extra: dict[str, Any], message: str
) -> None:
    job_id = api.new_job()
    before = api.position()
    response = api.post("/v1/whatif", {"job_id": job_id, **extra}, "auditor")
    assert message in assert_error(response, 422, "INVALID_INPUT")
    assert api.position() == before
