"""A run being recorded over the network, batch by batch, before it becomes a sealed job.

An outside emitter opens a run, sends its events in batches, then completes it. The draft is the
run's index: its start, and for each event taken the emitter's own ``event_id``, a digest of its
content and its size. A run opened with its job (``job_id``, every run opened now) keeps its
events in that job's stream alone, each batch appended there as job events in the transaction
that indexes it here, so completion only closes and seals the job. A run opened before held its
events in the draft itself (``BatchAppended``) and becomes a job only at completion, recorded
whole then (in the same transaction that marks the draft completed).

A batch re-sent after a lost response is recognised by its event ids: events already taken with
the same content are skipped, never recorded twice, and an id re-used for different content is
refused. A batch is one event on the draft, so it is taken whole or not at all.

A run whose emitter died before completing it stays open, its events kept, until an operator
abandons it: the draft is then closed as abandoned (who, and why) and takes nothing more; its job
stream, if it has one, stays unsealed (an open job: never replayed, never vouching for anything).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_json, digest, sha256_hex
from domain.errors import InvalidInput
from domain.events import RunEvent
from domain.job import validate_tenant
from domain.memories import check_reason
from domain.naming import tenant_scoped
from domain.tool_boundary import Step, ToolBoundaryError, tool_boundary_problem, tool_steps

CLIENT_EVENT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
SizeCheck = Callable[[Sequence[int], int], None]


class RunDraftError(InvalidInput):
    """What a draft refuses: its state (complete), or an event id re-used for other content."""


class RunTooLarge(RunDraftError):
    """More than a run may hold: events, bytes, or a file or output too large (the limits every
    way in shares, `infrastructure.application.limits`)."""


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    accepted: int
    duplicates: int
    total: int
    taken: tuple[int, ...] = ()
    """The positions in the batch of the events taken (the new ones), in order."""


class RunDraft(MaceAggregate):
    class Opened(MaceAggregate.Created):
        # Version 1 opened no job: its run's events are held in the draft until completion.
        class_version: ClassVar[int] = 2
        run_id: str
        tenant: str
        started: dict[str, Any]
        job_id: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["job_id"] = None

    class BatchAppended(MaceAggregate.Event):
        # Version 1 held each event without its content digest, version 2 without its size
        # (canonical bytes): every load recomputed them all, and every batch encoded every event
        # the run held again to hold the run to its byte limit.
        class_version: ClassVar[int] = 3
        events: list[dict[str, Any]]

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            for item in state["events"]:
                item["digest"] = digest(item["event"])

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            for item in state["events"]:
                item["size"] = len(canonical_json(item["event"]))

    class BatchIndexed(MaceAggregate.Event):
        """A batch of a run whose job stream holds its events: here, each one's ``event_id``,
        ``digest``, ``size`` and tool ``step`` (`domain.tool_boundary`) only."""

        entries: list[dict[str, Any]]

    class Completed(MaceAggregate.Event):
        final_output_digest: str

    class Abandoned(MaceAggregate.Event):
        actor: dict[str, Any]
        reason: str

    NAME_PREFIX = "run-draft"
    NAME_FIELD = "run_id"

    @classmethod
    def name_of(cls, fields: Mapping[str, Any]) -> str:
        # Run ids are scoped by tenant, as the job ids they become are.
        return tenant_scoped(fields["tenant"], fields["run_id"])

    @event(Opened)
    def __init__(
        self, run_id: str, tenant: str, started: dict[str, Any], job_id: str | None = None
    ) -> None:
        self.run_id = run_id
        self.tenant = validate_tenant(tenant)
        self.started = started
        self.job_id = job_id
        """The job whose stream holds the run's events; None: the draft holds them (`events`)."""
        self.events: list[dict[str, Any]] = []
        self.sizes: list[int] = []
        self.steps: list[Step] = []
        """Each taken event's tool step, for a run whose job holds its events (`job_id`)."""
        """Each held event's size: the length of its canonical JSON, as the run limits count."""
        self.digests: dict[str, str] = {}
        self.final_output_digest: str | None = None
        self.abandoned_by: dict[str, Any] | None = None
        self.abandon_reason: str | None = None

    @property
    def count(self) -> int:
        """How many events the run has taken."""
        return len(self.sizes)

    @property
    def completed(self) -> bool:
        return self.final_output_digest is not None

    @property
    def status(self) -> str:
        """``open``, ``completed`` or ``abandoned``."""
        if self.abandoned_by is not None:
            return "abandoned"
        return "completed" if self.completed else "open"

    def start_digest(self) -> str:
        return digest(self.started)

    def append(
        self,
        batch: Sequence[tuple[str, dict[str, Any] | RunEvent]],
        check_sizes: SizeCheck = lambda *_: None,
        check_taken: Callable[[Sequence[int]], None] = lambda _: None,
    ) -> BatchOutcome:
        """Take the ``(event_id, event)`` pairs not held yet; re-sent ones are skipped.

        Events are their JSON for a draft that holds them, the validated events for one whose
        job stream does (`job_id`).
        A completed run takes none, but answers a batch it holds whole as all duplicates.
        ``check_sizes`` is given the sizes the run would hold and how many of them are new, and
        ``check_taken`` the positions in the batch of the new ones; either raises to refuse
        them, before anything is taken.
        """
        fresh: list[dict[str, Any]] = []
        sent_at: list[int] = []  # each fresh event's position in the batch
        seen: dict[str, str] = {}
        for position, (event_id, content) in enumerate(batch):
            if not CLIENT_EVENT_ID_PATTERN.fullmatch(event_id):
                msg = f"events[{position}].event_id {event_id!r}: expected 1-128 characters of"
                raise RunDraftError(f"{msg} letters, digits and . _ : -")
            content_digest, size = _digest_and_size(content)
            held = self.digests.get(event_id, seen.get(event_id))
            if held is None:
                seen[event_id] = content_digest
                item = {"event_id": event_id, "event": content, "digest": content_digest}
                fresh.append({**item, "size": size})
                sent_at.append(position)
            elif held != content_digest:
                msg = f"events[{position}].event_id {event_id!r} was sent before with other content"
                raise RunDraftError(msg)
        if fresh and self.status != "open":  # a batch re-sent whole is duplicates, though
            state = "complete" if self.completed else "abandoned"
            msg = f"run {self.run_id} is {state}: no more events may be added"
            raise RunDraftError(msg)
        if fresh:
            self._check_tool_boundary(
                tool_steps(self.events) if self.job_id is None else self.steps,
                steps := tool_steps(item["event"] for item in fresh),
                sent_at,
            )
            check_sizes([*self.sizes, *(item["size"] for item in fresh)], len(fresh))
            check_taken(sent_at)
            if self.job_id is None:
                self._appended(events=fresh)
            else:
                indexed = [
                    {"event_id": f["event_id"], "digest": f["digest"], "size": f["size"], "step": s}
                    for f, s in zip(fresh, steps, strict=True)
                ]
                self._indexed(entries=indexed)
        return BatchOutcome(len(fresh), len(batch) - len(fresh), self.count, tuple(sent_at))

    def _check_tool_boundary(
        self, held: Sequence[Step], fresh: Sequence[Step], sent_at: Sequence[int]
    ) -> None:
        """Only new events are checked: a batch that is all duplicates was taken in before."""
        problem = tool_boundary_problem([*held, *fresh])
        if problem is None:
            return
        position, message = problem
        if position < len(held):
            # Taken in before the rule it breaks was checked: no batch can mend the run.
            raise RunDraftError(held_out_of_place(self.run_id, position, message))
        raise ToolBoundaryError(sent_at[position - len(held)], message)

    @event(BatchAppended)
    def _appended(self, events: list[dict[str, Any]]) -> None:
        for item in events:
            self.events.append(item["event"])
            self.sizes.append(item["size"])
            self.digests[item["event_id"]] = item["digest"]

    @event(BatchIndexed)
    def _indexed(self, entries: list[dict[str, Any]]) -> None:
        for item in entries:
            self.sizes.append(item["size"])
            self.digests[item["event_id"]] = item["digest"]
            self.steps.append(tuple(item["step"]))  # stored as a JSON array

    def complete(self, final_output: Any) -> bool:
        """Mark the run complete; False when it already was, with this same final output."""
        if self.abandoned_by is not None:
            msg = f"run {self.run_id} was abandoned: it cannot be completed"
            raise RunDraftError(msg)
        final_digest = digest(final_output)
        if self.final_output_digest == final_digest:
            return False
        if self.completed:
            msg = f"run {self.run_id} was already completed with another final output"
            raise RunDraftError(msg)
        self._completed(final_output_digest=final_digest)
        return True

    @event(Completed)
    def _completed(self, final_output_digest: str) -> None:
        self.final_output_digest = final_output_digest

    def abandon(self, actor: dict[str, Any], reason: str) -> bool:
        """Close an open run without a job (its emitter is gone); False when it already was.

        A completed run cannot be abandoned: it is a job.
        """
        if self.completed:
            msg = f"run {self.run_id} is completed: it is a job and cannot be abandoned"
            raise RunDraftError(msg)
        if self.abandoned_by is not None:
            return False
        self._abandoned(actor=actor, reason=check_reason(reason))
        return True

    @event(Abandoned)
    def _abandoned(self, actor: dict[str, Any], reason: str) -> None:
        self.abandoned_by = actor
        self.abandon_reason = reason


def _digest_and_size(content: dict[str, Any] | RunEvent) -> tuple[str, int]:
    """An event's content digest and its size (the length of its canonical JSON, type included,
    as the run limits count it), from one encoding of its JSON; for a validated event, from the
    payload bytes it kept when validated (its JSON is those with its ``type`` member among them,
    keys sorted), with no encoding at all."""
    if isinstance(content, RunEvent):
        payload = content.written_payload().data
        kind = content.EVENT_TYPE.encode()
        # The payload is a non-empty object (``schema_version``): one comma, '"type":', the name
        # in quotes (a letter, then letters, digits or _: nothing to escape).
        return sha256_hex(kind + b"\n" + payload), len(payload) + 1 + 7 + len(kind) + 2
    encoded = canonical_json(content)
    return sha256_hex(encoded), len(encoded)


def held_out_of_place(run_id: str, position: int, message: str) -> str:
    """Why a run holding an event that breaks a rule checked since it was taken in (the tool or
    retrieval boundary, a hash) can never be completed."""
    return (
        f"run {run_id} holds event {position}, taken in before it was checked: {message}; it"
        " cannot be completed: send the run again as a new run"
    )
