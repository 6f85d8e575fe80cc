"""A Stage-0 job pays each guarantee once (issue 29 point 1), on SQLite and PostgreSQL: counted,
never timed, so that a redundant pass that comes back fails here.

One job (8 events: its start, five facts, its completion and its seal): the runtime runs once when
the privacy policy refuses nothing (twice only to mask a refused value)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.ledger_fixtures import RawTable

import projections.stage0_runtime as runtime
from infrastructure.application.ledger import Ledger

SECRET = "hunter2"


def counted(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[None]:
    """Every call of ``owner.name`` from now on, counted (one entry a call)."""
    inner: Callable[..., Any] = getattr(owner, name)
    calls: list[None] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(None)
        return inner(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def test_the_runtime_runs_once_unless_a_value_is_refused(
    ledger: Ledger, raw_table: RawTable, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = counted(monkeypatch, runtime, "run_iteration")
    ledger.jobs.run("what is 2 + 3", "s1", job_id="plain")
    assert len(runs) == 1

    runs.clear()
    log = ledger.jobs.run(f"remember my password is {SECRET}", "s1", job_id="refused")
    assert len(runs) == 2  # the caller's input, then the masked one that is recorded
    assert SECRET not in log.job_input
    assert SECRET.encode() not in raw_table.every_byte()
