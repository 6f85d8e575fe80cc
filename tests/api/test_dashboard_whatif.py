"""The dashboard's what-if view, on SQLite and PostgreSQL: a recorded what-if shown as a diff
(first change: iteration, field, recorded and replayed; then each difference side by side), per
job for a batch; every value escaped; another tenant's record, and a batch over every tenant's
jobs, not found, as a free id is; a caller without a replay role refused."""

from __future__ import annotations

import html
import re

import pytest
from support.api_support import NEVER_MATH, Api, stored_router
from support.hand_written_runs import ANA

from domain.errors import NotFoundError
from domain.whatif import changes_of
from infrastructure.api.context import DASHBOARD
from infrastructure.application.whatif_batch import BatchSelection

HOSTILE = '4 * 5 </td><script>alert("x")</script><img src=x onerror=alert(1)>'
"""A job's input that ends up in the what-if's diff (the agents' prompts, BrainState's labels)."""
TAKES_SCRIPTS = "script"
"""A math rule that matches the hostile input, which was recorded routed to the fallback."""
HEADINGS = re.compile(r"<h3>(.*?)</h3>")
FIRST = re.compile(r'<p id="first-change">(.*?)</p>')
ROW = re.compile(r'<td data-label="Job">(.*?)</td>')


def page(api: Api, url: str, who: str = "auditor", status: int = 200) -> str:
    with api.unchecked() as client:
        response = client.get(url, headers={"Authorization": f"Bearer tok-acme-{who}"})
    assert response.status_code == status, response.text
    text: str = response.text
    return text


def unhtml(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def rule_line(rule_id: str) -> str:
    """The line of a router decision's readable JSON naming its rule, as the page escapes it."""
    return f"  &#34;rule_id&#34;: &#34;{rule_id}&#34;,"


def where(iteration: int | None) -> str:
    return "the job" if iteration is None else f"iteration {iteration}"


def test_a_one_job_whatif_is_its_first_change_then_the_rest_every_value_escaped(
    api: Api,
) -> None:
    job_id = api.new_job(HOSTILE, capture_mode="full_io")
    router = stored_router(api, TAKES_SCRIPTS)
    answer = api.post(
        "/v1/whatif", {"job_id": job_id, "changes": {"router": router}}, "auditor"
    ).json()
    differences = answer["differences"]
    assert answer["first_change"] == differences[0]
    text = page(api, f"{DASHBOARD}/whatif/{answer['record_id']}")
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;alert(" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert [unhtml(first) for first in FIRST.findall(text)] == [
        "REPLAY_DIVERGENCE at iteration 0, field router_decision"
    ]
    # Each later difference under its own heading, in order: iteration and field.
    assert [unhtml(h) for h in HEADINGS.findall(text)] == [
        f"{d['code']} at {where(d['iteration'])}, field {d['field']}" for d in differences[1:]
    ]
    # The first change side by side: the recorded rule's line beside the replayed one's.
    assert f'<tr class="changed"><td>{rule_line("R4")}</td><td>{rule_line("R1")}</td></tr>' in text
    assert "non-authoritative" in text


def test_a_batch_is_each_jobs_verdict_and_each_changed_jobs_first_change(api: Api) -> None:
    product = api.new_job("4 * 5")
    greeting = api.new_job("hello there")
    router = stored_router(api, NEVER_MATH)
    expected = [{"job_id": product, "field": "router_decision"}]
    body = {"changes": {"router": router}, "expected": expected}
    answer = api.post("/v1/whatif/batch", body, "auditor").json()
    text = page(api, f"{DASHBOARD}/whatif/{answer['record_id']}")
    assert "2 jobs: 1 unchanged, 1 changed (0 unexpected), 0 failed, 0 open" in unhtml(text)
    assert [unhtml(row) for row in ROW.findall(text)] == [product, greeting]
    assert [unhtml(h) for h in HEADINGS.findall(text)] == [
        f"job {product}: iteration 0, field router_decision (expected)"
    ]
    assert f'<tr class="changed"><td>{rule_line("R1")}</td><td>{rule_line("R4")}</td></tr>' in text


def test_another_tenants_record_and_a_store_wide_batch_are_not_found(api: Api) -> None:
    api.new_job("4 * 5")
    router = stored_router(api, NEVER_MATH)
    body = {"changes": {"router": router}}
    theirs = api.post("/v1/whatif/batch", body, "beta_admin_auditor").json()["record_id"]
    ours = api.post("/v1/whatif/batch", body, "auditor").json()["record_id"]
    everyone = api.ledger.whatif_batches.run(
        BatchSelection(), changes_of([("router", router)]), ANA
    ).record_id
    for record_id in (theirs, everyone):
        text = page(api, f"{DASHBOARD}/whatif/{record_id}", status=404)
        assert f"no what-if record {record_id}" in text
    # The store-wide batch is recorded under the default tenant, with other tenants' rows.
    with pytest.raises(NotFoundError):
        api.ledger.whatif.shown(everyone, ANA, tenant="default")
    page(api, f"{DASHBOARD}/whatif/{ours}", who="council", status=403)
