"""Every recorded fact has a stable address (issue 17 point 8), on SQLite and PostgreSQL:
``mace events`` prints it beside each fact, and ``mace events URI`` resolves one."""

from __future__ import annotations

import orjson
import pytest
from support.api_support import Api
from support.cli_output import assert_failure_line, json_lines
from support.ledger_fixtures import run

from domain.evidence_uri import event_uri, parse_evidence_uri, report_uri
from infrastructure.storage.settings import Settings


def test_an_address_reads_back_as_what_it_names() -> None:
    event = parse_evidence_uri("mace://acme/job/job-1.a:b/event/12")
    assert (event.tenant, event.job_id, event.kind, event.number) == (
        "acme",
        "job-1.a:b",
        "event",
        12,
    )
    assert event_uri("acme", "job-1.a:b", 12) == "mace://acme/job/job-1.a:b/event/12"
    report = parse_evidence_uri(report_uri("default", "j1", 3))
    assert (report.kind, report.number) == ("report", 3)


@pytest.mark.parametrize(
    "text",
    [
        "mace://acme/job/j1/event/01",
        "mace://acme/job/j1/event/-1",
        "mace://acme/job/j1/replay/0/report",
        "mace://ACME/job/j1/event/1",
        "mace://acme/job/j 1/event/1",
        "mace://acme/jobs/j1/event/1",
        "mace://acme/job/j1/event/1/",
        "http://acme/job/j1/event/1",
    ],
)
def test_a_malformed_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"invalid (evidence URI|tenant|job id)"):
        parse_evidence_uri(text)


def test_mace_events_prints_each_facts_address_and_resolves_one(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "run", "what is 2 + 3?", "--seed", "s1", "--job-id", "j1")
    assert code == 0
    code, out, _ = run(capsys, "events", "j1", "--json")
    entries = json_lines(out)
    facts = [e for e in entries if e["sequence_index"] is not None]
    assert [e["uri"] for e in facts] == [
        f"mace://default/job/j1/event/{e['sequence_index']}" for e in facts
    ]
    assert {e["event_type"] for e in entries if e["uri"] is None} == {"JobStarted", "JobSealed"}

    code, out, err = run(capsys, "events", facts[2]["uri"], "--json")
    assert (code, err) == (0, "")
    assert json_lines(out) == [facts[2]]
    code, out, _ = run(capsys, "events", facts[2]["uri"])
    assert out.endswith(f"  {facts[2]['uri']}\n") and out.count("\n") == 1

    code, out, err = run(capsys, "events", "mace://default/job/j1/event/999")
    assert (code, out) == (2, "")
    assert_failure_line(
        err, "NOT_FOUND", "no event at mace://default/job/j1/event/999: job j1 records no such fact"
    )
    code, out, err = run(capsys, "events", "mace://default/job/j1/replay/1/report")
    assert (code, out) == (2, "")
    assert_failure_line(
        err, "NOT_FOUND", "no replay report at mace://default/job/j1/replay/1/report"
    )
    code, out, err = run(capsys, "events", "mace://default/job/j1/event/x")
    assert (code, out) == (2, "")
    assert_failure_line(err, "INVALID_INPUT")


def test_an_address_names_its_tenant(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    code, *_ = run(
        capsys, "run", "what is 2 + 3?", "--seed", "s1", "--job-id", "j1", "--tenant", "acme"
    )
    assert code == 0
    code, out, _ = run(capsys, "events", "j1", "--tenant", "acme", "--json")
    first = next(e for e in json_lines(out) if e["sequence_index"] == 0)
    assert first["uri"] == "mace://acme/job/j1/event/0"

    code, out, err = run(capsys, "events", first["uri"], "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out) == first
    # The default tenant holds no job j1: its address names nothing.
    code, _, err = run(capsys, "events", "mace://default/job/j1/event/0")
    assert code == 2
    assert_failure_line(err, "NOT_FOUND")
    code, _, err = run(capsys, "events", first["uri"], "--tenant", "beta")
    assert code == 2
    assert_failure_line(err, "INVALID_INPUT", f"{first['uri']} is tenant acme's, not beta's")


def test_a_stored_report_has_an_address_that_resolves_and_links_each_fact_it_checked(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run(capsys, "run", "2 + 3", "--seed", "s1", "--job-id", "j1", "--tenant", "acme")[0] == 0
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "auditor")
    code, out, _ = run(capsys, "replay", "j1", "--tenant", "acme", "--json")
    assert code == 0
    report = orjson.loads(out)
    address = "mace://acme/job/j1/replay/1/report"
    assert (report["uri"], report["tenant"]) == (address, "acme")
    rows = [row for row in report["checks"] if row["sequence_index"] is not None]
    assert rows and all(
        row["uri"] == f"mace://acme/job/j1/event/{row['sequence_index']}" for row in rows
    )

    code, out, err = run(capsys, "events", address, "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out) == report
    code, markdown, _ = run(capsys, "events", address)
    assert markdown.startswith("# Replay report: job `j1`, attempt 1\n")
    assert f"- Report: `{address}`" in markdown
    assert f"| [event 0 InputReceived]({rows[0]['uri']}) | re-executed and matched |" in markdown
    # A row's address resolves to the very fact the row is about.
    code, out, _ = run(capsys, "events", rows[1]["uri"], "--json")
    assert orjson.loads(out)["event_type"] == rows[1]["subject"].split()[-1]

    code, out, err = run(capsys, "events", "mace://acme/job/j1/replay/2/report")
    assert (code, out) == (2, "")
    assert_failure_line(err, "NOT_FOUND", "no replay report at mace://acme/job/j1/replay/2/report")
    code, out, err = run(capsys, "events", address, "--type", "RouterDecision")
    assert (code, out) == (2, "")
    assert_failure_line(
        err, "INVALID_INPUT", f"{address} names a replay report: --type applies to events"
    )
    code, out, err = run(capsys, "events", "mace://default/job/j1/replay/1/report")
    assert code == 2
    assert_failure_line(err, "NOT_FOUND")


def test_the_dashboard_leads_with_the_verdict_and_links_every_address(api: Api) -> None:
    job_id = api.new_job()
    replayed = api.replay(job_id)
    assert replayed.status_code == 200, replayed.content
    report = api.get(f"/v1/jobs/{job_id}/replays/1").json()["report"]
    tenant = report["tenant"]
    assert report["uri"] == f"mace://{tenant}/job/{job_id}/replay/1/report"
    page = api.get(f"/dashboard/jobs/{job_id}/replays/1").text
    verdict = page.index('<p id="verdict"><strong>Verdict: REPRODUCED, authoritative; of 7 facts')
    assert verdict < page.index('id="checks"') < page.index("Verification steps")
    assert f"<code>{report['uri']}</code>" in page
    assert f'<code class="uri">mace://{tenant}/job/{job_id}/event/3</code>' in page
    job_page = api.get(f"/dashboard/jobs/{job_id}").text
    assert f'<code class="uri">mace://{tenant}/job/{job_id}/event/0</code>' in job_page
