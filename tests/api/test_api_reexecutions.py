"""Re-execution over HTTP, on both stores: the service holds the harness and answers the agent's
calls (``POST /v1/reexecutions``, ``.../calls``, ``.../close``); the agent's side is the
``mace_harness`` client, here over the test client, so every answer is checked canonical and as
the OpenAPI document says. The agent is the one the in-process harness's tests re-execute."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any, cast

import httpx
import pytest
from mace_harness import Harness, HarnessError, ReplayDiverged, replay_harness
from support.api_support import CALLERS, Api, assert_error, checked_client
from support.harness_agent import RecordingBoundary, recorded
from support.ticket_agent import agent

from domain.events import RunStarted
from infrastructure.application.ledger import Ledger
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.storage.settings import Settings

TENANT = "acme"  # the tenant of the callers "operator" and "admin_auditor"
IDLE = 300.0  # the settings' default idle limit


class Clock:
    """The service's wall clock, moved by the test: idleness without waiting."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def served(settings: Settings, ledger: Ledger, clock: Clock) -> Iterator[Api]:
    with checked_client(settings, ledger, clock) as client:
        yield Api(client, ledger)


def over_http(
    api: Api, job_id: str, who: str = "operator", mode: str = "reexecute"
) -> AbstractContextManager[Harness]:
    # The in-process client speaks httpx's API (starlette's is httpx2's once that is installed).
    client = cast(httpx.Client, api.client)
    return replay_harness(client, CALLERS[who].token, job_id, mode=mode)


def results(api: Api, job_id: str) -> list[dict[str, Any]]:
    return [e for e in api.governance(job_id) if e["event"] == "REPLAY_RESULT"]


def opened(api: Api, job_id: str, who: str = "operator") -> str:
    answer = api.post("/v1/reexecutions", {"job_id": job_id}, who)
    assert answer.status_code == 201, answer.content
    assert answer.json()["idle_seconds"] == IDLE
    reexecution_id: str = answer.json()["reexecution_id"]
    return reexecution_id


PLAN = {
    "kind": "model",
    "model_id": "m-small",
    "prompt": {"role": "user", "content": "plan for 42"},
}


def test_the_unchanged_agent_reproduces_its_run_over_http(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)

    with over_http(served, job_id) as h:
        h.final_output(agent(h, "42"))

    assert h.result is not None
    outcome = h.result.outcome
    assert (outcome.ok, outcome.authoritative, outcome.error_code) == (True, True, None)
    assert [row["check"] for row in h.result.report["checks"]] == ["reexecuted"] * 4
    # Recorded as in process: the request as the token's caller, the result, the report.
    request, result = served.governance(job_id)
    assert (request["event"], request["mode"], request["actor_id"], request["roles"]) == (
        "REPLAY_REQUEST",
        "reexecute",
        "olga",
        ["operator"],
    )
    assert (result["ok"], result["authoritative"]) == (True, True)
    record = served.ledger.replays.record(job_id, 1, tenant=TENANT)
    assert record.report == h.result.report


def test_a_tool_called_with_other_arguments_diverges_at_that_step(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)
    reexecution_id = opened(served, job_id)
    calls = f"/v1/reexecutions/{reexecution_id}/calls"
    assert served.post(calls, PLAN).json() == {"answer": "check the docs"}

    changed = {"kind": "tool", "name": "search", "arguments": {"q": "42", "limit": 5}}
    answer = served.post(calls, changed)

    divergence = {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "tool_call.arguments",
        "recorded": {"q": "42"},
        "replayed": {"limit": 5, "q": "42"},
    }
    assert answer.status_code == 409, answer.content
    error = answer.json()["error"]
    assert (error["code"], error["divergence"]) == ("REPLAY_DIVERGENCE", divergence)
    assert error["message"].startswith(
        "call 2 (iteration 1): tool_call.arguments differs from the record; "
    )
    assert '"field":"tool_call.arguments"' in error["message"]  # the canonical diff, one line
    # As in process: code that carries on after the divergence gets no answer.
    again = served.post(calls, {"kind": "tool", "name": "search", "arguments": {"q": "42"}})
    assert again.status_code == 409
    assert again.json()["error"]["message"].startswith("the re-execution stopped already")
    closed = served.post(f"/v1/reexecutions/{reexecution_id}/close", {})
    assert closed.status_code == 200, closed.content
    assert (closed.json()["ok"], closed.json()["error"]["code"]) == (False, "REPLAY_DIVERGENCE")
    assert closed.json()["report"]["divergences"] == [divergence]
    assert results(served, job_id)[-1]["error_code"] == "REPLAY_DIVERGENCE"

    # The client raises it as the in-process harness does, with the same diff.
    with pytest.raises(ReplayDiverged) as raised, over_http(served, job_id) as h:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        h.tool_call("search", {"q": "42", "limit": 5})
    assert raised.value.divergence.as_json() == divergence
    assert h.result is not None
    assert h.result.outcome.divergences[0].as_json() == divergence


