"""The dashboard as a person sees it: a real headless Chromium, JavaScript off, against uvicorn.

The service is served for real on a loopback port (SQLite and PostgreSQL), a store is prepared
through the HTTP API (replayable jobs, one that production replay cannot redo, replays that
reproduced, diverged or were refused, a halted snapshot, another tenant's job), and then the
browser signs in through the form and reads each section, follows the links to a job and to a
replay report, and is refused another tenant's job.

Needs Debian's chromium at /usr/bin/chromium (``.ci/setup-test-machine`` installs it); it never
downloads a browser. A full-page screenshot of the overview goes under pytest's tmp_path; with
``MACE_SAVE_SCREENSHOT=1`` the SQLite run's is also copied to ``tests/api/artifacts/dashboard.png``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from infrastructure.api.app import create_app
from infrastructure.application.ledger import Ledger
from infrastructure.application.tokens import TokenBook, add_token
from infrastructure.storage.settings import Settings

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NO_CHROMIUM = (
    f"no Chromium at {CHROMIUM}: run .ci/setup-test-machine (it installs Debian's chromium)"
)
SCREENSHOT_COPY = Path(__file__).resolve().parent / "artifacts" / "dashboard.png"
SUBMIT = "main form button[type=submit]"
RIGHT_MOCK = {
    "text": "2 + 3 = 5",
    "claims": [{"expression": "2 + 3", "value": 5}],
    "evidence": [{"agent": "math_agent", "kind": "computation"}],
}


@dataclass(frozen=True)
class Replay:
    """One replay the store holds, and what the overview must say about it."""

    job_id: str
    attempt: int
    mode: str
    outcome: str
    error_code: str | None
    authority: str
    markdown: str


@dataclass
class Store:
    """What was recorded through the API, to compare the pages with."""

    token: str
    non_replayable: str
    missing_artifacts: list[dict[str, Any]]
    replays: list[Replay]
    halted_snapshot: str
    halt_reason: str
    foreign_job: str


def require_chromium() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(NO_CHROMIUM)
    pytest.skip(NO_CHROMIUM)


@contextmanager
def chromium() -> Iterator[Browser]:
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """The app behind a real uvicorn on a free loopback port, in a background thread."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started serving"
        assert time.monotonic() < deadline, "uvicorn did not start within 30 s"
        thread.join(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()
        assert not thread.is_alive(), "uvicorn did not stop"


def prepare_store(base_url: str, tokens: dict[str, str]) -> Store:
    """Record, over HTTP, everything the overview has a section for."""

    def call(who: str, path: str, body: dict[str, Any], status: int) -> Any:
        headers = {"Authorization": f"Bearer {tokens[who]}"}
        response = httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=60)
        assert response.status_code == status, response.text
        return response.json()

    for job_id, text, seed in (
        ("math-1", "2 + 3", 1),
        ("facts-1", "what is 7 * 6", 2),
        ("chat-1", "hello there", 3),
    ):
        recorded = {"input": text, "seed": seed, "job_id": job_id, "capture_mode": "full_io"}
        assert call("ana", "/v1/jobs", recorded, 201)["replayable"]
    gap = call(
        "ana",
        "/v1/jobs",
        {
            "input": "2 + 3",
            "seed": "p1",
            "job_id": "prompts-only-1",
            "capture_mode": "prompts_only",
        },
        201,
    )
    assert gap["replayable"] is False and gap["missing_artifacts"]

    replays: list[Replay] = []

    def replay(
        who: str, body: dict[str, Any], status: int, code: str | None, authority: str
    ) -> None:
        answer = call(who, "/replay/request", body, status)
        assert (answer["error"] or {}).get("code") == code, answer["error"]
        assert answer["authoritative"] is (authority == "authoritative")
        replays.append(
            Replay(
                job_id=body["job_id"],
                attempt=answer["attempt"],
                mode=body.get("mode", "audit"),
                outcome="ok" if answer["ok"] else "refused" if status == 403 else "failed",
                error_code=code,
                authority=authority,
                markdown=answer["report_markdown"],
            )
        )

    wrong = {"math_agent": {"text": "2 + 3 = 6"}}
    right = {"math_agent": RIGHT_MOCK}
    non_auth, auth = "non-authoritative", "authoritative"
    for who, body, status, code, authority in (
        ("ana", {"job_id": "math-1"}, 200, None, auth),
        ("ana", {"job_id": "math-1", "mode": "reexecute", "mocks": wrong}, 200,
         "REPLAY_DIVERGENCE", non_auth),
        ("olga", {"job_id": "math-1", "mode": "production"}, 403, "ACCESS_DENIED", non_auth),
        ("ana", {"job_id": "math-1", "mode": "reexecute", "mocks": right}, 200, None, non_auth),
        ("ana", {"job_id": "facts-1", "mode": "production"}, 200, None, auth),
        ("ana", {"job_id": "prompts-only-1", "mode": "production"}, 200,
         "MISSING_PERSISTED_AGENT_OUTPUT", auth),
    ):  # fmt: skip
        replay(who, body, status, code, authority)

    router = gap["snapshot_ids"]["router_snapshot_id"]
    reason = "router rules pasted into a support ticket"
    call("olga", f"/v1/snapshots/{router}/halt", {"reason": reason}, 201)
    call("gus", "/v1/jobs", {"input": "2 + 3", "seed": 1, "job_id": "globex-1"}, 201)
    return Store(
        token=tokens["ana"],
        non_replayable="prompts-only-1",
        missing_artifacts=gap["missing_artifacts"],
        replays=replays,
        halted_snapshot=router,
        halt_reason=reason,
        foreign_job="globex-1",
    )


