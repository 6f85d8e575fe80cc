"""Spans arriving over OTLP/HTTP (``POST /v1/traces``): held in the ledger per tenant and trace
(`domain.held_trace`), and each trace recorded as a run once it is whole and quiet.

A request's spans are checked one by one as they arrive (`domain.trace_run.span_events`, and
the privacy rules' personal data and secrets): a span that cannot be taken in is rejected (the
OTLP answer's ``partial_success``) and held only as refused (its id and why, never its content),
so its trace is never recorded without it: sent again and taken in, it replaces the mark; a
trace whole and quiet with a span still refused is closed as refused. The others are held,
signed, before the request is answered. A trace is recorded when it is
whole (`domain.trace_spans.why_incomplete`) and no span of it has arrived for the quiet period
(``MACE_TRACE_QUIET_SECONDS``): exporters send a trace's spans as they end, children before
their parent mostly, but a child that ends after its root comes later, and the quiet period is
how long the service waits for it. There is no explicit end in OTLP; a trace whose spans keep
coming stays open. Closing is tried for the traces a request touched, at the end of that
request, and by the service's closer thread (`TraceCloser`) for every trace held open.

A whole trace that cannot be recorded (two tool calls under one id, a run over the limits, a
value its privacy rules never let the ledger keep in clear) is closed as refused, its reason
logged and kept on its stream, so no round tries it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from threading import Event, Lock, Thread
from typing import Final
from uuid import UUID

from eventsourcing.utils import get_topic

from domain.errors import InvalidInput
from domain.held_trace import HeldTrace
from domain.sensitive_data import first_sensitive
from domain.trace_run import span_events
from domain.trace_spans import Span, SpanError, why_incomplete
from infrastructure.application.privacy_rules import ClearPrivateValue, PrivacyRules
from infrastructure.application.trace_imports import TraceImports, TraceOutcome
from infrastructure.storage.store import LedgerStore

logger = logging.getLogger("mace.traces")

OPENED_TOPIC: Final = get_topic(HeldTrace.Opened)
PAGE: Final = 1000


@dataclass(frozen=True, slots=True)
class Intake:
    """What one export request did: spans newly held, one line per span rejected, the traces it
    recorded."""

    accepted: int
    rejected: list[str] = field(default_factory=list)
    recorded: list[TraceOutcome] = field(default_factory=list)


class TraceIntake:
    def __init__(self, store: LedgerStore, imports: TraceImports, privacy: PrivacyRules) -> None:
        self.store = store
        self.imports = imports
        self.privacy = privacy
        self._open: set[UUID] = set()
        """The held traces known to be open; the closer's scan of the log adds the others."""
        self._scanned = 0
        """The log position the scan for held traces has read up to."""
        self._lock = Lock()
        """Request threads and the closer share ``_open``."""

    def hold(self, spans: list[Span], tenant: str, now: float, quiet: float) -> Intake:
        """Hold ``spans`` for ``tenant`` (arrived at ``now``, wall-clock seconds), then record
        the traces they touched that are whole and have been quiet for ``quiet`` seconds."""
        taken: dict[str, list[Span]] = {}
        # A span that cannot be taken in is held as refused (its id, why), so that its trace is
        # never recorded as whole without it (`HeldTrace.take`).
        turned_away: dict[str, dict[str, str]] = {}
        rejected: list[str] = []
        denied = self.privacy.of({}).deny_sem_attributes
        for span in spans:
            why = self._why_not_taken(span, denied)
            if why is None:
                taken.setdefault(span.trace_id, []).append(span)
            else:
                rejected.append(why)
                turned_away.setdefault(span.trace_id, {})[span.span_id] = why
        accepted = 0
        touched: dict[UUID, HeldTrace] = {}
        for trace_id in {**taken, **turned_away}:
            name = HeldTrace.named(tenant, trace_id)
            stream = HeldTrace.id_for(name)
            its, away = taken.get(trace_id, []), turned_away.get(trace_id, {})
            take = partial(self._take, stream, name, tenant, trace_id, its, away, now)
            new, refused, touched[stream] = self.store.racing(take, f"spans of trace {trace_id}")
            accepted += new
            rejected += refused
        with self._lock:
            self._open.update(touched)
        # The traces as this request left them are closed from memory, not read back: a span
        # another request added since makes the close's write lose its race (`_closed_as`).
        recorded = [self._close(stream, now, quiet, held) for stream, held in touched.items()]
        return Intake(accepted, rejected, [outcome for outcome in recorded if outcome])

    @staticmethod
    def _why_not_taken(span: Span, denied: Iterable[str]) -> str | None:
        """One line saying why ``span`` cannot be taken in, naming it; None when it can."""
        try:
            span_events(span)
        except SpanError as bad:
            return str(bad)
        # Held spans are kept: one holding what privacy rules never let the ledger keep in
        # clear is not held at all (a run's own privacy snapshot is checked again when the
        # run is recorded; it is named by the root span, which may come last).
        found = first_sensitive(span.as_json(), denied)
        if found is None:
            return None
        return (
            f"{span.ref}: {found.path} holds {found.why}, which privacy rules never let"
            " the ledger keep in clear: send it as null (or masked)"
        )

    def _take(
        self,
        stream: UUID,
        name: str,
        tenant: str,
        trace_id: str,
        spans: list[Span],
        turned_away: dict[str, str],
        now: float,
    ) -> tuple[int, list[str], HeldTrace]:
        held = self._held(stream)
        if held is None:
            held = HeldTrace(name=name, tenant=tenant, trace_id=trace_id)
        new, refused = held.take(spans, now, turned_away)
        if held.pending_events:
            self.store.save(held)
        return new, refused, held

    def _held(self, stream: UUID) -> HeldTrace | None:
        if not self.store.stream_exists(stream):
            return None
        return self.store.repository.get_one(HeldTrace, stream, f"held trace {stream}")

    def close_quiet(
        self, now: float, quiet: float, streams: list[UUID] | None = None
    ) -> list[TraceOutcome]:
        """Record each of ``streams`` (default: every trace held open) that is whole and has been
        quiet for ``quiet`` seconds; the outcomes of those recorded or refused."""
        outcomes: list[TraceOutcome] = []
        if streams is None:
            with self._lock:
                streams = sorted(self._open)
        for stream in streams:
            outcome = self._close(stream, now, quiet)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def _close(
        self, stream: UUID, now: float, quiet: float, held: HeldTrace | None = None
    ) -> TraceOutcome | None:
        """Record the trace if whole and quiet, from ``held`` as last written (default: read)."""
        if held is None:
            held = self._held(stream)
        if held is None or held.closed:
            self._forget(stream)
            return None
        spans = sorted(held.held_spans(), key=lambda s: (s.start_unix_nano, s.span_id))
        if why_incomplete(spans) is not None or now - held.last_received_at < quiet:
            return None
        if held.refused_spans:
            # Whole and quiet but for a span never taken in: never recorded without it.
            why = held.refused_spans[min(held.refused_spans)]
            outcome = TraceOutcome(held.trace_id, incomplete=f"a span was refused: {why}")
            logger.warning("trace %s not recorded: %s", held.trace_id, outcome.incomplete)
            return self._closed_as(stream, held, outcome)
        try:
            run = self.imports.whole_run(held.trace_id, spans)
            outcome = self.imports.record(held.trace_id, run, held.tenant)
        except (InvalidInput, ClearPrivateValue) as refused:
            logger.warning("trace %s not recorded: %s", held.trace_id, refused)
            outcome = TraceOutcome(held.trace_id, incomplete=str(refused))
        return self._closed_as(stream, held, outcome)

    def _closed_as(
        self, stream: UUID, held: HeldTrace, outcome: TraceOutcome
    ) -> TraceOutcome | None:
        version = held.version
        read: list[HeldTrace | None] = [held]  # the first attempt writes onto the trace as held

        def attempt() -> bool:
            latest = read.pop() if read else self._held(stream)
            return self._mark_closed(latest, version, outcome)

        closed = self.store.racing(attempt, f"closing trace {held.trace_id}")
        if closed:
            self._forget(stream)
        return outcome if closed else None

    def _mark_closed(self, latest: HeldTrace | None, version: int, outcome: TraceOutcome) -> bool:
        """Close the trace as ``outcome`` says, unless spans arrived since it was read at
        ``version`` (the next round records it whole then; the run recorded now is answered as
        a duplicate if nothing changed): whether it is closed."""
        if latest is None or latest.version != version:
            return latest is not None and latest.closed
        if outcome.log is not None:
            latest.recorded(outcome.log.job_id)
        else:
            latest.refuse(outcome.incomplete or "not recordable")
        self.store.save(latest)
        return True

    def _forget(self, stream: UUID) -> None:
        with self._lock:
            self._open.discard(stream)

    def scan(self) -> None:
        """Find the traces held since the last scan (by any process): the closer's first scan,
        at start-up, finds those a stopped service left open."""
        while True:
            page = self.store.recorder.select_notifications(
                self._scanned + 1, PAGE, topics=[OPENED_TOPIC]
            )
            with self._lock:
                self._open.update(UUID(str(n.originator_id)) for n in page)
            if page:
                self._scanned = page[-1].id
            if len(page) < PAGE:
                return


class TraceCloser:
    """A thread of `mace serve` that records held traces once whole and quiet, every ``interval``
    seconds; a round that fails logs one line and the next tries again."""

    def __init__(
        self, intake: TraceIntake, quiet: float, interval: float, clock: Callable[[], float]
    ) -> None:
        self.intake = intake
        self.quiet = quiet
        self.interval = interval
        self.clock = clock
        self._stopping = Event()

    def tick(self) -> None:
        try:
            self.intake.scan()
            self.intake.close_quiet(self.clock(), self.quiet)
        except Exception as failed:
            logger.warning("closing held traces failed: %s", failed)

    @contextmanager
    def running(self) -> Iterator[None]:
        thread = Thread(target=self._loop, name="mace-trace-closer", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stopping.set()
            thread.join(timeout=2.0)

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval):
            self.tick()
