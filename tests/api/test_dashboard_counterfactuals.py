"""The dashboard's view of an as-of, a compare and a fork, on SQLite and PostgreSQL: each a diff
view with the what-if's macro. An as-of or compare: its point(s), what was served and not (or
that nothing was read from memory), the data drift and its consequences side by side, and
policy drift none with its reason; a fork: the new job (a link to its page), what was kept and
re-run, the first change then the rest, original beside fork. Every value escaped."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from markupsafe import escape
from support.api_support import Api, churned_launch
from support.hand_written_runs import ANA

from domain.as_of import LogPoint
from infrastructure.api.context import DASHBOARD
from projections.as_of import NOTHING_READ, POLICY_HELD

HOSTILE = '</td><script>alert("x")</script><img src=x onerror=alert(1)>'
"""Markup a job's input or a remembered value carries into the diffs."""
HEADINGS = re.compile(r"<h3>(.*?)</h3>")
FIRST = re.compile(r'<p id="first-change">(.*?)</p>')
BLUE, RED = (str(escape(f'  "value": {json.dumps(value)}')) for value in ("blue", HOSTILE))
"""The lines of the value read in the SEM, blue then the markup, as the page escapes them."""
LABELS = re.compile(r'<table class="diff"><thead><tr><th>(.*?)</th><th>(.*?)</th>')


def page(api: Api, record_id: str) -> str:
    with api.unchecked() as client:
        url = f"{DASHBOARD}/whatif/{record_id}"
        response = client.get(url, headers={"Authorization": "Bearer tok-acme-auditor"})
    assert response.status_code == 200, response.text
    text: str = response.text
    assert "<script>" not in text and "<img" not in text
    return text


def unhtml(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def section(text: str, name: str) -> str:
    found = re.search(rf'<section id="{name}">(.*?)</section>', text, re.S)
    assert found is not None, name
    return found.group(1)


def where(d: dict[str, Any]) -> str:
    at = "the job" if d["iteration"] is None else f"iteration {d['iteration']}"
    return f"{at}, field {d['field']}"


def at(api: Api) -> LogPoint:
    return LogPoint(None, api.position())


def test_an_as_of_and_a_compare_show_the_drift_and_what_follows_side_by_side(api: Api) -> None:
    api.new_job("my favorite color is blue", seed="s1", user="u1")
    blue = at(api)
    asked = api.new_job("what is my favorite color", seed="s2", user="u1")
    api.new_job(f"my favorite color is {HOSTILE}", seed="s3", user="u1")
    red = at(api)
    run = api.ledger.whatif_as_of.run
    later = run(asked, red, ANA, tenant="acme")
    text = page(api, later.record_id)
    assert unhtml(section(text, "points")).strip() == (
        f"Point\nMemory as of log position {red.position} (log position {red.position},"
        f" memory version {later.report['as_of']['memory_version']})."
    )
    assert f'<a class="id" href="/dashboard/jobs/{asked}">' in text
    served = unhtml(section(text, "served"))
    assert "0 retrieval(s) from the tenant's memory log, 1 SEM read(s) from its SEM log" in served
    # The value read, then what was decided on it, each held beside the record.
    drift = section(text, "data-drift")
    assert [unhtml(h) for h in HEADINGS.findall(drift)] == [
        "iteration 0, field sem_read user/person/u1/favorite_color"
    ]
    assert LABELS.findall(drift) == [("Recorded", f"As of log position {red.position}")]
    assert f'<tr class="changed"><td>{BLUE}</td><td>{RED}</td></tr>' in drift
    follows = section(text, "consequences")
    assert [unhtml(h) for h in HEADINGS.findall(follows)] == [
        where(d) for d in later.report["consequences"]
    ]
    assert "&#34;Your favorite color is &lt;/td&gt;&lt;script&gt;" in follows
    assert unhtml(section(text, "policy-drift")).strip() == (
        f"Policy drift\nPolicy drift: none, because {POLICY_HELD}."
    )

    compared = run(asked, blue, ANA, tenant="acme", compare_to=red)
    text = page(api, compared.record_id)
    assert f"Memory as of log position {blue.position}" in unhtml(section(text, "points"))
    assert f", compared to log position {red.position}" in unhtml(section(text, "points"))
    drift = section(text, "data-drift")
    # A compare holds what one point served beside what the other did.
    heads = (f"As of log position {blue.position}", f"Compare to log position {red.position}")
    assert set(LABELS.findall(text)) == {heads}
    assert f'<tr class="changed"><td>{BLUE}</td><td>{RED}</td></tr>' in drift


def test_an_as_of_that_read_nothing_from_memory_says_so(api: Api) -> None:
    job_id = api.new_job(HOSTILE)
    result = api.ledger.whatif_as_of.run(job_id, at(api), ANA, tenant="acme")
    text = page(api, result.record_id)
    assert unhtml(section(text, "served")).count(NOTHING_READ) == 1
    for part in ("data-drift", "consequences"):
        assert unhtml(section(text, part)).split()[-1] == "None."
    assert "Policy drift: none" in unhtml(section(text, "policy-drift"))


def test_a_fork_is_its_new_job_what_was_kept_and_its_changes_original_beside_fork(
    api: Api,
) -> None:
    job_id = api.new_job("2 + 3")
    result = api.ledger.forks.fork(job_id, 0, ANA, text=HOSTILE, tenant="acme")
    report = result.report
    text = page(api, result.record_id)
    fork = section(text, "fork")
    assert f'<a class="id" href="/dashboard/jobs/{result.fork_job_id}">' in fork
    assert unhtml(fork).split("\n")[2] == (
        f"Recorded as job {result.fork_job_id}, forked from iteration 0 with another input:"
        f" {HOSTILE}."
    )
    kept = report["kept"]
    assert unhtml(fork).split("\n")[3] == (
        f"Kept: 0 iteration(s) ({kept['events']} events), {kept['how']}."
        f" Re-run: {report['totals']['iterations_rerun']} iteration(s)."
    )
    first, *rest = report["differences"]
    assert [unhtml(f) for f in FIRST.findall(text)] == [f"{first['code']} at {where(first)}"]
    assert [unhtml(h) for h in HEADINGS.findall(text)] == [
        f"{d['code']} at {where(d)}" for d in rest
    ]
    assert set(LABELS.findall(text)) == {("Original", "Fork")}
    assert "&lt;/td&gt;&lt;script&gt;alert(" in text


def test_a_compare_lists_the_hits_added_and_removed_between_its_points(
    api: Api, tmp_path: Path
) -> None:
    churned = churned_launch(api, tmp_path)
    recorded = LogPoint(None, churned.recorded)
    result = api.ledger.whatif_as_of.run("launch", recorded, ANA, tenant="acme", compare_to=at(api))
    text = page(api, result.record_id)
    drift = section(text, "data-drift")
    assert [unhtml(h) for h in HEADINGS.findall(drift)] == [
        "the job, field event 5 RetrievalResponse hits"
    ]
    listed = re.search(r'<ul class="hits">(.*?)</ul>', drift)
    assert listed is not None
    assert [unhtml(li) for li in re.findall(r"<li>(.*?)</li>", listed.group(1))] == [
        f"added: {churned.added}",
        f"removed: {churned.forgotten}",
        "2 hit(s) in both",
    ]
    assert "1 retrieval(s) from the tenant's memory log" in unhtml(section(text, "served"))