def test_an_extra_call_and_a_call_left_unmade_diverge(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)

    with pytest.raises(ReplayDiverged) as raised, over_http(served, job_id) as h:
        agent(h, "42")
        h.tool_call("notify", {"to": "ops"})
    assert raised.value.divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 4,
        "field": "call",
        "recorded": "nothing: the recording ends here",
        "replayed": {"kind": "tool_call", "name": "notify", "arguments": {"to": "ops"}},
    }

    with over_http(served, job_id) as h:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        h.tool_call("search", {"q": "42"})
        h.retrieve("notes on 42")  # the fetch is never made: found when the block ends
    assert h.result is not None
    assert [d.as_json() for d in h.result.outcome.divergences] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 3,
            "field": "call",
            "recorded": {"kind": "tool_call", "name": "fetch", "arguments": {"id": "doc-42"}},
            "replayed": None,
        }
    ]
    assert [r["error_code"] for r in results(served, job_id)] == ["REPLAY_DIVERGENCE"] * 2


def test_code_that_raises_in_the_block_diverges_where_it_stood(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)

    with pytest.raises(KeyError), over_http(served, job_id) as h:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        raise KeyError("first")

    assert h.result is not None
    assert h.result.outcome.divergences[0].as_json()["replayed"] == "raised KeyError: 'first'"


def test_production_refuses_a_response_the_capture_mode_did_not_keep(served: Api) -> None:
    job_id = recorded(served.ledger, "prompts_only", tenant=TENANT)

    with (
        pytest.raises(HarnessError) as raised,
        over_http(served, job_id, "admin_auditor", "production") as h,
    ):
        agent(h, "42")

    assert (raised.value.code, raised.value.status) == ("MISSING_PERSISTED_AGENT_OUTPUT", 409)
    assert "only its hash was kept (capture mode prompts_only)" in raised.value.message
    request = served.governance(job_id)[0]
    assert (request["mode"], request["actor_id"]) == ("production", "ana")
    assert results(served, job_id)[-1]["error_code"] == "MISSING_PERSISTED_AGENT_OUTPUT"


def test_another_tenants_job_and_reexecution_are_answered_as_free_ids(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)

    def refusal(job: str) -> bytes:
        answer = served.post("/v1/reexecutions", {"job_id": job}, "beta_admin_auditor")
        assert_error(answer, 404, "NOT_FOUND")
        return answer.content.replace(job.encode(), b"<id>")

    assert refusal(job_id) == refusal("no-such-job")
    assert served.governance(job_id) == []
    # An open re-execution is reached by the caller that opened it only.
    reexecution_id = opened(served, job_id)
    for who in ("beta_admin_auditor", "admin_auditor"):
        answer = served.post(f"/v1/reexecutions/{reexecution_id}/calls", PLAN, who)
        free = served.post(f"/v1/reexecutions/{'0' * 32}/calls", PLAN, who)
        assert_error(answer, 404, "NOT_FOUND")
        assert answer.content.replace(reexecution_id.encode(), b"<id>") == free.content.replace(
            b"0" * 32, b"<id>"
        )
    assert served.post(f"/v1/reexecutions/{reexecution_id}/calls", PLAN).status_code == 200


def test_an_abandoned_reexecution_is_closed_as_a_divergence_and_recorded(
    served: Api, clock: Clock
) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)
    reexecution_id = opened(served, job_id)
    calls = f"/v1/reexecutions/{reexecution_id}/calls"
    assert served.post(calls, PLAN).status_code == 200
    clock.now += IDLE  # idle for the limit exactly: still open
    assert served.post(
        calls, {"kind": "tool", "name": "search", "arguments": {"q": "42"}}
    ).is_success

    clock.now += IDLE + 1
    late = served.post(calls, {"kind": "retrieve", "query": "notes on 42"})

    assert_error(late, 404, "NOT_FOUND")
    (result,) = results(served, job_id)
    assert (result["ok"], result["error_code"]) == (False, "REPLAY_DIVERGENCE")
    report = served.ledger.replays.record(job_id, 1, tenant=TENANT).report
    assert report is not None
    assert report["divergences"] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 2,
            "field": "agent",
            "recorded": {"kind": "retrieve", "name": "retrieval", "query": "notes on 42"},
            "replayed": "abandoned: no call and no close for more than 300 s",
        }
    ]


