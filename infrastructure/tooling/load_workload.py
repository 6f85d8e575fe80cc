"""The load test's workload: replayable outside runs, built and encoded before the clock starts.

Every run is an outside run (``POST /v1/runs``, event batches, ``complete``), recorded as a
sealed job. To make an audit replay of it reproduce it, its first events are what the Stage-0
runtime itself does for the run's input (an arithmetic question, so the math agent answers and no
memory is read or written), under the Stage-0 default snapshots the run declares: the replay
re-decides that iteration and finds the same trace and the same final answer. The rest of the run
is tool calls and their results, so ``--events`` can be any size from the Stage-0 iteration up;
the reducers fold them the same way when recording and replaying. A tool's result is the
emitter's word (the replay re-applies it, it does not prove it), so the replay of a run holding
any is ok and not authoritative (`PlannedRun.authoritative`).

The emitter's events are built as Run Event models and sent as their JSON dump, which is also
the form the ledger stores (``type`` beside the payload), so each event's content digest can be
compared with the stored one. Bodies are encoded once here, not in the measured loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from domain.canonical import canonical_json, digest
from domain.events import RunEvent, StageTransition, ToolCall, ToolResult, hash_of
from domain.job import DEFAULT_TENANT, CaptureMode
from domain.stage0.config import DEFAULT_CONFIGS
from projections.stage0_runtime import Stage0Snapshots, run_stage0

STAGE0_EVENTS = 4
"""The Stage-0 iteration of an arithmetic input: InputReceived, RouterDecision, AgentOutput,
IterationTrace. A run cannot hold fewer events and stay replayable; one of exactly these is
replayed authoritatively."""

TOOL = "load.lookup"


@dataclass(frozen=True)
class Workload:
    """The size of the run: how many clients, runs, events, batches and replays."""

    clients: int = 8
    runs: int = 200
    events: int = 20
    batches: int = 2
    replays: int = 50
    retries: int = 0
    """How often a request answered "try again" (503, or 409 for a lost race) is re-sent."""

    def problems(self, max_batch_events: int, max_run_events: int) -> list[str]:
        """What makes this workload impossible (empty when it can run), one line each."""
        checks = [
            (self.clients >= 1, f"--clients {self.clients}: expected at least 1"),
            (self.runs >= 1, f"--runs {self.runs}: expected at least 1"),
            (self.batches >= 2, f"--batches {self.batches}: expected at least 2"),
            (
                self.events >= max(STAGE0_EVENTS, self.batches),
                f"--events {self.events}: expected at least {max(STAGE0_EVENTS, self.batches)}"
                f" (the {STAGE0_EVENTS}-event Stage-0 iteration, one event per batch)",
            ),
            (
                0 <= self.replays <= self.runs,
                f"--replays {self.replays}: expected 0 to --runs ({self.runs})",
            ),
            (self.retries >= 0, f"--retries {self.retries}: expected 0 or more"),
            (
                -(-self.events // self.batches) <= max_batch_events,
                f"--events/--batches: a batch of {-(-self.events // self.batches)} events is over"
                f" MACE_MAX_BATCH_EVENTS ({max_batch_events})",
            ),
            (
                self.events <= max_run_events,
                f"--events {self.events}: over MACE_MAX_RUN_EVENTS ({max_run_events})",
            ),
        ]
        return [message for ok, message in checks if not ok]

    def replayed(self, index: int) -> bool:
        """Whether run ``index`` is replayed: ``replays`` runs spread evenly, the last one too."""
        if self.replays == 0:
            return False
        # Run i is chosen when floor((i + 1) * R / M) steps up: every 4th run for R = M / 4.
        return (index + 1) * self.replays // self.runs > index * self.replays // self.runs


@dataclass(frozen=True)
class PlannedRun:
    """One run as the client sends it, and what the ledger must then hold for it."""

    run_id: str
    open_body: bytes
    batch_bodies: tuple[bytes, ...]
    batch_sizes: tuple[int, ...]
    resend: int
    """Which batch is sent a second time (after all of them), as after a lost answer."""
    complete_body: bytes
    replay_body: bytes | None
    final_output: str
    digests: tuple[str, ...]
    """The content digest of each event sent, in order, once each."""

    @property
    def authoritative(self) -> bool:
        """Whether its replay is authoritative: only when it holds nothing but the Stage-0
        iteration, every fact of which the replay re-executes."""
        return len(self.digests) == STAGE0_EVENTS


class _NoMemory:
    """An empty semantic memory: an arithmetic question reads and writes none anyway."""

    tenant = DEFAULT_TENANT

    def entry(self, key: str) -> None:
        return None


def plan_runs(workload: Workload, tag: str, snapshot_ids: dict[str, str]) -> list[PlannedRun]:
    """The runs ``load-<tag>-00000``..., each replayable under the given default snapshot ids."""
    snapshots = Stage0Snapshots.parse(
        {kind: config.model_dump() for kind, config in DEFAULT_CONFIGS.items()}
    )
    return [
        _plan_run(workload, f"load-{tag}-{index:05d}", index, snapshots, snapshot_ids)
        for index in range(workload.runs)
    ]


def _plan_run(
    workload: Workload,
    run_id: str,
    index: int,
    snapshots: Stage0Snapshots,
    snapshot_ids: dict[str, str],
) -> PlannedRun:
    question = f"{index + 2} {'+*'[index % 2]} {index % 97 + 3}"
    stage0 = run_stage0(
        run_id, run_id, question, "load", snapshots, _NoMemory(), CaptureMode.FULL_IO
    )
    if len(stage0.events) != STAGE0_EVENTS:
        msg = f"the Stage-0 iteration of {question!r} has {len(stage0.events)} events"
        raise ValueError(f"{msg}, not {STAGE0_EVENTS}: the load workload needs updating")
    events = [*stage0.events, *_tool_events(index, workload.events - STAGE0_EVENTS)]
    contents = [event.model_dump(mode="json") for event in events]
    items = [{"event_id": f"e{n}", "event": content} for n, content in enumerate(contents)]
    sizes = _batch_sizes(len(items), workload.batches)
    batches: list[list[dict[str, Any]]] = []
    for size in sizes:
        start = sum(len(batch) for batch in batches)
        batches.append(items[start : start + size])
    started = {
        "type": "RunStarted",
        "job_id": run_id,
        "seed": run_id,
        "input": question,
        "snapshot_ids": snapshot_ids,
        "capture_mode": CaptureMode.FULL_IO.value,
    }
    replay = {"job_id": run_id, "mode": "audit"}
    return PlannedRun(
        run_id=run_id,
        open_body=canonical_json(started),
        batch_bodies=tuple(canonical_json({"events": batch}) for batch in batches),
        batch_sizes=tuple(sizes),
        resend=index % workload.batches,
        complete_body=canonical_json({"final_output": stage0.final_output}),
        replay_body=canonical_json(replay) if workload.replayed(index) else None,
        final_output=stage0.final_output,
        digests=tuple(digest(content) for content in contents),
    )


def _tool_events(run: int, count: int) -> list[RunEvent]:
    """``count`` events: tool calls, each followed by its result (an odd count ends with a
    stage transition: a call no result answers would leave the job unreplayable)."""
    events: list[RunEvent] = []
    for position in range(count):
        call = position // 2
        arguments = {"run": run, "call": call}
        if position == count - 1 and position % 2 == 0:
            events.append(StageTransition(to_stage="done", reason=f"{call} calls answered"))
        elif position % 2 == 0:
            events.append(
                ToolCall(
                    call_id=f"call-{call}",
                    tool=TOOL,
                    tool_schema_hash=hash_of({"tool": TOOL}),
                    arguments=arguments,
                    request_hash=hash_of(arguments),
                )
            )
        else:
            result = {**arguments, "value": run * 1000 + call}
            events.append(
                ToolResult(
                    call_id=f"call-{call}",
                    status="ok",
                    result=result,
                    response_hash=hash_of(result),
                )
            )
    return events


def _batch_sizes(total: int, batches: int) -> list[int]:
    """``total`` split into ``batches`` sizes differing by at most one, larger first."""
    size, extra = divmod(total, batches)
    return [size + 1 if n < extra else size for n in range(batches)]
