"""The re-execution harness on both stores: an agent of this test's own (plain Python: a model
call, two tool calls, a retrieval) recorded with `RunRecorder`, then run again against its
recording unchanged and changed, each attempt recorded like any replay."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.harness_agent import RecordingBoundary, recorded
from support.ledger_fixtures import RawTable, settings_for
from support.receipt_examples import BUNDLE
from support.ticket_agent import agent
from support.workload_identities import public_key_text, signed_identity

from domain.errors import ErrorCode, InvalidInput, MaceError, NotFoundError
from domain.events import (
    PolicySnapshotRef,
    RunStarted,
    WorkloadIdentity,
    hash_of,
)
from domain.governance import Actor
from domain.job import Job
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.replay_harness import ReplayHarness, replay_harness
from infrastructure.application.run_recorder import RunRecorder
from projections.reexecution import ReplayDiverged

AUDITOR = Actor.of("aude", ["auditor"])
FORENSICS = Actor.of("fran", ["admin", "auditor"])


def reexecuted(
    ledger: Ledger,
    job_id: str,
    code: Callable[[ReplayHarness], str],
    mode: str = "reexecute",
    actor: Actor = AUDITOR,
) -> ReplayHarness:
    """``code`` run again against the job's recording; the harness, its result recorded."""
    with replay_harness(ledger.recordings, job_id, actor, mode=mode) as h:
        h.final_output(code(h))
    return h


def diverged(ledger: Ledger, job_id: str, code: Callable[[ReplayHarness], str]) -> ReplayDiverged:
    with pytest.raises(ReplayDiverged) as raised:
        reexecuted(ledger, job_id, code)
    assert raised.value.code is ErrorCode.REPLAY_DIVERGENCE
    return raised.value


def last_result(ledger: Ledger, job_id: str) -> dict[str, Any]:
    """The newest REPLAY_RESULT in the job's governance log."""
    results = [e for e in ledger.governance.log(job_id) if e["event"] == "REPLAY_RESULT"]
    return results[-1]


