"""The HTTP service end to end, on SQLite and PostgreSQL: the real app over a real ledger.

Callers come from a token book with principals in two tenants (`api_support.CALLERS`). Every JSON
answer is checked to be canonical bytes as it arrives; "nothing written" is checked against the
store's notification position.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient
from support.api_support import (
    ANY_FIELD,
    CALLERS,
    SINGLE_ROLES,
    Api,
    Response,
    assert_error,
    auth,
    checked_client,
    not_found_body,
    parse_metrics,
    stage_event,
    token_book,
)
from support.ledger_fixtures import (
    MACE_WITH_CTRL_C,
    TEST_CHECKPOINT_KEY,
    RawTable,
    run,
    signing_keys,
    subprocess_env,
)
from support.live_service import free_port, wait_until_healthy

from domain.canonical import canonical_json
from domain.events import hash_of
from domain.job import Job
from domain.snapshot import Snapshot
from infrastructure.api.app import create_app
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.application.tokens import (
    TokenBook,
    Tokens,
    TokensFileError,
    WatchedTokensFile,
    add_token,
    read_tokens_file,
    revoke_token,
    token_id_of,
)
from infrastructure.storage.settings import Settings

DEFAULT_IDS = {kind.value: s.snapshot_id for kind, s in default_snapshots().items()}
ROUTER_ID = DEFAULT_IDS["router"]
ACCESS_DENIED = "ACCESS_DENIED"
ONE_RULE_ROUTER = {
    "rules": [{"rule_id": "R1", "pattern": "x", "agent": "generic_agent", "why": "only"}]
}
RECORDERS_TEXT = "['admin', 'operator']"


@pytest.fixture
def limited_api(settings: Settings, ledger: Ledger) -> Iterator[Api]:
    """The service with small limits: 2048-byte bodies, 3 events a batch, 5 a run, 4096 bytes
    of events a run."""
    limits = {"max_body_bytes": 2048, "max_batch_events": 3, "max_run_events": 5}
    limited = settings.model_copy(update={**limits, "max_run_bytes": 4096})
    with checked_client(limited, ledger) as client:
        yield Api(client, ledger)


def started(**extra: Any) -> dict[str, Any]:
    return {"type": "RunStarted", "seed": 7, "input": "say hello", **extra}


def recorders_only(who: str) -> str:
    caller = CALLERS[who]
    held = list(caller.roles)
    return f"this needs one of the roles {RECORDERS_TEXT}; {caller.actor_id} holds {held}"


# --- health, readiness, the OpenAPI document ----------------------------------------------------


READY = b'{"status":"ready"}'
NOT_READY = b'{"error":{"code":"NOT_READY","message":"not ready"}}'
# Callers who see readiness only as ready / not ready: none, a stranger, and every role but admin.
UNDETAILED = {
    "no-token": {},
    "unknown-token": {"Authorization": "Bearer not-a-known-token"},
    "operator": auth("operator"),
    "auditor": auth("auditor"),
    "council": auth("council"),
}


def test_health_and_readiness_say_only_whether_without_an_admin_token(api: Api) -> None:
    health = api.get("/healthz", None)
    assert (health.status_code, health.content) == (200, b'{"status":"ok"}')
    for name, headers in UNDETAILED.items():
        ready = api.client.get("/readyz", headers=headers)
        assert (ready.status_code, ready.content) == (200, READY), name


def test_readiness_details_are_for_an_admin_token(api: Api, settings: Settings) -> None:
    details = {
        "status": "ready",
        "store": settings.parsed_store().describe(),
        "log_position": 0,
        "active_key_id": "k1",
        "keys": {"k1": "unrecorded"},
        "tokens": len(CALLERS),
    }
    for who in ("admin", "admin_auditor", "beta_admin_auditor"):
        ready = api.get("/readyz", who)
        assert (ready.status_code, ready.json()) == (200, details), who
    api.new_job()
    position = api.get("/readyz", "admin").json()["log_position"]
    assert position == api.position() > 0


def test_an_unreachable_store_is_not_ready_and_only_an_admin_learns_why(
    api: Api, settings: Settings
) -> None:
    raw = RawTable(settings)
    raw.execute("ALTER TABLE {table} RENAME TO moved_away")
    # As every route that needs the store answers then; the reason for an admin only.
    unavailable = b'{"error":{"code":"STORE_UNAVAILABLE","message":"not ready: store unavailable"}}'
    for name, headers in UNDETAILED.items():
        ready = api.client.get("/readyz", headers=headers)
        assert (ready.status_code, ready.content) == (503, unavailable), name
    message = assert_error(api.get("/readyz", "admin"), 503, "STORE_UNAVAILABLE")
    assert message.startswith("not ready: store unreachable: ")
    assert raw.table in message  # the store's own words, for an admin only
    health = api.get("/healthz", None)
    assert (health.status_code, health.content) == (200, b'{"status":"ok"}')


def test_openapi_document_needs_no_token_and_lists_the_endpoints(api: Api) -> None:
    with api.unchecked() as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    paths = orjson.loads(response.content)["paths"]
    for path in (
        "/healthz",
        "/readyz",
        "/v1/runs",
        "/v1/runs/{run_id}/events",
        "/v1/runs/{run_id}/complete",
        "/v1/jobs",
        "/v1/jobs/{job_id}/replays/{attempt}",
        "/replay/request",
        "/v1/snapshots",
        "/metrics",
    ):
        assert path in paths, path
    assert not any(path.startswith("/dashboard") for path in paths)
    assert "admin token only" in paths["/readyz"]["get"]["responses"]["503"]["description"]


# --- 401 ----------------------------------------------------------------------------------------

GUARDED = [
    ("GET", "/v1/jobs"),
    ("GET", "/v1/jobs/some-job"),
    ("GET", "/v1/runs/some-run"),
    ("POST", "/v1/runs"),
    ("POST", "/v1/jobs"),
    ("POST", "/replay/request"),
    ("POST", "/v1/snapshots"),
    ("GET", "/metrics"),
]


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "a bearer token is required"),
        ("Bearer not-a-known-token", "the bearer token is not valid"),
        (f"Bearer {CALLERS['operator'].token}x", "the bearer token is not valid"),
        (f"Basic {CALLERS['operator'].token}", "a bearer token is required"),
        ("Bearer", "a bearer token is required"),
    ],
    ids=["no-token", "unknown-token", "token-plus-a-char", "basic-scheme", "empty-bearer"],
)
def test_unauthenticated_requests_get_401_with_www_authenticate(
    api: Api, authorization: str | None, message: str
) -> None:
    before = api.position()
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in GUARDED:
        body = {"input": "2 + 3", "seed": "s1"} if method == "POST" else None
        response = api.client.request(method, path, headers=headers, json=body)
        assert_error(response, 401, "UNAUTHENTICATED", message)
        assert response.headers["www-authenticate"] == "Bearer"
    assert api.position() == before


# --- 403 by role, for every write endpoint ------------------------------------------------------


def _write_requests(api: Api) -> dict[str, tuple[Callable[[str], Response], set[str], int]]:
    """Each write endpoint: how to call it as someone, who may, and the success status."""
    job_id = api.new_job()
    run_id = api.open_run(started())
    assert api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {"reason": "incident 7"}).status_code == 201
    snapshot = {"kind": "router", "payload": ONE_RULE_ROUTER}
    return {
        "open-run": (
            lambda w: api.post("/v1/runs", started(input="other"), w),
            {"operator", "admin"},
            201,
        ),
        "add-events": (
            lambda w: api.send(run_id, [stage_event("e1")], w),
            {"operator", "admin"},
            200,
        ),
        "complete-run": (
            lambda w: api.post(f"/v1/runs/{run_id}/complete", {"final_output": "hi"}, w),
            {"operator", "admin"},
            200,
        ),
        "run-job": (
            lambda w: api.post("/v1/jobs", {"input": "hello", "seed": "s2"}, w),
            {"operator", "admin"},
            201,
        ),
        "put-snapshot": (
            lambda w: api.post("/v1/snapshots", snapshot, w),
            {"operator", "admin"},
            201,
        ),
        "force-continue": (
            lambda w: api.post(
                f"/v1/jobs/{job_id}/governance/force-continue", {"reason": "drift"}, w
            ),
            {"admin"},
            201,
        ),
        "vote": (
            lambda w: api.post(
                f"/v1/jobs/{job_id}/governance/votes",
                {"motion": "production_replay", "vote": "approve"},
                w,
            ),
            {"council"},
            201,
        ),
        "clear-halt": (
            lambda w: api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, w),
            {"council"},
            200,
        ),
    }


def _refusal(endpoint: str, who: str) -> str:
    caller = CALLERS[who]
    held = list(caller.roles)
    if endpoint == "force-continue":
        return f"only the admin role may request a force-continue; {caller.actor_id} holds {held}"
    if endpoint == "vote":
        return f"only the council role may vote; {caller.actor_id} holds {held}"
    if endpoint == "clear-halt":
        return f"only the council role may clear a halt; {caller.actor_id} holds {held}"
    return recorders_only(who)


WRITE_ENDPOINTS = [
    "open-run",
    "add-events",
    "complete-run",
    "run-job",
    "put-snapshot",
    "force-continue",
    "vote",
    "clear-halt",
]


@pytest.mark.parametrize("endpoint", WRITE_ENDPOINTS)
def test_write_endpoints_refuse_roles_that_may_not_with_403(api: Api, endpoint: str) -> None:
    call, allowed, success = _write_requests(api)[endpoint]
    before = api.position()
    denied = [role for role in SINGLE_ROLES if role not in allowed]
    assert denied
    for who in denied:
        assert_error(call(who), 403, ACCESS_DENIED, _refusal(endpoint, who))
    assert api.position() == before
    # A caller who holds the role gets through, so the refusals were about the role.
    allowed_caller = sorted(allowed)[0]
    assert call(allowed_caller).status_code == success
    assert api.position() > before


def test_any_role_may_halt_a_snapshot(api: Api) -> None:
    api.new_job()
    response = api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {"reason": "leak"}, "auditor")
    assert response.status_code == 201
    assert response.json() == {
        "snapshot_id": ROUTER_ID,
        "halted": True,
        "tenant": "acme",
        "by": CALLERS["auditor"].actor,
    }


# --- tenant isolation ---------------------------------------------------------------------------


def _ghost(real: str) -> str:
    """An id of the same length as ``real`` that no one recorded."""
    return "z" + real[1:] if not real.startswith("z") else "y" + real[1:]


def test_another_tenants_job_run_and_records_answer_exactly_as_missing_ones(api: Api) -> None:
    job_id = api.new_job()
    assert api.replay(job_id).status_code == 200
    run_id = api.open_run(started())
    assert api.send(run_id, [stage_event("e1")]).status_code == 200

    reads = [
        "/v1/jobs/{job}",
        "/v1/jobs/{job}/events",
        "/v1/jobs/{job}/governance",
        "/v1/jobs/{job}/replays/1",
        "/v1/runs/{run}",
    ]
    for template in reads:
        own = api.get(template.format(job=job_id, run=run_id), "operator")
        assert own.status_code == 200, template
        ghost_job, ghost_run = _ghost(job_id), _ghost(run_id)
        foreign = api.get(template.format(job=job_id, run=run_id), "beta_operator")
        missing = api.get(template.format(job=ghost_job, run=ghost_run), "beta_operator")
        what = f"run {run_id}" if "{run}" in template else f"job {job_id}"
        assert_error(foreign, 404, "NOT_FOUND", f"no {what}")
        assert foreign.content == not_found_body(what)
        swapped = missing.content.replace(ghost_job.encode(), job_id.encode())
        swapped = swapped.replace(ghost_run.encode(), run_id.encode())
        assert foreign.content == swapped, template
        assert foreign.headers == missing.headers, template

    before = api.position()
    writes: list[tuple[str, str, dict[str, Any] | None, str]] = [
        ("/replay/request", "beta_admin_auditor", {"job_id": "{job}", "mode": "audit"}, "job"),
        ("/v1/jobs/{job}/governance/force-continue", "beta_admin_auditor", {"reason": "r"}, "job"),
        (
            "/v1/jobs/{job}/governance/votes",
            "beta_council",
            {"motion": "force_continue", "vote": "approve"},
            "job",
        ),
        ("/v1/runs/{run}/events", "beta_operator", {"events": [stage_event("e2")]}, "run"),
        ("/v1/runs/{run}/complete", "beta_operator", {"final_output": "x"}, "run"),
    ]
    for template, who, body, kind in writes:
        real = job_id if kind == "job" else run_id
        ghost = _ghost(real)

        def ask(ident: str, template: str = template, who: str = who, body: Any = body) -> Response:
            filled = orjson.loads(orjson.dumps(body).replace(b"{job}", ident.encode()))
            return api.post(template.format(job=ident, run=ident), filled, who)

        foreign, missing = ask(real), ask(ghost)
        assert_error(foreign, 404, "NOT_FOUND", f"no {kind} {real}")
        assert foreign.content == missing.content.replace(ghost.encode(), real.encode()), template
    assert api.position() == before

    # Listings and metrics hold only the caller's tenant's jobs.
    assert api.get("/v1/jobs", "beta_operator").json() == {"jobs": [], "total": 0}
    listed = api.get("/v1/jobs", "operator").json()["jobs"]
    assert [(j["job_id"], j["status"]) for j in listed] == [(job_id, "sealed"), (run_id, "open")]
    beta_metrics = parse_metrics(api.get("/metrics", "beta_operator").text)
    assert beta_metrics.value("mace_jobs", tenant="beta") == 0


# --- runs: open ---------------------------------------------------------------------------------


def test_open_run_is_idempotent_and_a_different_start_conflicts(api: Api) -> None:
    first = api.post("/v1/runs", started())
    assert first.status_code == 201
    body = first.json()
    assert set(body) == {"run_id", "status", "events"}
    assert (body["status"], body["events"]) == ("open", 0)
    assert body["run_id"].startswith("run-")
    position = api.position()

    again = api.post("/v1/runs", started())
    assert (again.status_code, again.content) == (201, first.content)
    assert api.position() == position
    assert api.get(f"/v1/runs/{body['run_id']}").json() == body

    # The derived id depends on the tenant: the same start elsewhere is another run.
    elsewhere = api.post("/v1/runs", started(), "beta_operator")
    assert elsewhere.status_code == 201
    assert elsewhere.json()["run_id"] != body["run_id"]

    position = api.position()
    other = api.post("/v1/runs", started(job_id=body["run_id"], input="something else"))
    assert_error(other, 409, "CONFLICT", f"run {body['run_id']} already exists with another start")
    assert api.position() == position
    named = api.post("/v1/runs", started(job_id="ext-1"))
    assert named.json() == {"run_id": "ext-1", "status": "open", "events": 0}
    position = api.position()
    assert_error(
        api.post("/v1/runs", started(job_id="ext-1", seed=8)),
        409,
        "CONFLICT",
        "run ext-1 already exists with another start",
    )
    assert api.position() == position


def test_open_run_for_an_existing_job_conflicts(api: Api) -> None:
    api.new_job(job_id="job-1")
    before = api.position()
    assert_error(
        api.post("/v1/runs", started(job_id="job-1")), 409, "CONFLICT", "job job-1 already exists"
    )
    assert api.position() == before
    assert_error(api.get("/v1/runs/job-1"), 404, "NOT_FOUND", "no run job-1")


# --- runs: batches ------------------------------------------------------------------------------


def test_batches_count_accepted_and_duplicates_and_resends_store_nothing(api: Api) -> None:
    run_id = api.open_run(started())
    batch = [stage_event("e1", "plan"), stage_event("e2", "act")]
    first = api.send(run_id, batch)
    assert first.status_code == 200
    assert first.json() == {"run_id": run_id, "accepted": 2, "duplicates": 0, "events": 2}
    position = api.position()

    resent = api.send(run_id, batch)
    assert resent.json() == {"run_id": run_id, "accepted": 0, "duplicates": 2, "events": 2}
    assert api.position() == position

    mixed = api.send(run_id, [stage_event("e2", "act"), stage_event("e3", "check")])
    assert mixed.json() == {"run_id": run_id, "accepted": 1, "duplicates": 1, "events": 3}
    assert api.position() == position + 2  # the new event, in the run's job; the batch's index
    assert api.get(f"/v1/runs/{run_id}").json() == {
        "run_id": run_id,
        "status": "open",
        "events": 3,
    }


@pytest.mark.parametrize("where", ["held-before", "within-the-batch"])
def test_an_event_id_reused_for_other_content_stores_nothing_of_its_batch(
    api: Api, where: str
) -> None:
    run_id = api.open_run(started())
    assert api.send(run_id, [stage_event("e1", "plan")]).status_code == 200
    before = api.position()
    if where == "held-before":
        batch = [stage_event("e2", "act"), stage_event("e1", "not plan")]
        message = "events[1].event_id 'e1' was sent before with other content"
    else:
        batch = [stage_event("e2", "act"), stage_event("e2", "not act")]
        message = "events[1].event_id 'e2' was sent before with other content"
    assert_error(api.send(run_id, batch), 409, "CONFLICT", message)
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 1
    # e2 was not kept: sending it now adds it.
    again = api.send(run_id, [stage_event("e2", "act")])
    assert again.json() == {"run_id": run_id, "accepted": 1, "duplicates": 0, "events": 2}


def test_batch_and_run_limits_answer_413_and_store_nothing(limited_api: Api) -> None:
    api = limited_api
    run_id = api.open_run(started())
    before = api.position()
    four = [stage_event(f"e{i}") for i in range(1, 5)]
    assert_error(
        api.send(run_id, four),
        413,
        "PAYLOAD_TOO_LARGE",
        "batch of 4 events: at most 3 (MACE_MAX_BATCH_EVENTS)",
    )
    assert api.position() == before

    assert api.send(run_id, four[:3]).json()["events"] == 3
    before = api.position()
    three_more = [stage_event(f"e{i}") for i in range(4, 7)]
    assert_error(
        api.send(run_id, three_more),
        413,
        "PAYLOAD_TOO_LARGE",
        f"run {run_id} would exceed 5 events (MACE_MAX_RUN_EVENTS)",
    )
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 3
    assert api.send(run_id, three_more[:2]).json()["events"] == 5


def test_a_run_s_bytes_are_limited_across_batches_413_storing_nothing(limited_api: Api) -> None:
    """Each body within its limit, the run not: the run byte limit ``mace ingest`` and the Python
    API hold a run to (MACE_MAX_RUN_BYTES) holds here too."""
    api = limited_api
    run_id = api.open_run(started())

    def error(n: int) -> dict[str, Any]:
        return {
            "event_id": f"e{n}",
            "event": {"type": "ErrorEvent", "code": "E", "message": "m" * 900},
        }

    for n in range(4):
        assert api.send(run_id, [error(n)]).status_code == 200
    before = api.position()
    assert_error(
        api.send(run_id, [error(4)]),
        413,
        "PAYLOAD_TOO_LARGE",
        f"run {run_id} holds more than 4096 bytes of events (MACE_MAX_RUN_BYTES)",
    )
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 4


def _padded_batch(size: int) -> bytes:
    """A valid one-event batch of exactly ``size`` bytes."""
    head = (
        b'{"events":[{"event_id":"e1","event":{"type":"StageTransition","to_stage":"a","reason":"'
    )
    tail = b'"}}]}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


BODY_TOO_LARGE = "request body larger than 2048 bytes (MACE_MAX_BODY_BYTES)"


def test_body_over_the_limit_with_content_length_is_413(limited_api: Api) -> None:
    api = limited_api
    run_id = api.open_run(started())
    before = api.position()
    headers = {**auth("operator"), "content-type": "application/json"}
    over = _padded_batch(2049)
    response = api.client.post(f"/v1/runs/{run_id}/events", content=over, headers=headers)
    assert_error(response, 413, "PAYLOAD_TOO_LARGE", BODY_TOO_LARGE)
    assert api.position() == before
    # A declared length that is not a number is refused the same way.
    lying = {**headers, "content-length": "lots"}
    response = api.client.post(f"/v1/runs/{run_id}/events", content=b"{}", headers=lying)
    assert_error(response, 413, "PAYLOAD_TOO_LARGE", BODY_TOO_LARGE)

    exactly = api.client.post(
        f"/v1/runs/{run_id}/events", content=_padded_batch(2048), headers=headers
    )
    assert exactly.json()["accepted"] == 1


def _chunks(body: bytes, size: int = 256) -> Iterator[bytes]:
    """The body streamed in pieces: sent chunked, without a Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_chunked_body_within_the_limit_is_read(limited_api: Api) -> None:
    api = limited_api
    run_id = api.open_run(started())
    response = api.client.post(
        f"/v1/runs/{run_id}/events",
        content=_chunks(_padded_batch(2000)),
        headers={**auth("operator"), "content-type": "application/json"},
    )
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.request.headers
    assert response.json()["accepted"] == 1