def the_tokens(tokens_file: Path) -> dict[str, str]:
    """The callers: ana (operator, admin, auditor), olga (operator) and cleo (council) of acme,
    gus (operator) of globex."""
    return {
        "ana": add_token(tokens_file, "ana", ["operator", "admin", "auditor"], "acme"),
        "olga": add_token(tokens_file, "olga", ["operator"], "acme"),
        "gus": add_token(tokens_file, "gus", ["operator"], "globex"),
        "cleo": add_token(tokens_file, "cleo", ["council"], "acme"),
    }


def events_of(base_url: str, token: str, job_id: str) -> list[dict[str, Any]]:
    response = httpx.get(
        f"{base_url}/v1/jobs/{job_id}/events", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.text
    events: list[dict[str, Any]] = response.json()["events"]
    return events


def flat(text: str) -> str:
    """Page text with each run of whitespace as one space, as a person reads it."""
    return re.sub(r"\s+", " ", text).strip()


def sign_in(page: Page, base_url: str, token: str) -> int:
    """Type the token into the form and submit it; the status the login answered."""
    page.fill("#token", token)
    with page.expect_response(f"{base_url}/dashboard/login") as login:
        page.click(SUBMIT)
    page.wait_for_load_state()
    return login.value.status


def check_overview(page: Page, store: Store) -> None:
    evidence = flat(page.inner_text("#evidence"))
    # A refused replay never ran: it is no evidence either way.
    finished = sum(r.outcome != "refused" for r in store.replays)
    successes = sum(r.outcome == "ok" for r in store.replays)
    rate = f"{100 * successes / finished:.1f}%"
    assert f"Replay success rate {rate} {successes} of {finished} that ran" in evidence, evidence
    assert "Jobs 4 recorded" in evidence, evidence
    assert "Not replayable 1 in production" in evidence, evidence

    gaps = flat(page.inner_text("#non-replayable"))
    assert gaps.startswith("Jobs not replayable (1)"), gaps
    assert store.non_replayable in gaps
    for missing in store.missing_artifacts:
        what = ", ".join(missing["missing"])
        assert f"{what} of {missing['step']}: {missing['reason']}" in gaps, gaps
    for replayable in ("math-1", "facts-1", "chat-1"):
        assert replayable not in gaps

    rows = page.locator("#replays tbody tr")
    assert rows.count() == len(store.replays)
    for replay in store.replays:
        link = f"/dashboard/jobs/{replay.job_id}/replays/{replay.attempt}"
        row = flat(
            page.locator("#replays tbody tr", has=page.locator(f'a[href="{link}"]')).inner_text()
        )
        assert row.startswith(f"{replay.job_id} #{replay.attempt} report {replay.mode}"), row
        assert f" {replay.outcome} " in f" {row} ", row
        assert (replay.error_code or "") in row, row
        badge = re.search(r"\b(non-authoritative|authoritative)\b", row)
        if replay.outcome == "refused":
            assert badge is None, row
        else:
            assert badge is not None and badge.group(1) == replay.authority, row

    halted = flat(page.inner_text("#halted"))
    assert store.halted_snapshot in halted, halted
    assert store.halt_reason in halted, halted
    assert "olga" in halted, halted


def save_screenshot(page: Page, path: Path, keep: bool) -> None:
    page.screenshot(path=str(path), full_page=True)
    print(f"dashboard screenshot: {path}")  # noqa: T201
    if keep and os.environ.get("MACE_SAVE_SCREENSHOT") == "1":
        SCREENSHOT_COPY.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, SCREENSHOT_COPY)
        print(f"dashboard screenshot copied to {SCREENSHOT_COPY}")  # noqa: T201