def test_the_unchanged_agent_reproduces_its_run_authoritatively(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    h = reexecuted(ledger, job_id, lambda h: agent(h, "42"))

    assert h.result is not None
    outcome = h.result.outcome
    assert (outcome.ok, outcome.authoritative, outcome.error_code) == (True, True, None)
    assert outcome.mode is ReplayMode.REEXECUTE
    checks = [(row.subject, row.check.value) for row in outcome.checks]
    assert checks == [
        ("call 1 model_call m-small (event 0)", "reexecuted"),
        ("call 2 tool_call search (event 1)", "reexecuted"),
        ("call 3 retrieve retrieval (event 3)", "reexecuted"),
        ("call 4 tool_call fetch (event 5)", "reexecuted"),
    ]
    assert [s.step for s in outcome.steps][-2:] == ["final answer", "result"]
    # Recorded like any replay: request (actor, roles, mode), result, replay record, report.
    request, result = ledger.governance.log(job_id)
    assert (request["event"], request["mode"], request["actor_id"], request["roles"]) == (
        "REPLAY_REQUEST",
        "reexecute",
        "aude",
        ["auditor"],
    )
    assert (result["event"], result["ok"], result["authoritative"]) == ("REPLAY_RESULT", True, True)
    record = ledger.replays.record(job_id, 1)
    assert record.report == h.result.report
    assert h.result.report["mode"] == "reexecute"
    assert "**Verdict: REPRODUCED, authoritative" in str(record.markdown)


def test_a_tool_called_with_other_arguments_diverges_at_that_step(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def changed(h: ReplayHarness) -> str:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        h.tool_call("search", {"q": "42", "limit": 5})  # the change
        raise AssertionError("the harness answers no call that left the recording")

    failure = diverged(ledger, job_id, changed)

    assert failure.divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "tool_call.arguments",
        "recorded": {"q": "42"},
        "replayed": {"limit": 5, "q": "42"},
    }
    assert '"field":"tool_call.arguments"' in failure.message  # the canonical diff
    result = last_result(ledger, job_id)
    assert (result["ok"], result["error_code"]) == (False, "REPLAY_DIVERGENCE")
    report = ledger.replays.record(job_id, 1).report
    assert report is not None
    assert report["divergences"] == [failure.divergence.as_json()]
    assert [row["check"] for row in report["checks"]] == [
        "reexecuted",
        "diverged",
        "not_checked",
        "not_checked",
    ]


def test_an_extra_call_diverges_where_the_recording_ends(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def one_more(h: ReplayHarness) -> str:
        answer = agent(h, "42")
        h.tool_call("notify", {"to": "ops"})
        return answer

    failure = diverged(ledger, job_id, one_more)

    assert failure.divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 4,
        "field": "call",
        "recorded": "nothing: the recording ends here",
        "replayed": {"kind": "tool_call", "name": "notify", "arguments": {"to": "ops"}},
    }


def test_a_recorded_call_left_unmade_diverges_at_the_end(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def stops_early(h: ReplayHarness) -> str:
        plan = h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        h.tool_call("search", {"q": "42"})
        h.retrieve("notes on 42")
        return str(plan)

    with replay_harness(ledger.recordings, job_id, AUDITOR) as h:
        stops_early(h)  # no exception: the divergence is found when the block ends

    assert h.result is not None
    (divergence,) = h.result.outcome.divergences
    assert divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 3,
        "field": "call",
        "recorded": {"kind": "tool_call", "name": "fetch", "arguments": {"id": "doc-42"}},
        "replayed": None,
    }
    assert last_result(ledger, job_id)["error_code"] == "REPLAY_DIVERGENCE"


def test_calls_out_of_order_diverge_at_the_first_one_moved(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def reordered(h: ReplayHarness) -> str:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        h.retrieve("notes on 42")  # recorded after the search
        raise AssertionError("not reached")

    failure = diverged(ledger, job_id, reordered)

    assert failure.divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "call",
        "recorded": {"kind": "tool_call", "name": "search"},
        "replayed": {"kind": "retrieve", "name": "retrieval"},
    }


def test_another_final_answer_is_a_result_mismatch(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    h = reexecuted(ledger, job_id, lambda h: agent(h, "42").upper())

    assert h.result is not None
    assert h.result.outcome.error_code is ErrorCode.RESULT_MISMATCH
    assert last_result(ledger, job_id)["error_code"] == "RESULT_MISMATCH"


def test_production_refuses_a_response_the_capture_mode_did_not_keep(ledger: Ledger) -> None:
    job_id = recorded(ledger, capture_mode="prompts_only")

    with pytest.raises(MaceError) as raised:
        reexecuted(ledger, job_id, lambda h: agent(h, "42"), "production", FORENSICS)

    assert raised.value.code is ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT
    assert "call 1 (model_call m-small, event 0)" in raised.value.message
    assert "only its hash was kept (capture mode prompts_only)" in raised.value.message
    result = last_result(ledger, job_id)
    assert (result["ok"], result["error_code"]) == (False, "MISSING_PERSISTED_AGENT_OUTPUT")
    assert ledger.governance.log(job_id)[0]["mode"] == "production"


def test_production_replays_a_run_that_kept_every_answer(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    h = reexecuted(ledger, job_id, lambda h: agent(h, "42"), "production", FORENSICS)

    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.authoritative) == (True, True)
    assert ledger.governance.log(job_id)[0]["mode"] == "production"


def test_production_needs_its_roles_and_the_refusal_is_recorded(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    with pytest.raises(MaceError) as raised:
        reexecuted(ledger, job_id, lambda h: agent(h, "42"), "production", AUDITOR)

    assert raised.value.code is ErrorCode.ACCESS_DENIED
    assert last_result(ledger, job_id)["error_code"] == "ACCESS_DENIED"


def test_a_declared_mock_answers_an_unkept_response_in_the_sandbox_only(ledger: Ledger) -> None:
    job_id = recorded(ledger, capture_mode="prompts_only")

    class Mocked:
        def __init__(self, h: ReplayHarness, response: str) -> None:
            self.h, self.response = h, response

        def model_call(self, model_id: str, prompt: Any) -> Any:
            return self.h.model_call(model_id, prompt, mock=self.response)

        def tool_call(self, name: str, arguments: Any) -> Any:
            return self.h.tool_call(name, arguments)

        def retrieve(self, query: str) -> list[dict[str, Any]]:
            return self.h.retrieve(query)

    # The very response: its hash is the one the run kept, so nothing is taken on trust.
    same = reexecuted(ledger, job_id, lambda h: agent(Mocked(h, "check the docs"), "42"))
    assert same.result is not None
    assert (same.result.outcome.ok, same.result.outcome.authoritative) == (True, True)
    assert same.result.outcome.checks[0].check.value == "hash_compared"

    with replay_harness(ledger.recordings, job_id, AUDITOR) as h:
        agent(Mocked(h, "another answer"), "42")
    assert h.result is not None
    assert h.result.outcome.ok
    assert h.result.outcome.non_authoritative == [
        "call 1 answered by a declared mock, not by the recording"
    ]


def test_the_rng_and_clock_are_the_recorded_runs(ledger: Ledger) -> None:
    started = RunStarted(seed=7, input="ticket 42", capture_mode="full_io")
    recorder = RunRecorder(ledger.run_uploads, started)
    drawn = [recorder.rng().randint(1, 1000) for _ in range(3)]
    instants = [recorder.clock().now() for _ in range(2)]
    answer = agent(RecordingBoundary(recorder), "42")
    job_id = recorder.complete(answer).job_id

    with replay_harness(ledger.recordings, job_id, AUDITOR) as h:
        assert [h.rng().randint(1, 1000) for _ in range(3)] == drawn
        assert [h.clock().now() for _ in range(2)] == instants
        h.final_output(agent(h, "42"))
    assert h.result is not None
    assert h.result.outcome.ok


def test_an_audit_mode_harness_is_refused_before_anything_is_recorded(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    with pytest.raises(InvalidInput, match="mode 'audit' is not one of"):
        reexecuted(ledger, job_id, lambda h: agent(h, "42"), "audit")

    assert ledger.governance.log(job_id) == []


def test_a_checkpointed_store_as_the_cli_leaves_it(store_url: str) -> None:
    """Recorded by one ledger (closed: it checkpoints, as every CLI write does), re-executed by
    another."""
    with Ledger.open(settings_for(store_url)) as writer:
        job_id = recorded(writer)
    with Ledger.open(settings_for(store_url)) as ledger:
        assert ledger.checkpoints.newest() is not None
        h = reexecuted(ledger, job_id, lambda h: agent(h, "42"))
        assert h.result is not None
        assert (h.result.outcome.ok, h.result.outcome.authoritative) == (True, True)


def test_identity_verifies_from_the_recording_after_every_key_rotated_away(
    store_url: str,
) -> None:
    """The identity provider's key and the ledger's signing key both rotated after the run: the
    identity still verifies, from the recorded signature, key and hash alone."""
    issuer_key = Ed25519PrivateKey.generate()
    with Ledger.open(settings_for(store_url, "k1")) as writer:
        started = RunStarted(seed=7, input="ticket 42", capture_mode="full_io")
        recorder = RunRecorder(writer.run_uploads, started)
        recorder.emit(signed_identity(issuer_key))
        job_id = recorder.complete(agent(RecordingBoundary(recorder), "42")).job_id
    del issuer_key  # the provider rotated: only the recording knows the old key now
    # The ledger signs with k2 now; k1 only verifies what it signed.
    rotated = settings_for(store_url, "k1", "k2", active="k2")
    with Ledger.open(rotated) as ledger, replay_harness(ledger.recordings, job_id, AUDITOR) as h:
        identity = h.identity()
        h.final_output(agent(h, "42"))

    assert identity.subject == "spiffe://example.org/agents/support"
    assert identity.attestation == {"status": "verified", "platform": "k8s-node-attestor"}
    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.authoritative) == (True, True)
    row = h.result.outcome.checks[0]
    assert (row.subject, row.check.value) == (
        "identity spiffe://example.org/agents/support (event 0)",
        "hash_compared",
    )
    assert "that the key was the issuer's is the run's word" in row.detail


def test_a_forged_identity_is_refused_where_it_is_taken_in(ledger: Ledger) -> None:
    genuine = signed_identity(Ed25519PrivateKey.generate())
    forged = genuine.model_dump() | {"claims": {"aud": "everything"}}
    # Refused as any bad event is (pydantic's ValidationError is a ValueError, as InvalidInput).
    with pytest.raises(ValueError, match="statement_hash is not the sha256"):
        WorkloadIdentity.model_validate(forged)
    other_key = public_key_text(Ed25519PrivateKey.generate())
    with pytest.raises(ValueError, match="the signature does not verify under the recorded key"):
        WorkloadIdentity.model_validate(genuine.model_dump() | {"public_key": other_key})
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="ticket 42"))
    with pytest.raises(ValueError, match="WorkloadIdentity: statement_hash"):
        recorder.emit(genuine.model_construct(**forged))
    assert ledger.read_models.open_runs("default")[0]["events"] == 0


def test_a_run_recorded_without_an_identity_has_none_to_answer_with(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    with (
        pytest.raises(MaceError) as raised,
        replay_harness(ledger.recordings, job_id, AUDITOR) as h,
    ):
        h.identity()

    assert raised.value.code is ErrorCode.MISSING_PERSISTED_AGENT_OUTPUT
    assert "the run recorded no WorkloadIdentity" in raised.value.message
    assert last_result(ledger, job_id)["error_code"] == "MISSING_PERSISTED_AGENT_OUTPUT"


def test_a_recording_edited_in_the_store_fails_closed_and_is_recorded(
    ledger: Ledger, raw_table: RawTable
) -> None:
    """The search's recorded result edited in the database: the harness answers nothing from
    it (`INTEGRITY_FAILURE` before the code runs), and the attempt is on record."""
    job_id = recorded(ledger)
    stream = Job.id_for(ledger.jobs.owned_name(job_id, "default"))
    result = raw_table.state(stream, 4)  # JobStarted, ModelCallEnvelope, ToolCall, ToolResult
    assert b"doc-42" in result
    raw_table.set_column(stream, 4, "state", result.replace(b"doc-42", b"doc-43"))
    ran: list[str] = []

    def counted(h: ReplayHarness) -> str:
        ran.append("ran")
        return agent(h, "42")

    with pytest.raises(MaceError) as raised:
        reexecuted(ledger, job_id, counted)

    assert raised.value.code is ErrorCode.INTEGRITY_FAILURE
    assert ran == []
    report = ledger.replays.record(job_id, 1).report  # the job's own reads now fail closed
    assert report is not None
    assert (report["error_code"], report["mode"]) == ("INTEGRITY_FAILURE", "reexecute")


def test_policy_is_the_bundle_the_run_named_as_the_ledger_archived_it(ledger: Ledger) -> None:
    admin = Actor.of("ana", ["admin"])
    archived = ledger.policy.set_bundle(None, BUNDLE, admin)
    started = RunStarted(seed=7, input="ticket 42", capture_mode="full_io")
    recorder = RunRecorder(ledger.run_uploads, started)
    recorder.emit(PolicySnapshotRef(policy_bundle_hash=archived.bundle_hash))
    job_id = recorder.complete(agent(RecordingBoundary(recorder), "42")).job_id
    ledger.policy.set_bundle(None, BUNDLE.replace("action: deny", "action: redact"), admin)

    with replay_harness(ledger.recordings, job_id, AUDITOR) as h:
        bundle = h.policy(archived.bundle_hash)  # not today's: the one the run named
        h.final_output(agent(h, "42"))
    assert [rule.action.value for rule in bundle.rules] == ["deny", "redact"]
    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.authoritative) == (True, True)

    unnamed = hash_of("a bundle the run never named")
    with (
        pytest.raises(ReplayDiverged) as raised,
        replay_harness(ledger.recordings, job_id, AUDITOR) as h,
    ):
        h.policy(unnamed)
    assert raised.value.divergence.as_json() == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 0,
        "field": "policy_bundle_hash",
        "recorded": [archived.bundle_hash],
        "replayed": unnamed,
    }


