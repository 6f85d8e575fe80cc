"""The dashboard's job search, on SQLite and PostgreSQL: filters and pages in the URL, answered
from the store's tables a page at a time; a bad filter is one line on the page and a 400."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import pytest
from support.api_support import Api, auth

from domain.job import CaptureMode
from projections.redaction import PII_MARK

ROW = re.compile(r'<tr><td><a class="id" href="/dashboard/jobs/([^"/]+)">')
NEXT = re.compile(r'<a id="next-page" href="(/dashboard/jobs\?[^"]+)">')
PROBLEM = re.compile(r'<p id="problem" class="problem">([^<]*)</p>')
WRONG = {"math_agent": {"text": "2 + 3 = 6"}}
FULL = CaptureMode.FULL_IO


def page(api: Api, url: str, status: int = 200) -> str:
    with api.unchecked() as client:
        response = client.get(url, headers={"Authorization": "Bearer tok-acme-operator"})
    assert response.status_code == status, response.text
    text: str = response.text
    return text


def listed(text: str) -> list[str]:
    return ROW.findall(text)


def every_page(api: Api, url: str) -> list[list[str]]:
    pages = []
    while True:
        text = page(api, url)
        pages.append(listed(text))
        found = NEXT.search(text)
        if found is None:
            return pages
        url = html.unescape(found.group(1))


@pytest.fixture
def jobs(api: Api) -> list[str]:
    """120 jobs of tenant acme in the order recorded, one not replayable, one replayed and
    diverged; and one job of tenant beta."""
    ids = [f"job-{n:03d}" for n in range(118)]
    for n, job_id in enumerate(ids):
        api.ledger.jobs.run("2 + 3", f"s{n}", job_id=job_id, tenant="acme", capture_mode=FULL)
    api.ledger.jobs.run(
        "2 + 3", "p", job_id="other-gap", tenant="acme", capture_mode=CaptureMode.PROMPTS_ONLY
    )
    api.ledger.jobs.run("2 + 3", "q", job_id="other-ok", tenant="acme", capture_mode=FULL)
    api.ledger.jobs.run("2 + 3", "b", job_id="job-beta", tenant="beta")
    diverged = api.replay("job-003", mode="reexecute", mocks=WRONG)
    assert diverged.json()["error"]["code"] == "REPLAY_DIVERGENCE"
    return [*ids, "other-gap", "other-ok"]


def test_the_job_list_is_paged_by_log_position_and_holds_only_the_tenants_jobs(
    api: Api, jobs: list[str]
) -> None:
    pages = every_page(api, "/dashboard/jobs")
    assert [len(p) for p in pages] == [50, 50, 20]
    assert [job for p in pages for job in p] == jobs  # the order recorded, none twice
    assert "job-beta" not in page(api, "/dashboard/jobs?job=job-b")
    # The search form keeps the page size and the filters it was given.
    form = page(api, "/dashboard/jobs?size=7&job=job-00")
    assert '<input type="hidden" name="size" value="7">' in form
    assert 'name="job" value="job-00"' in form
    small = every_page(api, "/dashboard/jobs?size=7&job=job-00")
    assert small == [[f"job-00{n}" for n in range(7)], ["job-007", "job-008", "job-009"]]


def test_each_filter_is_answered_from_the_store(api: Api, jobs: list[str]) -> None:
    assert listed(page(api, "/dashboard/jobs?job=other")) == ["other-gap", "other-ok"]
    assert listed(page(api, "/dashboard/jobs?replayable=no")) == ["other-gap"]
    assert listed(page(api, "/dashboard/jobs?replayable=open")) == []
    assert listed(page(api, "/dashboard/jobs?status=open")) == []
    assert listed(page(api, "/dashboard/jobs?error=REPLAY_DIVERGENCE")) == ["job-003"]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert listed(page(api, f"/dashboard/jobs?from={today}&to={today}")) == ["job-003"]
    assert listed(page(api, "/dashboard/jobs?to=2000-01-01")) == []
    text = page(api, "/dashboard/jobs?error=REPLAY_DIVERGENCE")
    assert '<code class="code">REPLAY_DIVERGENCE</code>' in text
    assert '<a href="/dashboard/jobs/job-003/replays/1">#1</a>' in text


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("status=done", "status: 'done' is not one of open, completed, sealed, abandoned"),
        ("size=500", "size: '500' is not a whole number from 1 to 200"),
        ("after=-1", "after: '-1' is not a whole number from 0 to 9223372036854775807"),
        ("replayable=maybe", "replayable: 'maybe' is not one of yes, no, open"),
        (
            "from=yesterday",
            "from: 'yesterday' is not a UTC date or time (expected YYYY-MM-DD or"
            " YYYY-MM-DDTHH:MM[:SS]Z)",
        ),
        (
            "job=%3Cscript%3E",
            "job: '<script>' is not the start of a job id (expected up to 128 letters, digits,"
            " '.', '_', ':' or '-')",
        ),
        ("tenant=beta", "unknown parameter 'tenant': expected one of job, status, replayable,"
         " error, from, to, after, size"),
    ],
)  # fmt: skip
def test_a_bad_filter_is_one_line_on_the_page_and_a_400(
    api: Api, jobs: list[str], query: str, problem: str
) -> None:
    before = api.position()
    text = page(api, f"/dashboard/jobs?{query}", 400)
    assert [html.unescape(p) for p in PROBLEM.findall(text)] == [problem]
    assert listed(text) == []
    assert "<script>" not in text
    assert api.position() == before


def test_a_job_page_marks_personal_data_as_the_api_does_for_a_non_admin(api: Api) -> None:
    """A job that tried to remember a password: the operator's page holds the API's marks, laid
    out, never the refusal mark or the secret; and no line of raw JSON payload."""
    job_id = api.new_job("remember my password is hunter2")
    with api.unchecked() as client:
        shown = client.get(f"/dashboard/jobs/{job_id}", headers=auth("operator")).text
    events = api.get(f"/v1/jobs/{job_id}/events").json()["events"]
    assert "hunter2" not in shown and "[refused:" not in shown
    assert PII_MARK in html.unescape(shown)
    assert shown.count('<td data-label="Payload" class="payload"><dl class="payload">') == len(
        events
    )
    assert '{"' not in html.unescape(shown)  # no payload written as one line of JSON


def test_the_audits_and_governance_pages_show_only_the_tenants_own(api: Api) -> None:
    ours = api.new_job("2 + 3", "ours", capture_mode="full_io")
    theirs = api.new_job("2 + 3", "theirs", who="beta_operator", capture_mode="full_io")
    assert api.replay(ours).status_code == 200
    assert api.replay(theirs, who="beta_admin_auditor").status_code == 200
    assert api.post("/v1/audits", {}, "beta_admin_auditor").status_code == 200
    with api.unchecked() as client:
        acme = client.get("/dashboard/governance", headers=auth("operator")).text
        beta = client.get("/dashboard/governance", headers=auth("beta_operator")).text
        acme_audits = client.get("/dashboard/audits", headers=auth("operator")).text
        beta_audits = client.get("/dashboard/audits", headers=auth("beta_operator")).text
    assert f"job:{ours}" in acme and f"job:{theirs}" not in acme
    assert f"job:{theirs}" in beta and f"job:{ours}" not in beta
    assert "Audits of tenant acme (0)" in acme_audits
    assert "Audits of tenant beta (1)" in beta_audits and "bea (admin, auditor)" in beta_audits