def test_chunked_body_over_the_limit_is_413(limited_api: Api) -> None:
    api = limited_api
    run_id = api.open_run(started())
    before = api.position()
    response = api.client.post(
        f"/v1/runs/{run_id}/events",
        content=_chunks(_padded_batch(4096)),
        headers={**auth("operator"), "content-type": "application/json"},
    )
    assert api.position() == before
    assert_error(response, 413, "PAYLOAD_TOO_LARGE", BODY_TOO_LARGE)


# --- runs: complete -----------------------------------------------------------------------------


def test_completed_run_is_a_sealed_job_and_takes_no_more_events(api: Api) -> None:
    run_id = api.open_run(started(job_id="ext-1", snapshot_ids=DEFAULT_IDS, capture_mode="full_io"))
    items = [
        stage_event("s1", "plan"),
        {
            "event_id": "t1",
            "event": {
                "type": "ToolCall",
                "call_id": "c1",
                "tool": "search",
                "tool_schema_hash": hash_of("schema"),
                "arguments": {"q": "hello"},
                "request_hash": hash_of({"q": "hello"}),
            },
        },
        {
            "event_id": "t2",
            "event": {"type": "ToolResult", "call_id": "c1", "status": "ok", "result": ["hi"]},
        },
    ]
    assert api.send(run_id, items[:2]).status_code == 200
    assert api.send(run_id, items[2:]).status_code == 200

    done = api.post(f"/v1/runs/{run_id}/complete", {"final_output": {"answer": "hi"}})
    assert done.status_code == 200
    summary = done.json()
    assert (summary["job_id"], summary["events"]) == ("ext-1", 3)
    assert set(summary) == {"job_id", "events", "replayable", "missing_artifacts"}
    position = api.position()

    # The same completion again: the same answer, nothing stored.
    again = api.post(f"/v1/runs/{run_id}/complete", {"final_output": {"answer": "hi"}})
    assert (again.status_code, again.content) == (200, done.content)
    assert api.position() == position
    assert_error(
        api.post(f"/v1/runs/{run_id}/complete", {"final_output": {"answer": "bye"}}),
        409,
        "CONFLICT",
        "run ext-1 was already completed with another final output",
    )
    assert_error(
        api.send(run_id, [stage_event("late")]),
        409,
        "CONFLICT",
        "run ext-1 is complete: no more events may be added",
    )
    assert api.position() == position
    assert api.get(f"/v1/runs/{run_id}").json() == {
        "run_id": "ext-1",
        "status": "completed",
        "events": 3,
    }

    listing = api.get("/v1/jobs").json()
    assert listing["total"] == 1
    (job,) = listing["jobs"]
    assert (job["job_id"], job["status"], job["capture_mode"]) == ("ext-1", "sealed", "full_io")
    assert job["replayable"] == summary["replayable"]

    events = api.get("/v1/jobs/ext-1/events").json()
    assert events["job_id"] == "ext-1"
    entries = events["events"]
    assert [e["event_type"] for e in entries] == [
        "JobStarted",
        "StageTransition",
        "ToolCall",
        "ToolResult",
        "JobCompleted",
        "JobSealed",
    ]
    assert [e["version"] for e in entries] == list(range(1, 7))
    assert [e["sequence_index"] for e in entries[1:-1]] == [0, 1, 2, 3]
    assert entries[0]["payload"]["tenant"] == "acme"
    assert entries[2]["payload"]["arguments"] == {"q": "hello"}
    assert entries[3]["payload"]["response_hash"] == hash_of(["hi"])
    assert entries[4]["payload"]["final_output"] == {"answer": "hi"}
    assert entries[-1]["payload"]["event_count"] == 5

    job_log = api.get("/v1/jobs/ext-1").json()
    assert (job_log["job_id"], job_log["status"]) == ("ext-1", "sealed")