def test_a_person_reads_the_dashboard_without_javascript(
    settings: Settings, ledger: Ledger, store_url: str, tmp_path: Path
) -> None:
    require_chromium()
    tokens_file = tmp_path / "tokens.json"
    tokens = the_tokens(tokens_file)
    app = create_app(settings, TokenBook.load(tokens_file), ledger)
    backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
    with served(app) as base_url, chromium() as browser:
        store = prepare_store(base_url, tokens)
        context = browser.new_context(
            java_script_enabled=False, viewport={"width": 1280, "height": 900}
        )
        page = context.new_page()

        # Without a session: the sign-in form, and no script anywhere.
        response = page.goto(f"{base_url}/dashboard")
        assert response is not None and response.status == 401
        assert flat(page.inner_text("main")).startswith("Sign in Bearer token")
        assert page.locator("script").count() == 0

        # A wrong token: the form again, saying so.
        assert sign_in(page, base_url, "mace_not-a-token-anyone-holds") == 401
        assert "That token is not valid." in page.inner_text("main")
        assert page.locator("#token").count() == 1
        assert context.cookies() == []

        # The right one: the overview, with the session in an HTTP-only same-site cookie.
        assert sign_in(page, base_url, store.token) == 303
        assert page.url == f"{base_url}/dashboard"
        (cookie,) = context.cookies()
        assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == (
            "mace_session",
            True,
            "Strict",
        )
        assert flat(page.inner_text("header")).startswith(
            "MACE Ledger ana · tenant acme · admin, auditor, operator"
        )
        check_overview(page, store)
        assert page.locator("script").count() == 0
        save_screenshot(page, tmp_path / f"dashboard-{backend}.png", keep=backend == "sqlite")

        # Follow the link to a job: its events, in a table, and its replays.
        page.click('#replays a[href="/dashboard/jobs/math-1"] >> nth=0')
        page.wait_for_url(f"{base_url}/dashboard/jobs/math-1")
        events = events_of(base_url, store.token, "math-1")
        assert flat(page.inner_text("#events")).startswith(f"Events ({len(events)})")
        cells = page.locator("#events tbody tr td:nth-child(3)").all_inner_texts()
        assert cells == [event["event_type"] for event in events]
        assert page.locator("#job-replays li").count() == 4
        page.screenshot(path=str(tmp_path / f"job-{backend}.png"), full_page=True)

        # And on to the report of the replay that diverged: its steps and the markdown report.
        diverged = next(r for r in store.replays if r.error_code == "REPLAY_DIVERGENCE")
        page.click(f'a[href="/dashboard/jobs/math-1/replays/{diverged.attempt}"]')
        page.wait_for_url(f"{base_url}/dashboard/jobs/math-1/replays/{diverged.attempt}")
        recorded = httpx.get(
            f"{base_url}/v1/jobs/math-1/replays/{diverged.attempt}",
            headers={"Authorization": f"Bearer {store.token}"},
        ).json()
        assert page.locator("#steps tbody tr").count() == len(recorded["steps"])
        checks = recorded["report"]["checks"]
        assert page.locator("#checks tbody tr").count() == len(checks)
        verdict = flat(page.inner_text("#verdict"))
        assert verdict.startswith("Verdict: FAILED REPLAY_DIVERGENCE, NON-AUTHORITATIVE"), verdict
        steps = flat(page.inner_text("main section >> nth=0"))
        assert f"Replay #{diverged.attempt} of math-1 (reexecute)" in steps
        assert "1 load reflective log ok" in steps, steps
        assert "failed" in steps and "agent_outputs differs from the record" in steps, steps
        assert page.inner_text("#report pre").strip() == diverged.markdown.strip()
        page.screenshot(path=str(tmp_path / f"replay-{backend}.png"), full_page=True)

        # Another tenant's job is answered exactly as one that does not exist.
        foreign = page.goto(f"{base_url}/dashboard/jobs/{store.foreign_job}")
        assert foreign is not None and foreign.status == 404
        foreign_text = flat(page.inner_text("main"))
        assert foreign_text.startswith(f"404: NOT_FOUND no job {store.foreign_job}")
        absent = page.goto(f"{base_url}/dashboard/jobs/never-recorded")
        assert absent is not None and absent.status == 404
        absent_text = flat(page.inner_text("main"))
        assert foreign_text == absent_text.replace("never-recorded", store.foreign_job)
        context.close()


