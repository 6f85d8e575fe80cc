"""What an OTLP request costs the held trace it completes, and the race its close can lose.

A request that brings the last span of a whole trace (quiet period 0) holds the spans, records
the run and closes the trace. The trace is read once, for the hold: the close starts from the
trace as the hold wrote it. When a span of the trace arrives while the run is being recorded,
the close's write loses its race and the close decides again on the trace as stored. Both
stores."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from support.ledger_fixtures import store_of
from support.otlp_traces import TRACE, agent_trace, export, span

from domain.held_trace import HeldTrace
from domain.trace_spans import Span
from infrastructure.application.ledger import Ledger
from infrastructure.application.otlp_decoding import spans_of_json
from infrastructure.application.trace_imports import TraceOutcome

pytestmark = pytest.mark.storage
STREAM = HeldTrace.id_for(HeldTrace.named("acme", TRACE))
LATE = "eee19b7ec3c1b177"


def spans(*made: dict[str, Any]) -> list[Span]:
    return spans_of_json(export(*made))


def test_a_request_completing_a_trace_reads_the_held_trace_once(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_of(ledger)
    reads: list[str] = []
    exists, get_one = store.stream_exists, store.repository.get_one

    def counted_exists(stream: UUID) -> bool:
        if stream == STREAM:
            reads.append("exists")
        return exists(stream)

    def counted_get_one(kind: type[Any], stream: UUID, what: str) -> Any:
        if stream == STREAM:
            reads.append("events")
        return get_one(kind, stream, what)

    ledger.checkpoints.write()  # the store as the service's notary keeps it: checkpointed
    monkeypatch.setattr(store, "stream_exists", counted_exists)
    monkeypatch.setattr(store.repository, "get_one", counted_get_one)
    root, chat, tool = agent_trace()
    first = ledger.trace_intake.hold(spans(chat, tool), "acme", 1e9, 0.0)
    assert (first.accepted, first.recorded, reads) == (2, [], ["exists"])
    reads.clear()
    last = ledger.trace_intake.hold(spans(root), "acme", 1e9 + 1, 0.0)
    [outcome] = last.recorded
    assert outcome.log is not None
    # The hold reads the trace (1 existence check, 1 read of its events); the close and the
    # mark that closes it read nothing more.
    assert reads == ["exists", "events"]
    assert ledger.trace_intake.close_quiet(now=4e9, quiet=0.0) == []
    assert store.repository.get_one(HeldTrace, STREAM, "held").job_id == outcome.log.job_id


def test_a_span_arriving_while_the_run_is_recorded_makes_the_close_decide_again(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    intake = ledger.trace_intake
    record = intake.imports.record
    late = span(LATE, "format the answer", {}, start=50, end=60)

    def record_while_a_span_arrives(trace_id: str, run: Any, tenant: str) -> TraceOutcome:
        # Another request holds a span of the trace (it does not close it: quiet not over).
        assert intake.hold(spans(late), tenant, 1e9 + 2, 1e6).accepted == 1
        return record(trace_id, run, tenant)

    ledger.checkpoints.write()
    monkeypatch.setattr(intake.imports, "record", record_while_a_span_arrives)
    answered = intake.hold(spans(*agent_trace()), "acme", 1e9, 0.0)
    # The run of three spans was recorded, but the trace now holds four: it is not marked
    # closed by this request, and stays held open for the next round.
    assert answered.recorded == []
    held = store_of(ledger).repository.get_one(HeldTrace, STREAM, "held")
    assert (held.closed, len(held.spans)) == (False, 4)