def test_completed_run_at_the_run_limit_still_answers_409(limited_api: Api) -> None:
    api = limited_api
    run_id = api.open_run(started())
    assert api.send(run_id, [stage_event(f"e{i}") for i in range(3)]).status_code == 200
    assert api.send(run_id, [stage_event(f"e{i}") for i in range(3, 5)]).status_code == 200
    assert api.post(f"/v1/runs/{run_id}/complete", {"final_output": "x"}).status_code == 200
    assert_error(
        api.send(run_id, [stage_event("late")]),
        409,
        "CONFLICT",
        f"run {run_id} is complete: no more events may be added",
    )


# --- a run over HTTP is the same job as `mace ingest` makes -------------------------------------

INGEST_PROMPT = {"messages": [{"role": "user", "content": "hello"}]}
INGEST_RUN: list[dict[str, Any]] = [
    {
        "type": "RunStarted",
        "job_id": "ext-1",
        "seed": "ing-1",
        "input": "say hello",
        "snapshot_ids": DEFAULT_IDS,
        "capture_mode": "full_io",
    },
    {"type": "StageTransition", "to_stage": "answer"},
    {
        "type": "ModelCallEnvelope",
        "call_id": "c1",
        "model_id": "m",
        "model_version": "1",
        "prompt_bundle_hash": "b" * 64,
        "temperature": 0.2,
        "prompt": INGEST_PROMPT,
        "response": {"text": "hi there"},
    },
    {"type": "GateDecision", "gate": "safety", "decision": "allow"},
    {"type": "RunCompleted", "final_output": "hi there"},
]