VIEWPORTS: dict[str, ViewportSize] = {
    "wide": {"width": 1400, "height": 1000},
    "phone": {"width": 390, "height": 844},
}
LAYOUT = """() => {
  const width = document.documentElement.clientWidth;
  const inScroller = (el) => el.closest('.scroll') !== null && !el.classList.contains('scroll');
  const wide = [...document.querySelectorAll('body *')]
    .filter((el) => !inScroller(el) && el.getBoundingClientRect().right > width + 0.5)
    .map((el) => el.tagName + '.' + el.className);
  const spilled = [...document.querySelectorAll('section')].flatMap((card) =>
    [...card.querySelectorAll('.scroll')].filter((box) =>
      box.getBoundingClientRect().right > card.getBoundingClientRect().right + 0.5))
    .map((el) => el.className);
  const codes = [...document.querySelectorAll('code')]
    .filter((el) => el.classList.contains('code') || /^[A-Z_]{4,}$/.test(el.textContent));
  const wrapped = codes
    .filter((el) => el.getClientRects().length !== 1
      || el.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(el).fontSize))
    .map((el) => el.textContent);
  return {
    pageScroll: document.documentElement.scrollWidth - width,
    wide, spilled, wrapped,
    codes: codes.length,
  };
}"""


def layout_holds(page: Page, where: str) -> int:
    """No horizontal page scroll, no element wider than the viewport outside a table's own
    scroller, no scroller wider than its card, every error code (a ``code.code``, or any code
    element that reads like one) on one line."""
    facts = page.evaluate(LAYOUT)
    assert facts["pageScroll"] <= 0, (where, facts)
    assert facts["wide"] == [], (where, facts)
    assert facts["spilled"] == [], (where, facts)
    assert facts["wrapped"] == [], (where, facts)
    codes: int = facts["codes"]
    return codes


