"""The Python API for outside emitters: start a run, emit its events, complete it.

The run is written as it goes, through the same open runs the HTTP batches use (`run_uploads`):
starting it opens the run and its job, each `emit` appends its event to the job (validated, held
to the run's privacy rules, then stored), and `complete` closes and seals the job (the ledger's
verdict and the seal) in one transaction that also closes the open run. An agent that dies
before completing leaves an open run whose job holds every event it emitted, unsealed, which an
operator sees (``mace runs``) and abandons (``mace runs abandon``); it is never replayed.

    recorder = RunRecorder(ledger.run_uploads, RunStarted(seed=7, input="...", snapshot_ids=ids))
    recorder.emit(ToolCall(...))
    log = recorder.complete("the answer")
"""

from __future__ import annotations

from typing import Any

from domain.determinism import AGENT_RNG_STREAM, DeterministicRNG, TickingClock
from domain.errors import InvalidInput
from domain.events import EMITTED_TYPES, RunEvent, RunStarted
from domain.job import DEFAULT_TENANT
from infrastructure.application.run_uploads import HeldRun, RunUploads
from projections.reflective_log import ReflectiveLog


class RunRecorder:
    def __init__(
        self, uploads: RunUploads, started: RunStarted, tenant: str = DEFAULT_TENANT
    ) -> None:
        """Open the run (`ClearPrivateValue`, nothing written, if its input holds personal data)."""
        self._uploads = uploads
        started = RunStarted.model_validate(started.model_dump())  # as `emit` does
        self._run: HeldRun = uploads.open_new(started, tenant)
        self._emitted = 0
        self._rng = DeterministicRNG(started.seed_text, AGENT_RNG_STREAM)
        self._clock = TickingClock(started.seed_text)
        self._log: ReflectiveLog | None = None

    def rng(self) -> DeterministicRNG:
        """The run's seeded RNG (its agent stream): the same draws, in the same order, as the
        re-execution harness gives the code run again (`replay_harness`)."""
        return self._rng

    def clock(self) -> TickingClock:
        """The run's deterministic clock, as the re-execution harness gives it again."""
        return self._clock

    @property
    def run_id(self) -> str:
        """The open run's id, as ``mace runs`` lists it."""
        return self._run.draft.run_id

    def emit(self, event: RunEvent) -> None:
        """Append one event of the run, in order; it is stored before this returns.

        `ClearPrivateValue` (the event is not stored) if it holds personal data in clear.
        """
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
        self._run = self._uploads.extend(self._run, [(f"e{self._emitted + 1}", checked)])
        self._emitted += 1

    def complete(self, final_output: Any) -> ReflectiveLog:
        """Record the run, sealed; returns its ReflectiveLog (job id, replayability, gaps).

        `ClearPrivateValue` (nothing recorded) if the final output holds personal data in clear.
        """
        if self._log is not None:
            msg = f"run {self._log.job_id} is already complete"
            raise InvalidInput(msg)
        draft = self._run.draft
        self._log, _ = self._uploads.complete(
            draft.run_id, draft.tenant, final_output, job_id_is_run_id=False
        )
        return self._log