def test_policy_the_ledger_does_not_hold_is_a_missing_snapshot(ledger: Ledger) -> None:
    unheld = hash_of("a bundle only the emitter had")
    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="ticket 42"))
    recorder.emit(PolicySnapshotRef(policy_bundle_hash=unheld))
    job_id = recorder.complete("done").job_id

    with (
        pytest.raises(MaceError) as raised,
        replay_harness(ledger.recordings, job_id, AUDITOR) as h,
    ):
        h.policy(unheld)

    assert raised.value.code is ErrorCode.MISSING_SNAPSHOT
    assert last_result(ledger, job_id)["error_code"] == "MISSING_SNAPSHOT"


def test_code_that_swallows_a_divergence_cannot_carry_on(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def stubborn(h: ReplayHarness) -> str:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        with contextlib.suppress(ReplayDiverged):  # carries on as if nothing happened
            h.tool_call("search", {"q": "43"})
        return str(h.tool_call("search", {"q": "42"}))

    failure = diverged(ledger, job_id, stubborn)

    assert "the re-execution stopped already" in failure.message
    report = ledger.replays.record(job_id, 1).report
    assert report is not None
    assert [d["field"] for d in report["divergences"]] == ["tool_call.arguments"]


def test_code_that_raises_where_the_run_went_on_diverges_there(ledger: Ledger) -> None:
    job_id = recorded(ledger)

    def crashes(h: ReplayHarness) -> str:
        h.model_call("m-small", {"role": "user", "content": "plan for 42"})
        raise KeyError("first")

    with pytest.raises(KeyError):
        reexecuted(ledger, job_id, crashes)

    report = ledger.replays.record(job_id, 1).report
    assert report is not None
    assert report["divergences"] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": 1,
            "field": "agent",
            "recorded": {"kind": "tool_call", "name": "search", "arguments": {"q": "42"}},
            "replayed": "raised KeyError: 'first'",
        }
    ]


def test_another_tenants_job_is_answered_as_a_free_id(ledger: Ledger) -> None:
    job_id = recorded(ledger)
    free = "no-such-job"

    def refusal(job: str) -> str:
        with (
            pytest.raises(NotFoundError) as raised,
            replay_harness(ledger.recordings, job, AUDITOR, tenant="acme"),
        ):
            raise AssertionError("not reached")
        return str(raised.value).replace(job, "<id>")

    assert refusal(job_id) == refusal(free)
    assert ledger.governance.log(job_id) == []
