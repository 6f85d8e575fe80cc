"""The Python API for outside emitters: start a run, emit its events, complete it.

Events are validated as they are emitted and held until `complete`, which records the whole run
(start, events, the ledger's verdict and the seal) in one transaction. A run abandoned before
completion therefore leaves nothing behind, and a recorded run is never half written.

    recorder = RunRecorder(ledger.runs, RunStarted(seed=7, input="...", snapshot_ids=ids))
    recorder.emit(ToolCall(...))
    log = recorder.complete("the answer")
"""

from __future__ import annotations

from typing import Any

from domain.errors import InvalidInput
from domain.events import EMITTED_TYPES, RunCompleted, RunEvent, RunStarted
from domain.job import DEFAULT_TENANT
from infrastructure.application.runs import RunService
from projections.reflective_log import ReflectiveLog


class RunRecorder:
    def __init__(self, runs: RunService, started: RunStarted, tenant: str = DEFAULT_TENANT) -> None:
        self._runs = runs
        self._started = RunStarted.model_validate(started.model_dump())  # as `emit` does
        self._tenant = tenant
        self._name = "run" if started.job_id is None else f"run {started.job_id}"
        self._events: list[RunEvent] = []
        self._log: ReflectiveLog | None = None

    def emit(self, event: RunEvent) -> None:
        """Add one event of the run, in order."""
        if self._log is not None:
            msg = f"run {self._log.job_id} is complete: nothing more may be emitted"
            raise InvalidInput(msg)
        if not isinstance(event, EMITTED_TYPES):
            names = ", ".join(t.EVENT_TYPE for t in EMITTED_TYPES)
            msg = f"{type(event).__name__} cannot be emitted within a run: expected one of {names}"
            raise TypeError(msg)
        # Validated again from its fields: a model built with model_copy or model_construct
        # skipped its validators (a hash that is not its content's, a query emptied).
        checked = type(event).model_validate(event.model_dump())
        self._runs.limits.check_emitted(self._name, len(self._events), checked)
        self._events.append(checked)

    def complete(self, final_output: Any) -> ReflectiveLog:
        """Record the run, sealed; returns its ReflectiveLog (job id, replayability, gaps).

        `ClearPrivateValue` (nothing recorded) if an event holds a denied value in clear.
        """
        if self._log is not None:
            msg = f"run {self._log.job_id} is already complete"
            raise InvalidInput(msg)
        completed = RunCompleted(final_output=final_output)
        declared = {kind.value: sid for kind, sid in self._started.snapshot_ids.items()}
        self._runs.privacy.refuse_clear_private_values(declared, self._events)
        self._log = self._runs.record(self._started, self._events, completed, self._tenant)
        return self._log