@pytest.fixture
def second_store_url(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Another empty store of the same kind as ``store_url``."""
    if store_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path}/second.db"
    make: Callable[[], str] = request.getfixturevalue("make_postgres_database")
    return make()


def test_a_run_over_http_is_byte_identical_to_mace_ingest(
    api: Api,
    settings: Settings,
    second_store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Both stores hold the default snapshots, so both judge replayability alike.
    for kind, snapshot in default_snapshots().items():
        stored = api.post("/v1/snapshots", {"kind": kind.value, "payload": snapshot.payload})
        assert stored.json()["snapshot_id"] == DEFAULT_IDS[kind.value]
    other_settings = Settings(
        store=second_store_url,
        signing_keys=signing_keys("k1"),
        active_key_id="k1",
        checkpoint_key=TEST_CHECKPOINT_KEY,
    )
    with Ledger.open(other_settings) as other:
        other.snapshots.default_ids()

    # Over HTTP, as the default tenant, in two batches.
    who = "default_operator"
    run_id = api.open_run(INGEST_RUN[0], who)
    items = [{"event_id": f"ev-{i}", "event": e} for i, e in enumerate(INGEST_RUN[1:-1])]
    assert api.send(run_id, items[:1], who).status_code == 200
    assert api.send(run_id, items, who).json()["duplicates"] == 1
    completed = api.post(f"/v1/runs/{run_id}/complete", {"final_output": "hi there"}, who)

    # With `mace ingest`, the same lines, into the other store.
    run_file = tmp_path / "run.jsonl"
    run_file.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in INGEST_RUN))
    monkeypatch.setenv("MACE_STORE", second_store_url)
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k1").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k1")
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(TEST_CHECKPOINT_KEY))
    code, out, err = run(capsys, "ingest", str(run_file), "--json")
    assert (code, err) == (0, "")
    ingested = orjson.loads(out)
    assert ingested.pop("duplicate") is False  # what only `mace ingest` says
    assert canonical_json(ingested) == completed.content
    code, out, err = run(capsys, "events", "ext-1", "--json")
    assert (code, err) == (0, "")

    over_http = api.get("/v1/jobs/ext-1/events", who).json()["events"]
    assert [canonical_json(e) for e in over_http] == [line.encode() for line in out.splitlines()]
    stream = Job.id_for("ext-1")
    assert RawTable(settings).rows(stream) == RawTable(other_settings).rows(stream)
    with Ledger.open(other_settings) as other:
        assert api.ledger.jobs.stream("ext-1") == other.jobs.stream("ext-1")


# --- replays ------------------------------------------------------------------------------------

REPLAY_KEYS = {"job_id", "attempt", "ok", "authoritative", "error", "report", "report_markdown"}


def test_replays_over_http_are_recorded_as_the_caller(api: Api) -> None:
    job_id = api.new_job(capture_mode="full_io")  # replayed in production below
    for attempt, (mode, who) in enumerate(
        [("audit", "operator"), ("production", "admin_auditor")], start=1
    ):
        response = api.replay(job_id, mode, who)
        assert response.status_code == 200
        body = response.json()
        assert set(body) == REPLAY_KEYS
        assert (body["job_id"], body["attempt"], body["ok"]) == (job_id, attempt, True)
        assert (body["authoritative"], body["error"]) == (True, None)
        report = body["report"]
        assert report["actor"] == CALLERS[who].actor
        assert (report["mode"], report["attempt"], report["error_code"]) == (mode, attempt, None)
        assert body["report_markdown"].startswith(
            f"# Replay report: job `{job_id}`, attempt {attempt}\n"
        )
        record = api.get(f"/v1/jobs/{job_id}/replays/{attempt}", "auditor")
        assert record.status_code == 200
        stored = record.json()
        assert (stored["job_id"], stored["attempt"], stored["mode"]) == (job_id, attempt, mode)
        assert stored["replay_id"] == f"{job_id}#{attempt}"
        assert stored["report"] == report
        assert stored["report_markdown"] == body["report_markdown"]
        assert stored["steps"][0]["step"] == "1 load reflective log"

    log = api.governance(job_id)
    replays = [e for e in log if e["event"] in {"REPLAY_REQUEST", "REPLAY_RESULT"}]
    assert [(e["event"], e["attempt"]) for e in replays] == [
        ("REPLAY_REQUEST", 1),
        ("REPLAY_RESULT", 1),
        ("REPLAY_REQUEST", 2),
        ("REPLAY_RESULT", 2),
    ]
    first, _, second, _ = replays
    assert (first["actor_id"], first["roles"], first["mode"]) == ("olga", ["operator"], "audit")
    assert (second["actor_id"], second["roles"], second["mode"]) == (
        "ana",
        ["admin", "auditor"],
        "production",
    )
    assert all(e["ok"] is True for e in replays if e["event"] == "REPLAY_RESULT")
    assert_error(api.get(f"/v1/jobs/{job_id}/replays/3"), 404, "NOT_FOUND", f"no replay {job_id}#3")


def test_production_replay_by_a_council_member_is_403_and_recorded(api: Api) -> None:
    job_id = api.new_job()
    before = api.position()
    response = api.replay(job_id, "production", "council")
    message = (
        "production replay needs an actor holding admin and auditor, or a council approval"
        " of production_replay for this job; cleo holds ['council']"
    )
    assert response.status_code == 403
    body = response.json()
    assert set(body) == REPLAY_KEYS
    assert body["error"] == {"code": ACCESS_DENIED, "message": message}
    assert (body["ok"], body["authoritative"], body["attempt"]) == (False, False, 1)
    assert body["report"]["actor"] == CALLERS["council"].actor
    assert body["report"]["steps"] == [
        {"step": "access", "outcome": "failed", "detail": f"ACCESS_DENIED: {message}"}
    ]
    assert api.position() > before  # the refused attempt is on record
    request, result = [
        e for e in api.governance(job_id) if e["event"] in {"REPLAY_REQUEST", "REPLAY_RESULT"}
    ]
    assert (request["actor_id"], request["roles"], request["mode"]) == (
        "cleo",
        ["council"],
        "production",
    )
    assert (result["attempt"], result["ok"], result["error_code"]) == (1, False, ACCESS_DENIED)
    assert api.get(f"/v1/jobs/{job_id}/replays/1").json()["report"] == body["report"]

    # Audit and reexecute replays are not the council's either.
    for attempt, mode in enumerate(("audit", "reexecute"), start=2):
        refused = api.replay(job_id, mode, "council")
        assert refused.status_code == 403
        assert refused.json()["attempt"] == attempt
        assert refused.json()["error"] == {
            "code": ACCESS_DENIED,
            "message": f"{mode} replay needs one of the roles ['admin', 'auditor', 'operator'];"
            " cleo holds ['council']",
        }


def test_a_tampered_job_fails_closed_over_http(api: Api, raw_table: RawTable) -> None:
    job_id = api.new_job()
    stream = Job.id_in("acme", job_id)
    state = bytearray(raw_table.state(stream, 2))
    state[-3] ^= 0x01
    raw_table.set_column(stream, 2, "state", bytes(state))
    failure = f"stream {stream} version 2: MAC mismatch"

    for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events"):
        assert_error(api.get(path), 500, "INTEGRITY_FAILURE", failure)

    response = api.replay(job_id)
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["error"]["code"]) == (False, "INTEGRITY_FAILURE")
    assert failure in body["error"]["message"]
    # The attempt is on record; the job's governance log, which reads the job, fails closed.
    record = api.get(f"/v1/jobs/{job_id}/replays/1").json()
    assert record["report"] == body["report"]
    assert_error(api.get(f"/v1/jobs/{job_id}/governance"), 500, "INTEGRITY_FAILURE", failure)


def test_replay_of_an_unknown_job_or_with_misplaced_mocks_writes_nothing(api: Api) -> None:
    job_id = api.new_job()
    before = api.position()
    assert_error(api.replay("no-such-job"), 404, "NOT_FOUND", "no job no-such-job")
    assert_error(
        api.replay(job_id, "reexecute", mocks={"wizard_agent": {"text": "x"}}),
        422,
        "INVALID_INPUT",
    )
    assert_error(
        api.replay(job_id, "audit", mocks={"math_agent": {"text": "x"}}), 422, "INVALID_INPUT"
    )
    assert api.position() == before


# --- governance over HTTP -----------------------------------------------------------------------

WRONG_DECISION = {
    "agent": "generic_agent",
    "fallback": None,
    "rule_id": "R4",
    "why": "matched_R4_fallback",
}


def _record_diverging_run(api: Api, real_job: str, run_id: str) -> None:
    """Record over HTTP the real job's run with a router decision R1 would never give."""
    entries = api.get(f"/v1/jobs/{real_job}/events").json()["events"]
    first = entries[0]["payload"]
    api.open_run(
        {
            "type": "RunStarted",
            "job_id": run_id,
            "seed": first["job_seed"],
            "input": first["job_input"],
            "snapshot_ids": first["snapshot_ids"],
            "capture_mode": "full_io",
        }
    )
    items = []
    for entry in entries[1:]:
        if entry["event_type"] in {"JobCompleted", "JobSealed"}:
            continue
        event = {"type": entry["event_type"], **entry["payload"]}
        if entry["event_type"] == "RouterDecision":
            event.update(WRONG_DECISION)
        if entry["event_type"] == "IterationTrace":
            event["router_decision"] = WRONG_DECISION
        items.append({"event_id": f"ev-{entry['sequence_index']}", "event": event})
    assert api.send(run_id, items).json()["accepted"] == len(items)
    final = next(e for e in entries if e["event_type"] == "JobCompleted")["payload"]
    done = api.post(f"/v1/runs/{run_id}/complete", {"final_output": final["final_output"]})
    assert done.json()["replayable"] is True


def test_governance_flow_force_continue_halt_and_clear(api: Api) -> None:
    real = api.new_job(capture_mode="full_io")  # its run is recorded again as full_io below
    _record_diverging_run(api, real, "diverged-1")
    differs = "iteration 0: router_decision differs from the record"

    diverged = api.replay("diverged-1").json()
    assert diverged["error"] == {"code": "REPLAY_DIVERGENCE", "message": differs}
    required = api.replay("diverged-1", force_continue=True).json()
    assert required["error"]["code"] == "FORCE_CONTINUE_REQUIRED"

    # An admin asks; a vote by anyone but the council is refused; the council approves.
    request = api.post(
        "/v1/jobs/diverged-1/governance/force-continue", {"reason": "router drift"}, "admin"
    )
    assert request.status_code == 201
    assert request.json() == {
        "job_id": "diverged-1",
        "requested": "force_continue",
        "by": CALLERS["admin"].actor,
    }
    vote = {"motion": "force_continue", "vote": "approve"}
    before = api.position()
    for who in ("operator", "admin", "auditor", "admin_auditor"):
        refused = api.post("/v1/jobs/diverged-1/governance/votes", vote, who)
        caller = CALLERS[who]
        assert_error(
            refused,
            403,
            ACCESS_DENIED,
            f"only the council role may vote; {caller.actor_id} holds {list(caller.roles)}",
        )
    assert api.position() == before
    approved = api.post("/v1/jobs/diverged-1/governance/votes", vote, "council")
    assert approved.status_code == 201
    assert approved.json() == {
        "job_id": "diverged-1",
        "motion": "force_continue",
        "vote": "approve",
        "by": CALLERS["council"].actor,
    }
    forced = api.replay("diverged-1", force_continue=True).json()
    assert (forced["ok"], forced["authoritative"]) == (False, False)
    assert forced["error"] == {
        "code": "REPLAY_DIVERGENCE",
        "message": "forced replay found 2 divergence(s)",  # the trace's route and the event's
    }
    assert forced["report"]["non_authoritative_reasons"] == [
        "forced past divergences with a council-approved force-continue"
    ]

    # A halt on the router snapshot stops replays of the real job until the council clears it.
    assert api.replay(real).json()["ok"] is True
    halted = api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {"reason": "key leak"}, "operator")
    assert halted.status_code == 201
    stopped = api.replay(real).json()
    assert stopped["ok"] is False
    assert stopped["error"] == {
        "code": "FORCE_HALT_REPLAY",
        "message": f"router snapshot {ROUTER_ID} is halted (SECURITY_INCIDENT: key leak) until"
        " the council appends FORCE_HALT_CLEAR",
    }
    before = api.position()
    for who in ("operator", "admin", "admin_auditor"):
        caller = CALLERS[who]
        assert_error(
            api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, who),
            403,
            ACCESS_DENIED,
            f"only the council role may clear a halt; {caller.actor_id} holds {list(caller.roles)}",
        )
    assert api.position() == before
    cleared = api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, "council")
    assert cleared.status_code == 200
    assert cleared.json() == {
        "snapshot_id": ROUTER_ID,
        "halted": False,
        "tenant": "acme",
        "by": CALLERS["council"].actor,
    }
    again = api.replay(real).json()
    assert (again["ok"], again["error"], again["authoritative"]) == (True, None, True)

    # Clearing again breaks a rule (nothing is halted): 422, nothing written.
    before = api.position()
    assert_error(
        api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, "council"),
        422,
        "INVALID_INPUT",
        f"snapshot {ROUTER_ID} is not halted in scope tenant-snapshot:acme|{ROUTER_ID}",
    )
    assert api.position() == before

    log = api.governance(real)
    scope = f"tenant-snapshot:{ROUTER_ID}"  # acme's halts, as acme sees its job's log
    halts = [(e["event"], e.get("actor_id")) for e in log if e["scope"] == scope]
    assert halts == [
        ("GOVERNANCE_OPENED", None),
        ("FORCE_HALT_REPLAY", "olga"),
        ("FORCE_HALT_CLEAR", "cleo"),
    ]
    job_log = [(e["event"], e.get("actor_id")) for e in api.governance("diverged-1")]
    assert ("FORCE_CONTINUE_REQUEST", "adam") in job_log
    assert ("COUNCIL_VOTE", "cleo") in job_log