def test_an_operator_searches_pages_and_reads_divergences_audits_and_governance(
    settings: Settings, ledger: Ledger, store_url: str, tmp_path: Path
) -> None:
    """The job list (filtered, paged), a replay that diverged (checks and diff), the audits
    and the governance pages, at 1400x1000 and 390x844: screenshots under tmp_path, and the
    layout measured in the DOM."""
    require_chromium()
    tokens_file = tmp_path / "tokens.json"
    tokens = the_tokens(tokens_file)
    for n in range(45):
        ledger.jobs.run("2 + 3", f"bulk{n}", job_id=f"bulk-{n:02d}", tenant="acme")
    app = create_app(settings, TokenBook.load(tokens_file), ledger)
    backend = "sqlite" if store_url.startswith("sqlite") else "postgres"
    with served(app) as base_url, chromium() as browser:
        store = prepare_store(base_url, tokens)

        def post(who: str, path: str, body: dict[str, Any]) -> None:
            headers = {"Authorization": f"Bearer {tokens[who]}"}
            answer = httpx.post(f"{base_url}{path}", json=body, headers=headers, timeout=120)
            assert answer.status_code in {200, 201}, answer.text

        post("ana", "/v1/audits", {})
        reason = "the mock answer is the one under test"
        post("ana", "/v1/jobs/math-1/governance/force-continue", {"reason": reason})
        vote = {"motion": "force_continue", "vote": "approve"}
        post("cleo", "/v1/jobs/math-1/governance/votes", vote)
        diverged = next(r for r in store.replays if r.error_code == "REPLAY_DIVERGENCE")
        report = httpx.get(
            f"{base_url}/v1/jobs/math-1/replays/{diverged.attempt}",
            headers={"Authorization": f"Bearer {store.token}"},
        ).json()["report"]
        for name, viewport in VIEWPORTS.items():
            context = browser.new_context(viewport=viewport)
            page = context.new_page()
            page.goto(f"{base_url}/dashboard")
            assert sign_in(page, base_url, store.token) == 303

            def shot(what: str, name: str = name, page: Page = page) -> None:
                path = tmp_path / f"{what}-{name}-{backend}.png"
                page.screenshot(path=str(path), full_page=True)
                print(f"dashboard screenshot: {path}")  # noqa: T201

            # The job list, filtered and paged: 20 a page, the filter kept in the next link.
            search = f"{base_url}/dashboard/jobs?job=bulk-&size=20"
            answer = page.goto(search)
            assert answer is not None and answer.status == 200
            assert len(answer.body()) < 100_000
            rows = page.locator("#jobs tbody tr")
            assert rows.count() == 20
            assert rows.first.locator("td").first.inner_text() == "bulk-00"
            assert page.input_value("input[name=job]") == "bulk-"
            layout_holds(page, f"jobs {name}")
            shot("jobs")
            page.click("#next-page")
            assert "job=bulk-" in page.url and "size=20" in page.url and "after=" in page.url
            assert page.locator("#jobs tbody tr").first.locator("td").first.inner_text() == (
                "bulk-20"
            )
            shot("jobs-page-2")
            bad = page.goto(f"{base_url}/dashboard/jobs?status=done")
            assert bad is not None and bad.status == 400
            assert page.inner_text("#problem") == (
                "status: 'done' is not one of open, completed, sealed, abandoned"
            )
            layout_holds(page, f"bad filter {name}")

            # The replay that diverged: its checks agree with the step log; the diff side by side.
            page.goto(f"{base_url}/dashboard/jobs/math-1/replays/{diverged.attempt}")
            checks = {
                flat(row.locator("td").nth(0).inner_text()).split(" mace://")[0]: flat(
                    row.locator("td").nth(1).inner_text()
                )
                for row in page.locator("#checks tbody tr").all()
            }
            assert checks == {
                row["subject"]: row["check"].replace("_", " ") for row in report["checks"]
            }
            assert checks["event 0 InputReceived"] == "reexecuted"
            (failed,) = [s for s in report["steps"] if s["outcome"] == "failed"]
            field = report["divergences"][0]["field"]
            assert failed["step"] == f"compare {field} (iteration 0)"
            assert [subject for subject, check in checks.items() if check == "diverged"] == [
                subject
                for subject in checks
                if subject.endswith((" IterationTrace", " AgentOutput"))
            ]
            diff = page.locator("#divergences table.diff")
            assert diff.count() == len(report["divergences"])
            changed = flat(" ".join(diff.first.locator("tr.changed").all_inner_texts()))
            assert "2 + 3 = 6" in changed and "2 + 3 = 5" in changed, changed
            layout_holds(page, f"replay {name}")
            shot("replay-diff")

            # A job's events: payloads laid out, never one line of raw JSON.
            page.goto(f"{base_url}/dashboard/jobs/math-1")
            assert page.locator("#events td.payload dl.payload").count() >= 4
            layout_holds(page, f"job {name}")
            shot("job")

            page.goto(f"{base_url}/dashboard/audits")
            audits = flat(page.inner_text("#audits"))
            assert audits.startswith("Audits of tenant acme (1)"), audits
            assert "ana (admin, auditor, operator)" in audits, audits
            layout_holds(page, f"audits {name}")
            shot("audits")

            page.goto(f"{base_url}/dashboard/governance")
            events = page.locator("#governance tbody tr td:nth-child(2)").all_inner_texts()
            assert {"REPLAY_REQUEST", "REPLAY_RESULT", "COUNCIL_VOTE", "FORCE_HALT_REPLAY"} <= set(
                events
            ), events
            governance = flat(page.inner_text("#governance"))
            assert reason in governance and "globex" not in governance
            layout_holds(page, f"governance {name}")
            shot("governance")

            page.goto(f"{base_url}/dashboard")
            # Each replay's error code and the halt's cause, every one measured on one line.
            assert layout_holds(page, f"overview {name}") >= 4
            shot("overview")
            context.close()
