"""A run draft: batches idempotent by event id, whole or not at all (the run's limits are every
way in's, `infrastructure.application.limits`: see tests/application/test_input_limits.py)."""

from __future__ import annotations

import pytest

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