def test_opening_past_the_bound_is_busy_and_records_nothing(
    settings: Settings, ledger: Ledger, clock: Clock
) -> None:
    """Each open re-execution holds a lease (on PostgreSQL a connection): past the bound,
    opening one more is refused before anything is recorded; closing one makes room."""
    job_id = recorded(ledger, tenant=TENANT)
    two = settings.model_copy(update={"max_open_reexecutions": 2})
    with checked_client(two, ledger, clock) as client:
        api = Api(client, ledger)
        first, _ = opened(api, job_id), opened(api, job_id)
        asked = len(api.governance(job_id))
        refused = api.post("/v1/reexecutions", {"job_id": job_id})
        assert_error(refused, 503, "STORE_BUSY")
        assert "MACE_MAX_OPEN_REEXECUTIONS" in refused.json()["error"]["message"]
        assert len(api.governance(job_id)) == asked  # no request recorded for it
        assert api.post(f"/v1/reexecutions/{first}/close", {}).status_code == 200
        opened(api, job_id)


def test_a_stopping_service_records_its_open_reexecutions_as_abandoned(
    settings: Settings, ledger: Ledger, clock: Clock
) -> None:
    job_id = recorded(ledger, tenant=TENANT)
    with checked_client(settings, ledger, clock) as client:
        api = Api(client, ledger)
        opened(api, job_id)
        assert api.governance(job_id)[-1]["event"] == "REPLAY_REQUEST"
    report = ledger.replays.record(job_id, 1, tenant=TENANT).report
    assert report is not None
    assert (report["ok"], report["error_code"]) == (False, "REPLAY_DIVERGENCE")
    assert report["divergences"][0]["replayed"] == (
        "abandoned: the service stopped with the re-execution open"
    )


def test_the_rng_and_clock_are_the_recorded_runs(served: Api) -> None:
    started = RunStarted(seed=7, input="ticket 42", capture_mode="full_io")
    recorder = RunRecorder(served.ledger.run_uploads, started, TENANT)
    drawn = [recorder.rng().randint(1, 1000), recorder.rng().random(), recorder.rng().randbits(9)]
    picked = recorder.rng().choice(["a", "b", "c"])
    shuffled = [1, 2, 3, 4]
    recorder.rng().shuffle(shuffled)
    instants = [recorder.clock().now() for _ in range(2)]
    job_id = recorder.complete(agent(RecordingBoundary(recorder), "42")).job_id

    with over_http(served, job_id) as h:
        assert [h.rng().randint(1, 1000), h.rng().random(), h.rng().randbits(9)] == drawn
        assert h.rng().choice(["a", "b", "c"]) == picked
        items = [1, 2, 3, 4]
        h.rng().shuffle(items)
        assert items == shuffled
        assert [h.clock().now() for _ in range(2)] == instants
        h.final_output(agent(h, "42"))
    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.authoritative) == (True, True)


def test_bad_calls_and_modes_get_one_line_and_write_nothing(served: Api) -> None:
    job_id = recorded(served.ledger, tenant=TENANT)
    before = served.position()
    audit = served.post("/v1/reexecutions", {"job_id": job_id, "mode": "audit"})
    assert_error(audit, 422, "INVALID_INPUT", field="body.mode")
    assert served.position() == before

    calls = f"/v1/reexecutions/{opened(served, job_id)}/calls"
    after_open = served.position()
    for bad, field in (
        ({"kind": "tool", "arguments": {}}, "body.tool.name"),
        ({"kind": "rng.randint", "a": 5, "b": 1}, "body.rng.randint"),
        ({"kind": "rng.randbits", "k": 64}, "body.rng.randbits.k"),
        ({"kind": "teleport"}, "body"),
    ):
        assert_error(served.post(calls, bad), 422, "INVALID_INPUT", field=field)
    assert served.position() == after_open
    # The re-execution goes on from where it stood.
    assert served.post(calls, PLAN).json() == {"answer": "check the docs"}
