"""An OpenAI Agents SDK agent (`infrastructure.tooling.demo_agent`, the demo's), recorded from the
spans OpenInference's instrumentation made of it, re-executed against its recording through the
harness: unchanged it asks for exactly what the run asked for (authoritative); after a change
that calls a tool with other arguments it diverges at that call. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from domain.errors import ErrorCode
from domain.governance import Actor
from infrastructure.application.ledger import Ledger
from infrastructure.application.replay_harness import replay_harness
from infrastructure.tooling.demo_agent import (
    ANSWER,
    QUESTION,
    record_through_otlp,
    run_as_recorded,
    run_changed,
)
from projections.reexecution import ReplayDiverged

pytestmark = pytest.mark.storage

AUDITOR = Actor.of("aude", ["auditor"])


def recorded_job(ledger: Ledger) -> str:
    """The agent's run, traced as it runs, exported as OTLP and recorded from its spans as
    ``POST /v1/traces`` records them (tenant acme)."""
    log = record_through_otlp(ledger, "acme").log
    assert log is not None
    assert log.completion is not None and log.completion.final_output == ANSWER
    return log.job_id


def test_the_agent_unchanged_re_executes_with_an_authoritative_match(ledger: Ledger) -> None:
    job_id = recorded_job(ledger)
    with replay_harness(ledger.recordings, job_id, AUDITOR, tenant="acme") as h:
        h.final_output(run_as_recorded(h, QUESTION))
    assert h.result is not None
    outcome = h.result.outcome
    assert (outcome.ok, outcome.authoritative, outcome.error_code) == (True, True, None)
    # Two model calls and one tool call, each re-made and answered from the recording.
    assert [c.check.value for c in outcome.checks if c.sequence_index is not None] == [
        "reexecuted"
    ] * 3


def test_a_change_that_calls_a_tool_with_other_arguments_diverges_at_that_call(
    ledger: Ledger,
) -> None:
    job_id = recorded_job(ledger)
    with (
        pytest.raises(ReplayDiverged) as raised,
        replay_harness(ledger.recordings, job_id, AUDITOR, tenant="acme") as h,
    ):
        run_changed(h, QUESTION)
    divergence = raised.value.divergence
    assert raised.value.code is ErrorCode.REPLAY_DIVERGENCE
    assert (divergence.iteration, divergence.field) == (1, "tool_call.arguments")
    assert (divergence.recorded, divergence.replayed) == (
        {"city": "Paris"},
        {"city": "Paris", "units": "metric"},
    )
    assert h.result is not None
    assert (h.result.outcome.ok, h.result.outcome.error_code) == (False, "REPLAY_DIVERGENCE")
