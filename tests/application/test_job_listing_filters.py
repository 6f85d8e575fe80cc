"""The job listing (`mace jobs`, ``GET /v1/jobs``) takes the dashboard's job search filters,
parsed by `parse_job_query`, applied to the job index before the page is cut; for one tenant or,
as an admin's ``mace jobs`` lists them, for every tenant. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from domain.errors import InvalidInput
from domain.governance import Actor
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from projections.job_search import parse_job_query

AUDITOR = Actor.of("ana", ["admin", "auditor"])


def listed(ledger: Ledger, tenant: str | None, **given: str) -> list[str]:
    query = parse_job_query(tenant, given)
    return [job["job_id"] for job in ledger.read_models.jobs(query)["jobs"]]


@pytest.fixture
def recorded(ledger: Ledger) -> str:
    """calc-1 (replayable) and calc-2 (kept nothing, replayed: refused) of acme, other-1 of
    beta; the code calc-2's replay failed with."""
    full, none = CaptureMode.FULL_IO, CaptureMode.NONE
    ledger.jobs.run("2 + 3", "s1", job_id="calc-1", tenant="acme", capture_mode=full)
    ledger.jobs.run("2 + 3", "s2", job_id="calc-2", tenant="acme", capture_mode=none)
    ledger.jobs.run("2 + 3", "s3", job_id="other-1", tenant="beta", capture_mode=full)
    result = ledger.replays.run("calc-2", ReplayMode.PRODUCTION, AUDITOR, tenant="acme")
    code = result.report["error_code"] if result.report else None
    assert isinstance(code, str), result
    return code


def test_each_filter_narrows_the_tenants_jobs(ledger: Ledger, recorded: str) -> None:
    assert listed(ledger, "acme") == ["calc-1", "calc-2"]
    assert listed(ledger, "acme", job="calc-2") == ["calc-2"]
    assert listed(ledger, "acme", job="other") == []
    assert listed(ledger, "acme", replayable="no") == ["calc-2"]
    assert listed(ledger, "acme", replayable="yes") == ["calc-1"]
    assert listed(ledger, "acme", replayable="open") == []
    assert listed(ledger, "acme", status="sealed") == ["calc-1", "calc-2"]
    assert listed(ledger, "acme", status="open") == []
    assert listed(ledger, "acme", error=recorded) == ["calc-2"]
    assert listed(ledger, "acme", error="REPLAY_DIVERGENCE") == []
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert listed(ledger, "acme", **{"from": today, "to": today}) == ["calc-2"]
    assert listed(ledger, "acme", to="2000-01-01") == []


def test_every_tenants_jobs_are_filtered_alike(ledger: Ledger, recorded: str) -> None:
    """An admin's listing of every tenant (tenant None) takes the same filters."""
    assert listed(ledger, None) == ["calc-1", "calc-2", "other-1"]
    assert listed(ledger, None, replayable="yes") == ["calc-1", "other-1"]
    assert listed(ledger, None, job="other") == ["other-1"]
    assert listed(ledger, None, error=recorded) == ["calc-2"]


def test_the_filter_comes_before_the_page(ledger: Ledger, recorded: str) -> None:
    page = ledger.read_models.jobs(parse_job_query(None, {"replayable": "yes"}), limit=1)
    assert [job["job_id"] for job in page["jobs"]] == ["calc-1"]
    assert page["total"] == 2  # how many the filter kept, not how many are stored
    second = ledger.read_models.jobs(parse_job_query(None, {"replayable": "yes"}), offset=1)
    assert [job["job_id"] for job in second["jobs"]] == ["other-1"]
    # --non-replayable (not yes: no or open) and a filter both hold.
    narrowed = ledger.read_models.jobs(
        parse_job_query("acme", {"job": "calc"}), non_replayable=True
    )
    assert [job["job_id"] for job in narrowed["jobs"]] == ["calc-2"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"status": "done"}, "status: 'done' is not one of open, completed, sealed, abandoned"),
        ({"replayable": "maybe"}, "replayable: 'maybe' is not one of yes, no, open"),
        ({"error": "NOPE"}, "error: 'NOPE' is not one of"),
        ({"from": "yesterday"}, "from: 'yesterday' is not a UTC date or time"),
    ],
)
def test_a_bad_filter_is_refused_before_anything_is_read(
    given: dict[str, str], message: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_job_query(None, given)
    assert str(refused.value).startswith(message)