def test_governance_rule_violations_answer_422_and_write_nothing(api: Api) -> None:
    job_id = api.new_job()
    path = f"/v1/jobs/{job_id}/governance"
    assert api.post(f"{path}/force-continue", {"reason": "r"}, "admin_council").status_code == 201
    before = api.position()
    # Four eyes: the admin who asked may not also be the council member who approves.
    assert_error(
        api.post(f"{path}/votes", {"motion": "force_continue", "vote": "approve"}, "admin_council"),
        422,
        "INVALID_INPUT",
        "ada requested this force-continue: the council approval must come from someone else",
    )
    assert api.position() == before
    # Rejecting it is still theirs to do.
    rejected = api.post(
        f"{path}/votes", {"motion": "force_continue", "vote": "reject"}, "admin_council"
    )
    assert rejected.status_code == 201


# --- snapshots ----------------------------------------------------------------------------------


def test_snapshots_put_get_idempotent_and_invalid_ids(api: Api) -> None:
    declaration = {"kind": "router", "payload": ONE_RULE_ROUTER, "schema_version": 2}
    declared = Snapshot.declare("router", ONE_RULE_ROUTER, 2, None)
    created = api.post("/v1/snapshots", declaration)
    assert created.status_code == 201
    assert created.json() == {
        "snapshot_id": declared.snapshot_id,
        "kind": "router",
        "created": True,
    }
    position = api.position()
    again = api.post("/v1/snapshots", declaration, "admin")
    assert again.status_code == 200
    assert again.json() == {"snapshot_id": declared.snapshot_id, "kind": "router", "created": False}
    assert api.position() == position

    shown = api.get(f"/v1/snapshots/{declared.snapshot_id}", "council")
    assert shown.status_code == 200
    assert shown.json() == declared.as_json()

    for bad in ("nothex", declared.snapshot_id.upper(), declared.snapshot_id[:-1]):
        assert_error(
            api.get(f"/v1/snapshots/{bad}"),
            422,
            "INVALID_INPUT",
            f"path.snapshot_id: invalid snapshot id {bad!r}: expected 64 lowercase hex characters",
            "path.snapshot_id",
        )
    unknown = "a" * 64
    assert_error(api.get(f"/v1/snapshots/{unknown}"), 404, "NOT_FOUND", f"no snapshot {unknown}")
    assert api.position() == position


# --- 422: malformed bodies write nothing --------------------------------------------------------

NAN_TEMPERATURE = (
    b'{"events":[{"event_id":"e1","event":{"type":"ModelCallEnvelope","call_id":"c",'
    b'"model_id":"m","model_version":"1","prompt_bundle_hash":"' + b"b" * 64 + b'",'
    b'"temperature":%s,"prompt":"p","response":"r"}}]}'
)
TEMPERATURE_FIELD = "body.events.0.event.ModelCallEnvelope.temperature"

