"""A run draft: batches idempotent by event id, whole or not at all (the run's limits are every
way in's, `infrastructure.application.limits`: see tests/application/test_input_limits.py)."""

from __future__ import annotations

import pytest

from domain.canonical import canonical_json
from domain.events import ErrorEvent, StageTransition, ToolCall
from domain.run_draft import RunDraft, RunDraftError


def draft() -> RunDraft:
    return RunDraft(run_id="r1", tenant="acme", started={"seed": 1, "input": "x"})


def event(n: int) -> tuple[str, dict[str, object]]:
    return f"e{n}", {"type": "ToolCall", "call_id": f"c{n}"}


def test_a_resent_batch_is_skipped_and_held_once() -> None:
    run = draft()
    assert run.append([event(1), event(2)]).accepted == 2
    again = run.append([event(1), event(2)])
    assert (again.accepted, again.duplicates, again.total) == (0, 2, 2)
    assert len(run.collect_events()) == 2  # opened, one batch: the re-send stored nothing


def test_an_id_resent_with_other_content_refuses_the_whole_batch() -> None:
    run = draft()
    run.append([event(1)])
    with pytest.raises(RunDraftError, match="'e1' was sent before with other content"):
        run.append([event(2), ("e1", {"type": "ToolCall", "call_id": "other"})])
    assert run.events == [event(1)[1]]


def test_a_completed_run_takes_no_events() -> None:
    run = draft()
    run.append([event(1)])
    run.complete("done")
    with pytest.raises(RunDraftError, match="is complete"):
        run.append([event(2)])


ARGS = {"q": "café ☕", "n": 0.1 + 0.2}


def test_a_run_with_its_job_indexes_its_events_at_the_size_the_limits_count() -> None:
    """Its events go to its job: the draft keeps each one's id, digest and size, which is the
    length of the event's canonical JSON, ``type`` included, as for a run that holds them."""
    run = RunDraft(run_id="r1", tenant="acme", started={"seed": 1, "input": "x"}, job_id="r1")
    sent = [
        ("e1", ToolCall(call_id="c1", tool="search", tool_schema_hash="ab" * 32, arguments=ARGS)),
        ("e2", ErrorEvent(code="E", message='\u2028 and \\ and "')),
        ("e3", StageTransition(to_stage="zzz")),
    ]
    assert run.append(sent).accepted == 3
    assert run.events == []  # held in the job's stream alone
    sizes = [len(canonical_json(event.model_dump(mode="json"))) for _, event in sent]
    assert run.sizes == sizes
    again = run.append([sent[1], ("e4", StageTransition(to_stage="a"))])
    assert (again.accepted, again.duplicates, again.taken) == (1, 1, (1,))
    with pytest.raises(RunDraftError, match="'e3' was sent before with other content"):
        run.append([("e3", StageTransition(to_stage="other"))])