# name: (path, body (dict) or raw bytes, field)
MALFORMED: dict[str, tuple[str, dict[str, Any] | bytes, str]] = {
    "job-seed-float": ("/v1/jobs", {"input": "2 + 3", "seed": 1.5}, "body.seed.int"),
    "job-seed-bool": ("/v1/jobs", {"input": "2 + 3", "seed": True}, "body.seed.int"),
    "job-missing-input": ("/v1/jobs", {"seed": "s1"}, "body.input"),
    "job-extra-field": ("/v1/jobs", {"input": "x", "seed": "s", "priority": 1}, "body.priority"),
    "job-capture-mode": (
        "/v1/jobs",
        {"input": "x", "seed": "s", "capture_mode": "everything"},
        "body.capture_mode",
    ),
    "job-snapshot-id": (
        "/v1/jobs",
        {"input": "x", "seed": "s", "snapshot_ids": {"router": "zz"}},
        "body.snapshot_ids.router",
    ),
    "run-input-int": ("/v1/runs", {"type": "RunStarted", "seed": 7, "input": 5}, "body.input"),
    "run-missing-seed": ("/v1/runs", {"type": "RunStarted", "input": "x"}, "body.seed"),
    "run-extra-field": ("/v1/runs", started(colour="red"), "body.colour"),
    "events-wrong-type": (
        "/v1/runs/{run}/events",
        {"events": [{"event_id": "e1", "event": {"type": "ToolCall", "call_id": 5}}]},
        "body.events.0.event.ToolCall.call_id",
    ),
    "events-unknown-type": (
        "/v1/runs/{run}/events",
        {"events": [{"event_id": "e1", "event": {"type": "Bogus"}}]},
        "body.events.0.event",
    ),
    "events-bad-event-id": (
        "/v1/runs/{run}/events",
        {
            "events": [
                {"event_id": "bad id!", "event": {"type": "StageTransition", "to_stage": "a"}}
            ]
        },
        "body.events.0.event_id",
    ),
    "events-empty": ("/v1/runs/{run}/events", {"events": []}, "body.events"),
    "events-missing": ("/v1/runs/{run}/events", {}, "body.events"),
    "events-extra-field": (
        "/v1/runs/{run}/events",
        {"events": [stage_event("e1")], "priority": 1},
        "body.priority",
    ),
    "events-nan": ("/v1/runs/{run}/events", NAN_TEMPERATURE % b"NaN", TEMPERATURE_FIELD),
    "events-infinity": ("/v1/runs/{run}/events", NAN_TEMPERATURE % b"-Infinity", TEMPERATURE_FIELD),
    "events-overflow": ("/v1/runs/{run}/events", NAN_TEMPERATURE % b"1e999", TEMPERATURE_FIELD),
    "events-nan-string": ("/v1/runs/{run}/events", NAN_TEMPERATURE % b'"NaN"', TEMPERATURE_FIELD),
    "complete-missing-output": ("/v1/runs/{run}/complete", {}, "body.final_output"),
    "replay-mode": ("/replay/request", {"job_id": "{job}", "mode": "fast"}, "body.mode"),
    "replay-extra-field": ("/replay/request", {"job_id": "{job}", "user": "x"}, "body.user"),
    "vote-motion": (
        "/v1/jobs/{job}/governance/votes",
        {"motion": "bogus", "vote": "approve"},
        "body.motion",
    ),
    "force-continue-no-reason": ("/v1/jobs/{job}/governance/force-continue", {}, "body.reason"),
    "snapshot-payload-list": ("/v1/snapshots", {"kind": "router", "payload": []}, "body.payload"),
    "snapshot-kind": ("/v1/snapshots", {"kind": "bogus", "payload": {}}, "body.kind"),
    "snapshot-schema-version": (
        "/v1/snapshots",
        {"kind": "router", "payload": {}, "schema_version": 0},
        "body.schema_version",
    ),
}
CALLER_FOR = {
    "/v1/jobs/{job}/governance/votes": "council",
    "/v1/jobs/{job}/governance/force-continue": "admin",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_bodies_answer_422_with_the_field_and_write_nothing(api: Api, case: str) -> None:
    job_id = api.new_job()
    run_id = api.open_run(started())
    assert api.send(run_id, [stage_event("e0")]).status_code == 200
    template, body, field = MALFORMED[case]
    path = template.format(job=job_id, run=run_id)
    who = CALLER_FOR.get(template, "operator")
    before = api.position()
    if isinstance(body, bytes):
        headers = {**auth(who), "content-type": "application/json"}
        response: Response = api.client.post(path, content=body, headers=headers)
    else:
        filled = orjson.loads(orjson.dumps(body).replace(b"{job}", job_id.encode()))
        response = api.post(path, filled, who)
    message = assert_error(response, 422, "INVALID_INPUT", field=field)
    assert message.startswith(f"{field}: ")
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 1


def test_bodies_that_are_not_json_answer_422_and_write_nothing(api: Api) -> None:
    before = api.position()
    headers = {**auth("operator"), "content-type": "application/json"}
    for path in ("/v1/jobs", "/v1/runs", "/v1/snapshots"):
        response = api.client.post(path, content=b"not json {", headers=headers)
        assert_error(response, 422, "INVALID_INPUT", field=ANY_FIELD)
        assert response.json()["error"]["field"].startswith("body")
    assert api.position() == before


@pytest.mark.parametrize(
    "raw",
    [
        b'{"final_output": NaN}',
        b'{"final_output": [1, -Infinity]}',
        b'{"final_output": {"n": 12345678901234567890123}}',
    ],
    ids=["nan", "infinity-in-a-list", "integer-beyond-64-bit"],
)
def test_a_final_output_without_a_canonical_encoding_answers_422_and_writes_nothing(
    api: Api, raw: bytes
) -> None:
    run_id = api.open_run(started())
    before = api.position()
    headers = {**auth("operator"), "content-type": "application/json"}
    response = api.client.post(f"/v1/runs/{run_id}/complete", content=raw, headers=headers)
    message = assert_error(response, 422, "INVALID_INPUT", field=ANY_FIELD)
    assert response.json()["error"]["field"].startswith("body")
    assert "final_output" in message
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["status"] == "open"


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs"])
def test_an_invalid_job_id_answers_422_naming_body_job_id(api: Api, path: str) -> None:
    body = (
        {"input": "x", "seed": "s", "job_id": "bad id!"}
        if path == "/v1/jobs"
        else started(job_id="bad id!")
    )
    before = api.position()
    response = api.post(path, body)
    assert api.position() == before
    assert_error(response, 422, "INVALID_INPUT", field="body.job_id")


def test_an_invalid_job_id_in_a_path_answers_422_and_writes_nothing(api: Api) -> None:
    before = api.position()
    message = (
        "invalid job id 'bad id!': expected 1-128 characters of letters, digits and . _ : -,"
        " starting with a letter or digit"
    )
    for path in ("/v1/jobs/bad id!", "/v1/jobs/bad id!/events", "/v1/jobs/bad id!/governance"):
        assert_error(api.get(path), 422, "INVALID_INPUT", f"path.job_id: {message}", "path.job_id")
    replay = api.replay("bad id!")
    assert_error(replay, 422, "INVALID_INPUT", f"body.job_id: {message}", "body.job_id")
    assert api.position() == before


def test_unknown_paths_and_methods_answer_the_error_body(api: Api) -> None:
    assert_error(api.get("/v1/nothing-here"), 404, "NOT_FOUND")
    response = api.client.request("DELETE", "/healthz")
    assert response.status_code == 405
    assert set(response.json()) == {"error"}


def test_method_not_allowed_names_the_allowed_methods(api: Api) -> None:
    # HTTP requires a 405 to say, in Allow, which methods the resource takes.
    for method, path, allowed in (
        ("DELETE", "/healthz", {"GET"}),
        ("PUT", "/v1/jobs", {"GET", "POST"}),
    ):
        response = api.client.request(method, path)
        assert response.status_code == 405
        assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
        assert set(response.headers["Allow"].split(", ")) == allowed


def test_openapi_document_is_canonical_json(api: Api) -> None:
    with api.unchecked() as client:
        response = client.get("/openapi.json")
    assert response.content == canonical_json(response.json())


# --- /metrics -----------------------------------------------------------------------------------


def test_metrics_are_prometheus_text_counting_the_tenants_own_data(api: Api) -> None:
    fresh = api.get("/metrics")
    assert fresh.status_code == 200
    assert fresh.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    empty = parse_metrics(fresh.text)
    assert empty.types == {
        "mace_replay_attempts_total": "counter",
        "mace_replay_successes_total": "counter",
        "mace_replay_success_rate": "gauge",
        "mace_replay_mean_time_to_reproduce_seconds": "gauge",
        "mace_jobs": "gauge",
        "mace_jobs_not_replayable": "gauge",
    }
    assert empty.family("mace_replay_attempts_total") == {}
    assert math.isnan(empty.value("mace_replay_success_rate", tenant="acme"))
    assert math.isnan(empty.value("mace_replay_mean_time_to_reproduce_seconds", tenant="acme"))
    assert empty.value("mace_jobs", tenant="acme") == 0

    replayable = api.new_job(capture_mode="full_io")
    api.new_job("2 * 3", capture_mode="none")
    api.new_job("hello", "s3", who="beta_operator")
    assert api.replay(replayable, "audit", "operator").status_code == 200
    assert api.replay(replayable, "production", "admin_auditor").status_code == 200
    assert api.replay(replayable, "production", "council").status_code == 403

    metrics = parse_metrics(api.get("/metrics", "auditor").text)
    assert all(dict(labels)["tenant"] == "acme" for _, labels in metrics.samples)
    assert metrics.family("mace_replay_attempts_total") == {
        (("mode", "audit"), ("outcome", "ok"), ("tenant", "acme")): 1,
        (("mode", "production"), ("outcome", "ok"), ("tenant", "acme")): 1,
        (("mode", "production"), ("outcome", "refused"), ("tenant", "acme")): 1,
    }
    assert metrics.family("mace_replay_successes_total") == {
        (("mode", "audit"), ("tenant", "acme")): 1,
        (("mode", "production"), ("tenant", "acme")): 1,
    }
    # The refused replay never ran: the rate is over the two that did.
    assert metrics.value("mace_replay_success_rate", tenant="acme") == 1.0
    mean = metrics.value("mace_replay_mean_time_to_reproduce_seconds", tenant="acme")
    assert math.isfinite(mean) and mean >= 0
    assert metrics.value("mace_jobs", tenant="acme") == 2
    assert metrics.value("mace_jobs_not_replayable", tenant="acme") == 1

    beta = parse_metrics(api.get("/metrics", "beta_operator").text)
    assert all(dict(labels)["tenant"] == "beta" for _, labels in beta.samples)
    assert beta.value("mace_jobs", tenant="beta") == 1
    assert beta.family("mace_replay_attempts_total") == {}
    assert math.isnan(beta.value("mace_replay_success_rate", tenant="beta"))


# --- the tokens file ----------------------------------------------------------------------------

A_HASH = hashlib.sha256(b"a token").hexdigest()


def _entry(**overrides: Any) -> dict[str, Any]:
    return {"sha256": A_HASH, "actor_id": "ana", "roles": ["admin"], "tenant": "acme", **overrides}


TOKENS_FILE_CASES: dict[str, tuple[bytes | None, str]] = {
    "missing-file": (None, "cannot read tokens file {path}: No such file or directory"),
    "bad-json": (b'{"tokens": [', "tokens file {path} is not JSON: "),
    "duplicate-hash": (
        orjson.dumps({"tokens": [_entry(), _entry(actor_id="bob")]}),
        "tokens file {path} lists the same token twice",
    ),
    "unknown-role": (
        orjson.dumps({"tokens": [_entry(roles=["admin", "wizard"])]}),
        "tokens file {path}: field tokens[0].roles[1]: Input should be 'operator', 'admin',"
        " 'auditor', 'council' or 'store_operator'",
    ),
    "bad-hash": (
        orjson.dumps({"tokens": [_entry(sha256="abc")]}),
        "tokens file {path}: field tokens[0].sha256: ",
    ),
    "no-roles": (
        orjson.dumps({"tokens": [_entry(roles=[])]}),
        "tokens file {path}: field tokens[0].roles: ",
    ),
}


@pytest.mark.parametrize("case", sorted(TOKENS_FILE_CASES))
def test_unusable_tokens_files_raise_one_line_tokens_file_errors(tmp_path: Path, case: str) -> None:
    content, expected = TOKENS_FILE_CASES[case]
    path = tmp_path / "tokens.json"
    if content is not None:
        path.write_bytes(content)
    for load in (TokenBook.load, read_tokens_file):
        with pytest.raises(TokensFileError) as raised:
            load(path)
        message = str(raised.value)
        assert "\n" not in message
        assert message.startswith(expected.format(path=path)), message


@pytest.mark.parametrize("entry", [_entry(tenant="ACME"), _entry(actor_id="bad actor!")])
def test_tokens_file_errors_about_an_entry_name_the_file(
    tmp_path: Path, entry: dict[str, Any]
) -> None:
    path = tmp_path / "tokens.json"
    path.write_bytes(orjson.dumps({"tokens": [entry]}))
    with pytest.raises(TokensFileError, match=str(path)):
        TokenBook.load(path)


def test_token_book_names_the_principal_of_a_token_and_no_other() -> None:
    book = token_book()
    assert len(book) == len(CALLERS)
    for caller in CALLERS.values():
        holder = book.holder(caller.token)
        assert holder is not None and holder.expires_at is None
        principal = holder.principal
        assert (principal.actor.actor_id, principal.tenant) == (caller.actor_id, caller.tenant)
        assert list(principal.actor.roles) == sorted(caller.roles)
    assert book.holder("") is None
    assert book.holder(CALLERS["operator"].token.upper()) is None


# --- tokens change while the service runs -------------------------------------------------------


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    return tmp_path / "tokens.json"


def served(settings: Settings, ledger: Ledger, tokens: Tokens) -> TestClient:
    """The real app over ``ledger``, with the tokens it is given (a watched file, here)."""
    return TestClient(create_app(settings, tokens, ledger))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_revoked_token_is_refused_and_a_new_one_accepted_without_a_restart(
    settings: Settings, ledger: Ledger, tokens_file: Path
) -> None:
    ana = add_token(tokens_file, "ana", ["admin", "operator"], "acme")
    olga = add_token(tokens_file, "olga", ["operator"], "acme")
    with served(settings, ledger, WatchedTokensFile(tokens_file, 0)) as client:
        assert client.get("/v1/jobs", headers=bearer(olga)).status_code == 200
        revoked = revoke_token(tokens_file, token_id_of(olga))
        assert (revoked.actor_id, revoked.tenant) == ("olga", "acme")
        refused = client.get("/v1/jobs", headers=bearer(olga))
        assert_error(refused, 401, "UNAUTHENTICATED", "the bearer token is not valid")
        # The dashboard refuses it too (the sessions it opened end with it: test_sessions.py).
        page = client.get("/dashboard", headers=bearer(olga))
        assert page.status_code == 401
        assert client.get("/v1/jobs", headers=bearer(ana)).status_code == 200

        gus = add_token(tokens_file, "gus", ["operator"], "globex")
        assert client.get("/v1/jobs", headers=bearer(gus)).status_code == 200
        assert client.get("/readyz", headers=bearer(ana)).json()["tokens"] == 2


def test_a_tokens_file_that_becomes_unusable_refuses_every_token_until_it_is_fixed(
    settings: Settings,
    ledger: Ledger,
    tokens_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ana = add_token(tokens_file, "ana", ["admin"], "acme")
    good = tokens_file.read_bytes()
    with served(settings, ledger, WatchedTokensFile(tokens_file, 0)) as client:
        for broken in (b'{"tokens": [', None):
            if broken is None:
                tokens_file.unlink()
            else:
                tokens_file.write_bytes(broken)
            caplog.clear()
            for _ in range(2):
                response = client.get("/v1/jobs", headers=bearer(ana))
                assert_error(response, 401, "UNAUTHENTICATED", "the bearer token is not valid")
                ready = client.get("/readyz", headers=bearer(ana))
                assert (ready.status_code, ready.content) == (503, NOT_READY)
            (line,) = [r.getMessage() for r in caplog.records]  # once per change, not per request
            assert line.startswith(f"tokens file {tokens_file}" if broken else "cannot read")
            assert line.endswith(": no token is accepted until the tokens file is fixed")

        caplog.clear()
        tokens_file.write_bytes(good)
        assert client.get("/v1/jobs", headers=bearer(ana)).status_code == 200
        assert [r.getMessage() for r in caplog.records] == [
            f"tokens file {tokens_file} is usable again: 1 token(s)"
        ]


def test_the_tokens_file_is_looked_at_no_more_often_than_the_interval(tokens_file: Path) -> None:
    olga = add_token(tokens_file, "olga", ["operator"], "acme")
    now = [100.0]
    watched = WatchedTokensFile(tokens_file, 3, clock=lambda: now[0])
    revoke_token(tokens_file, token_id_of(olga))
    now[0] += 2.9
    assert watched.holder(olga) is not None  # not looked at again yet
    now[0] += 0.1
    assert watched.holder(olga) is None
    assert len(watched) == 0


# --- mace token new, mace serve -----------------------------------------------------------------


@pytest.fixture
def cli_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment for `mace` commands that do not need a ledger."""
    for name in list(os.environ):
        if name.startswith("MACE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/never-opened.db")
    return tmp_path


def test_mace_token_new_stores_only_a_hash_in_a_0600_file(
    cli_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = cli_home / "tokens.json"
    code, out, err = run(
        capsys,
        "token",
        "new",
        "--actor",
        "ana",
        "--roles",
        "auditor,admin",
        "--tenant",
        "acme",
        "--file",
        str(path),
    )
    assert out.count("\n") == 1
    token = out.strip()
    assert token.startswith("mace_") and len(token) > 40
    token_id = token_id_of(token)
    assert re.fullmatch(r"[0-9a-f]{16}", token_id)
    assert (code, err) == (
        0,
        f"mace: token {token_id} for ana (tenant acme), never expires;"
        f" 'mace token revoke {token_id}'"
        " removes it\n",
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    raw = path.read_bytes()
    assert token.encode() not in raw
    assert token[5:].encode() not in raw
    assert raw == canonical_json(orjson.loads(raw)) + b"\n"
    (entry,) = orjson.loads(raw)["tokens"]
    assert entry == {
        "sha256": hashlib.sha256(token.encode()).hexdigest(),
        "actor_id": "ana",
        "roles": ["admin", "auditor"],
        "tenant": "acme",
    }
    holder = TokenBook.load(path).holder(token)
    assert holder is not None
    assert (holder.principal.actor.actor_id, holder.principal.tenant) == ("ana", "acme")

    # A second token is added beside the first; MACE_TOKENS_FILE is the default file.
    monkeypatch.setenv("MACE_TOKENS_FILE", str(path))
    code, out, err = run(capsys, "token", "new", "--actor", "olga", "--roles", "operator")
    second = out.strip()
    assert (code, err.count("\n")) == (0, 1) and token_id_of(second) in err
    book = TokenBook.load(path)
    assert len(book) == 2
    again = book.holder(second)
    assert again is not None and again.principal.tenant == "default"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert second.encode() not in path.read_bytes()

    # Bad input: exit 2, one line, the file as it was.
    before = path.read_bytes()
    for argv, message in (
        (["--actor", "x", "--roles", "wizard"], "unknown role"),
        (["--actor", "bad actor!", "--roles", "admin"], "invalid actor id 'bad actor!'"),
        (["--actor", "x", "--roles", "admin", "--tenant", "ACME"], "invalid tenant 'ACME'"),
    ):
        code, out, err = run(capsys, "token", "new", *argv, "--file", str(path))
        assert (code, out) == (2, "")
        assert (
            err.count("\n") == 1 and err.startswith("mace: INVALID_INPUT: ") and message in err
        ), err
    assert path.read_bytes() == before


def test_mace_token_list_and_revoke(
    cli_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = cli_home / "tokens.json"
    monkeypatch.setenv("MACE_TOKENS_FILE", str(path))
    ana = add_token(path, "ana", ["auditor", "admin"], "acme", datetime(2031, 1, 2, tzinfo=UTC))
    olga = add_token(path, "olga", ["operator"], "default")
    ids = {"ana": token_id_of(ana), "olga": token_id_of(olga)}
    code, out, err = run(capsys, "token", "list")
    assert (code, err) == (0, "")
    assert out == (
        f"{ids['ana']} ana admin,auditor acme expires 2031-01-02T00:00:00Z\n"
        f"{ids['olga']} olga operator default never expires\n"
    )
    code, out, err = run(capsys, "token", "list", "--json")
    assert orjson.loads(out) == {
        "tokens": [
            {
                "id": ids["ana"],
                "actor_id": "ana",
                "roles": ["admin", "auditor"],
                "tenant": "acme",
                "expires_at": "2031-01-02T00:00:00Z",
            },
            {
                "id": ids["olga"],
                "actor_id": "olga",
                "roles": ["operator"],
                "tenant": "default",
                "expires_at": None,
            },
        ]
    }
    assert ana not in out and hashlib.sha256(ana.encode()).hexdigest() not in out

    # An unknown id: exit 2, one line, the file as it was.
    before = path.read_bytes()
    for unknown in ("0" * 16, "", ids["ana"][:8]):
        code, out, err = run(capsys, "token", "revoke", unknown)
        assert (code, out) == (2, "")
        assert err == (
            f"mace: INVALID_INPUT: no token {unknown!r} in tokens file {path}"
            " (see 'mace token list')\n"
        )
    assert path.read_bytes() == before

    code, out, err = run(capsys, "token", "revoke", ids["olga"])
    assert (code, out, err) == (0, f"revoked token {ids['olga']} of olga (tenant default)\n", "")
    book = TokenBook.load(path)
    assert (book.holder(olga), len(book)) == (None, 1)
    assert book.holder(ana) is not None
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert run(capsys, "token", "revoke", ids["olga"])[0] == 2


def tokens_in(cli_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tokens file of a clean environment, as MACE_TOKENS_FILE names it."""
    path = cli_home / "tokens.json"
    monkeypatch.setenv("MACE_TOKENS_FILE", str(path))
    return path


def test_a_new_token_expires_when_asked_and_says_so_in_json(
    cli_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens_file = tokens_in(cli_home, monkeypatch)
    before = datetime.now(UTC).replace(microsecond=0)
    code, out, err = run(
        capsys, "token", "new", "--actor", "olga", "--roles", "operator", "--tenant", "acme",
        "--expires-in", "30d", "--json",
    )  # fmt: skip
    after = datetime.now(UTC)
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    assert out.encode() == canonical_json(answer) + b"\n"
    token = answer["token"]
    expires = datetime.fromisoformat(answer["expires_at"])
    assert before + timedelta(days=30) <= expires <= after + timedelta(days=30)
    assert answer == {
        "token": token,
        "id": token_id_of(token),
        "actor_id": "olga",
        "roles": ["operator"],
        "tenant": "acme",
        "expires_at": answer["expires_at"],
    }
    assert answer["expires_at"].endswith("Z")
    holder = TokenBook.load(tokens_file).holder(token)
    assert holder is not None and holder.expires_at == expires

    code, out, _ = run(
        capsys, "token", "new", "--actor", "ana", "--roles", "auditor",
        "--expires-at", "2031-01-02T03:04:05+01:00",
    )  # fmt: skip
    holder = TokenBook.load(tokens_file).holder(out.strip())
    assert code == 0 and holder is not None
    assert holder.expires_at == datetime(2031, 1, 2, 2, 4, 5, tzinfo=UTC)

    code, out, _ = run(capsys, "token", "new", "--actor", "gus", "--roles", "operator", "--json")
    assert code == 0 and orjson.loads(out)["expires_at"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--expires-in", "30"], "--expires-in '30': expected a whole number and a unit"),
        (["--expires-in", "0d"], "--expires-in '0d': expected a duration above zero"),
        (["--expires-in=-1d"], "--expires-in '-1d': expected a whole number and a unit"),
        (["--expires-at", "2031-01-02"], "--expires-at '2031-01-02': expected an ISO-8601 instant"),
        (["--expires-at", "tomorrow"], "--expires-at 'tomorrow': expected an ISO-8601 instant"),
        (["--expires-at", "2001-01-02T00:00:00Z"], "--expires-at '2001-01-02T00:00:00Z': already"),
    ],
)
def test_a_bad_expiry_is_refused_in_one_line_and_nothing_is_written(
    cli_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    tokens_file = tokens_in(cli_home, monkeypatch)
    add_token(tokens_file, "olga", ["operator"], "acme")
    before = tokens_file.read_bytes()
    code, out, err = run(capsys, "token", "new", "--actor", "x", "--roles", "admin", *argv)
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: " + message) and err.count("\n") == 1, err
    assert tokens_file.read_bytes() == before


def test_expires_in_and_expires_at_are_one_or_the_other(
    cli_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens_file = tokens_in(cli_home, monkeypatch)
    argv = ["--expires-in", "1d", "--expires-at", "2031-01-02T00:00:00Z"]
    code, out, err = run(capsys, "token", "new", "--actor", "x", "--roles", "admin", *argv)
    assert (code, out) == (2, "") and "not allowed with argument" in err
    assert not tokens_file.exists()


def test_mace_serve_without_a_tokens_file_exits_2_with_one_line(
    cli_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "serve")
    assert (code, out) == (2, "")
    assert err == (
        "mace: INVALID_INPUT: set MACE_TOKENS_FILE (the service's bearer tokens;"
        " see 'mace token new')\n"
    )
    assert list(cli_home.iterdir()) == []


def test_mace_serve_with_an_unusable_tokens_file_exits_2_with_one_line(
    cli_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = cli_home / "tokens.json"
    path.write_bytes(b"[not json")
    monkeypatch.setenv("MACE_TOKENS_FILE", str(path))
    code, out, err = run(capsys, "serve", "--port", "1")
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: INVALID_INPUT: tokens file {path} is not JSON: ")
    assert err.count("\n") == 1


def test_mace_serve_answers_over_the_network(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token = add_token(tokens, "olga", ["operator"], "acme")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MACE_")}
    env |= {
        "MACE_STORE": f"sqlite:///{tmp_path}/served.db",
        "MACE_SIGNING_KEYS": signing_keys("k1").get_secret_value(),
        "MACE_ACTIVE_KEY_ID": "k1",
        "MACE_TOKENS_FILE": str(tokens),
        "MACE_TOKENS_RELOAD_SECONDS": "0",
    }
    mace = Path(sys.executable).with_name("mace")
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(mace), "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            health = wait_until_healthy(server, client)
            assert (health.status_code, health.content) == (200, b'{"status":"ok"}')
            assert client.get("/v1/jobs").status_code == 401
            headers = {"Authorization": f"Bearer {token}"}
            created = client.post(
                "/v1/jobs", json={"input": "2 + 3", "seed": "s1"}, headers=headers
            )
            assert created.status_code == 201
            assert created.content == canonical_json(created.json())
            job_id = created.json()["job_id"]
            assert created.json()["final_output"] == "2 + 3 = 5"
            shown = client.get(f"/v1/jobs/{job_id}", headers=headers)
            assert shown.status_code == 200
            assert (shown.json()["job_id"], shown.json()["status"]) == (job_id, "sealed")
            listed = client.get("/v1/jobs", headers=headers).json()
            assert [j["job_id"] for j in listed["jobs"]] == [job_id]
            # Revoked while it runs: refused at once, no restart.
            revoke_token(tokens, token_id_of(token))
            assert client.get("/v1/jobs", headers=headers).status_code == 401
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
            raise
        finally:
            log.close()
    # SIGTERM is how a service manager stops the service: a clean stop, after a graceful
    # shutdown, with the ledger closed.
    output = (tmp_path / "serve.log").read_text()
    assert code == 0, output
    assert "Application shutdown complete." in output
    assert (tmp_path / "served.db").exists()


def test_mace_serve_stopped_by_ctrl_c_exits_130(store_url: str, tmp_path: Path) -> None:
    # Ctrl-C stops `mace serve` as it stops every command: exit 130, "mace: interrupted".
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "olga", ["operator"], "acme")
    port = free_port()
    env = subprocess_env(store_url, MACE_TOKENS_FILE=str(tokens))
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            MACE_WITH_CTRL_C,
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            assert wait_until_healthy(server, client).status_code == 200
        server.send_signal(signal.SIGINT)
        output, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate(timeout=30)
    text = output.decode()
    assert server.returncode == 130, text
    assert "Application shutdown complete." in text
    assert text.rstrip().endswith("mace: interrupted")
