"""``mace bench``: how fast the ledger's own paths are on this machine, as printed figures.

Timings are never pass/fail in the test suite (DESIGN section 7); they are measured here, on an
empty store: the bench writes, and figures from a store already holding other data would not
compare (``mace bench`` makes one of its own: `bench_store`). Each figure is the median of
``rounds`` rounds; each round does the same work on fresh names, so every round writes as much as
the first. As it goes, the bench says each figure it measured (`Say`): a whole bench takes
minutes.

- ``write``: Stage-0 jobs run and recorded whole (the runtime deciding each one included), one
  transaction each; every event stored counts (the job's, its seal's witness, its SEM writes).
- ``record``: pure recording, no runtime: ``jobs`` runs of the Stage-0 iteration, built and parsed
  before the clock starts (`record_runs`), recorded as a platform team's recording is, through the
  Run Event Schema v1 import (`RunImports.record_once`, what ``mace ingest`` calls); every event
  stored counts.
- ``checkpoint``: a checkpoint written over the round's events (`mace checkpoint`).
- ``read``: every stored event read back in pages, its MAC verified (`mace verify --all` as it
  was before checkpoints: the baseline of the next figure). Over a few thousand events a verify
  is mostly fixed costs (opening, the checkpoints' signatures, the head index), so before
  the rounds the store is filled to ``verify_events`` with recorded runs of `BULK_RUN` events.
- ``verify``: `mace verify --all` whole: that read, after every checkpoint is checked and the
  Merkle tree recomputed over the log. `tree_cost` is its time over the read's (at most 1.25),
  fastest run against fastest run within a round, median over rounds; `tree_cpu_cost` the same
  for its processor time (one pass over the log feeds both: `verification.log_pass`).
- ``scan``: `mace audit`'s reading of the whole log with one worker (every event verified, every
  completed job replayed in audit mode, every stream held to the newest checkpoint), its record
  left out: events read per second, beside the raw read of as many rows.
- ``replay``: audit replays of the recorded jobs (load, verify, fold, re-decide, compare, record).
- ``whatif``: the round's jobs re-run under another router as ``mace audit --with router=ID``
  re-runs them (`WhatIfBatchService.report`, one worker, its record left out: two audit-mode
  replays a job, the declared snapshots' and the changed one's), jobs per second, beside the raw
  store reading as many rows as those jobs stored (their events, witnesses and SEM writes).
- ``memory``: memory writes to one tenant's log, which grows by ``memories`` each round.
- ``context`` and ``receipt replay``: receipts emitted over that log under a policy bundle, and
  replayed as emitted.
- ``concurrency``: 1, 2, 4 and 8 writer processes recording ``jobs`` Stage-0 jobs each at once:
  jobs/s in all and how many failed (`bench_writers`); measured once, after the rounds. `Scaling`
  says what 8 writers did over what 1 did, and the same for their raw baselines.

``http runs`` (after the rounds, unless ``http_runs`` is 0): runs recorded over HTTP by
``mace serve``, opened, sent in two batches of ``http_batch`` events and completed
(`bench_http`), events/s.

``otlp spans`` (after ``http runs``, unless ``otlp_spans`` is 0): an agent's traces exported
over OTLP/HTTP in protobuf to ``mace serve``, several spans a request, each trace recorded as a
run when its last span arrives (`bench_otlp`), spans/s.

``flatness`` (after the rounds, unless ``flat_entries`` is 0): memory writes and context
assemblies timed on a tenant's log of `FLAT_SMALL` entries and again once the same log holds
``flat_entries``, the same `FLAT_LIVE` facts written again and again: how much more each costs
on the longer log (the goal is at most 1.5x; snapshots keep it flat in the log's length).

``only`` runs some of these (`FIGURES`); a figure that needs another's work first (``replay``
and ``whatif`` the jobs of ``write``, ``receipt replay`` the receipts of ``context``) gets it
done untimed.

With ``compare_raw``, each figure but ``checkpoint`` gets its raw baseline, measured right after
it in the same round on the same store (`bench_raw`), so that the ledger and its baseline
alternate and a change in the machine's load hits both alike: the same rows written with plain
INSERTs at the same rows per commit, the same number read by a plain cursor with an HMAC and a
JSON parse each; for ``concurrency``, as many processes inserting a job's rows per commit at once.

Every figure says its median and its best round (rate, and with a raw baseline, the raw's and the
ratios), and per unit, over all its rounds: processor seconds (this process's and its finished
children's), statements sent to the store and round trips to the server (`WireTally`, counted in
this process while the bench runs: ``mace bench`` counts from before it opens its ledger), the
raw baseline's beside them. What a figure's own child processes sent is counted where the bench
wrote them (the writers report theirs); the HTTP service's process is not: the http runs and
otlp spans figures' ledger side has no counts (None).
"""

from __future__ import annotations

import resource
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

import orjson

from domain.canonical import canonical_json
from domain.context_assembly import ContextCaller, ContextRequest
from domain.governance import Actor
from domain.receipt import MemoryView, ReceiptKind
from domain.replay_access import ReplayMode
from domain.run_file import ParsedRun, parse_run
from domain.snapshot import Snapshot, SnapshotKind
from domain.whatif import WhatIfChanges, changes_of
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.interrupts import stop_if_interrupted
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.application.settings import Settings
from infrastructure.application.snapshots import default_snapshots
from infrastructure.application.store_status import IoTally, WireTally
from infrastructure.application.whatif_batch import BatchSelection
from infrastructure.tooling.bench_http import HTTP_BATCHES, Served, http_runs
from infrastructure.tooling.bench_otlp import SPANS_A_TRACE, otlp_spans
from infrastructure.tooling.bench_raw import RawStore, Row, raw_store, raw_work
from infrastructure.tooling.bench_writers import WRITER_COUNTS, WritersRun, writers_at_once
from infrastructure.tooling.load_workload import STAGE0_EVENTS, Workload, plan_runs
from projections.audit import AuditScope

ACTOR: Final = Actor.of("bench", ["operator", "admin", "auditor"])
TENANT: Final = "bench"
BUNDLE: Final = (
    "version: 1\nrules:\n"
    "- {id: hide-secret, when: {memory_label: secret}, action: deny}\n"
    "- {id: mask-pii, when: {memory_label: pii}, action: redact}\n"
)
WORDS: Final = ("alice", "bob", "plan", "invoice", "renewal", "refund", "trains", "email")


VERIFIES: Final = 3
"""Whole verifies in ``read`` and in ``verify``, each timed on its own too (`_tree_cost`)."""
BULK_RUN: Final = 100
"""Events of each run recorded to fill the store: started, 98 in between, completed."""


UNITS: Final = {
    "write": "events",
    "record": "events",
    "checkpoint": "events",
    "read": "events",
    "verify": "events",
    "scan": "events",
    "replay": "replays",
    "whatif": "jobs",
    "memory": "writes",
    "context": "receipts",
    "receipt replay": "replays",
}
SERVED: Final = {"http runs": "events", "otlp spans": "spans"}
"""The figures a service process records (`bench_http`, `bench_otlp`), and their units."""
FIGURES: Final = (*UNITS, "concurrency", *SERVED, "flatness")
"""Every figure the bench can measure, in the order it measures them (``only`` picks some)."""
NEEDS: Final = {"replay": "write", "whatif": "write", "receipt replay": "context"}
"""The figures whose work another figure's work needs first (done untimed when not picked)."""
VERIFIES_BY_SCAN: Final = ("read", "verify", "scan")
FLAT_SMALL: Final = 100
FLAT_LIVE: Final = 50
FLAT_TIMED: Final = 40
"""Writes, then assemblies, timed at each log length."""


FLAT_TENANT: Final = "bench-flat"


def _flat_key(n: int) -> str:
    return f"user/customer/c{n % FLAT_LIVE}/plan"


def _words(n: int) -> str:
    return " ".join(WORDS[(n + k) % len(WORDS)] for k in range(3)) + f" {n}"


def _flat_writes(ledger: Ledger, count: int) -> int:
    for n in range(count):
        ledger.memories.remember_fact(FLAT_TENANT, _flat_key(n), _words(n), [], ACTOR, None)
    return count


def _assemblies(ledger: Ledger, tenant: str, count: int) -> list[str]:
    """``count`` contexts assembled over the tenant's memories; their receipts' ids."""
    caller = ContextCaller(ACTOR.actor_id, ACTOR.roles)
    receipts = []
    for i in range(count):
        request = ContextRequest(f"{WORDS[i % len(WORDS)]} {WORDS[(i + 3) % len(WORDS)]}", 10)
        emitted = ledger.receipts.emit(Assembly(ReceiptKind.CONTEXT, tenant, caller, request, None))
        receipts.append(emitted["receipt"]["receipt_id"])
    return receipts


def record_runs(ledger: Ledger, tag: str, count: int) -> list[ParsedRun]:
    """``count`` runs of the Stage-0 iteration (the HTTP figure's runs, `plan_runs`), as a Run
    Event Schema v1 file of each would be parsed for ``mace ingest``: ready to record."""
    workload = Workload(clients=1, runs=count, events=STAGE0_EVENTS, replays=0)
    planned = plan_runs(workload, tag, ledger.snapshots.default_ids())
    runs = []
    for run in planned:
        events = [
            item["event"] for body in run.batch_bodies for item in orjson.loads(body)["events"]
        ]
        lines = [
            {"type": "RunStarted", **orjson.loads(run.open_body)},
            *events,
            {"type": "RunCompleted", **orjson.loads(run.complete_body)},
        ]
        runs.append(parse_run(canonical_json(line) for line in lines))
    return runs


@dataclass(frozen=True, slots=True)
class HttpLoad:
    """The ``http runs`` figure's size: runs, and events a batch."""

    runs: int
    batch: int


def _check_http_load(http: HttpLoad, settings: Settings) -> None:
    """Runs the service takes whole: at least one, each of `HTTP_BATCHES` batches that hold
    the Stage-0 iteration between them and that the service's limits allow."""
    if http.runs < 1:
        raise BenchError(f"--http-runs must be at least 1 (or 0: none), got {http.runs}")
    smallest = -(-STAGE0_EVENTS // HTTP_BATCHES)
    largest = min(settings.max_batch_events, settings.max_run_events // HTTP_BATCHES)
    if not smallest <= http.batch <= largest:
        msg = (
            f"--http-batch must be from {smallest} to {largest} (MACE_MAX_BATCH_EVENTS,"
            f" MACE_MAX_RUN_EVENTS), got {http.batch}"
        )
        raise BenchError(msg)


class BenchError(ValueError):
    """The bench cannot run here (a non-empty store, bad sizes)."""


Say = Callable[[str], None]
"""Told one line as each figure is measured."""


def figure_names(given: Iterable[str]) -> tuple[str, ...]:
    """The figures named in ``given`` (``--only``: names or comma lists of them, ``-`` for a
    space), in `FIGURES` order; `BenchError` naming the first unknown one and the known ones."""
    named = {part.strip().replace("-", " ") for value in given for part in value.split(",")}
    named.discard("")
    for name in sorted(named):
        if name not in FIGURES:
            known = ", ".join(known.replace(" ", "-") for known in FIGURES)
            raise BenchError(f"--only: no figure {name.replace(' ', '-')!r}; known: {known}")
    return tuple(name for name in FIGURES if name in named)


@dataclass(frozen=True, slots=True)
class BenchSize:
    """How much the bench does, checked whole (`check`) before any store is made or opened.

    ``only``: the figures to measure (`FIGURES`; empty: all of them)."""

    jobs: int
    memories: int
    contexts: int
    rounds: int
    verify_events: int = 0
    flat_entries: int = 0
    http: HttpLoad | None = None
    only: tuple[str, ...] = ()
    otlp_spans: int = 0

    def check(self, settings: Settings) -> None:
        for name, value in (
            ("jobs", self.jobs),
            ("memories", self.memories),
            ("contexts", self.contexts),
            ("rounds", self.rounds),
        ):
            if value < 1:
                raise BenchError(f"--{name} must be at least 1, got {value}")
        if self.verify_events < 0:
            raise BenchError(f"--verify-events must be at least 0, got {self.verify_events}")
        if self.http is not None:
            _check_http_load(self.http, settings)
        if self.otlp_spans < 0 or self.otlp_spans % SPANS_A_TRACE:
            msg = (
                f"--otlp-spans must be 0 (none) or a positive multiple of {SPANS_A_TRACE}"
                f" (the spans of an agent's trace), got {self.otlp_spans}"
            )
            raise BenchError(msg)
        if self.flat_entries and self.flat_entries <= FLAT_SMALL:
            msg = (
                f"--flat-entries must be 0 (none) or more than {FLAT_SMALL},"
                f" got {self.flat_entries}"
            )
            raise BenchError(msg)
        figure_names(self.only)

    def picked(self, name: str) -> bool:
        return not self.only or name in self.only


@dataclass(frozen=True, slots=True)
class Cost:
    """What one timed piece of work took: seconds by the clock, processor seconds (this
    process's and its finished children's, user and system), and what it sent to the store
    (None: not counted, it ran in another process)."""

    seconds: float
    cpu_seconds: float | None
    wire: WireTally | None


@dataclass(frozen=True, slots=True)
class Sample:
    """One round of a figure: ``count`` units at ``cost``; with ``raw``, the raw store doing the
    same rows right after (`bench_raw`), ``raw_count`` of them (None: ``count``; raw writers
    whose inserts failed did fewer)."""

    count: int
    cost: Cost
    raw: Cost | None = None
    raw_count: int | None = None

    @property
    def raw_units(self) -> int:
        return self.count if self.raw_count is None else self.raw_count

    @property
    def seconds(self) -> float:
        return self.cost.seconds

    @property
    def cpu_seconds(self) -> float:
        """Processor seconds of a figure measured in this process (never None there)."""
        assert self.cost.cpu_seconds is not None
        return self.cost.cpu_seconds


@dataclass(frozen=True, slots=True)
class PerUnit:
    """A figure's cost per unit over all its rounds (None: not counted)."""

    cpu_ms: float | None
    statements: float | None
    round_trips: float | None

    @classmethod
    def of(cls, count: int, costs: list[Cost]) -> PerUnit:
        wires = [cost.wire for cost in costs]
        cpus = [cost.cpu_seconds for cost in costs]
        statements = round_trips = cpu_ms = None
        if all(wire is not None for wire in wires):
            statements = sum(w.statements for w in wires if w is not None) / count
            round_trips = sum(w.round_trips for w in wires if w is not None) / count
        if all(cpu is not None for cpu in cpus):
            cpu_ms = 1000 * sum(cpu for cpu in cpus if cpu is not None) / count
        return cls(cpu_ms, statements, round_trips)

    def as_json(self) -> dict[str, float | None]:
        return {
            "cpu_ms": None if self.cpu_ms is None else round(self.cpu_ms, 4),
            "statements": None if self.statements is None else round(self.statements, 3),
            "round_trips": None if self.round_trips is None else round(self.round_trips, 3),
        }


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else 0.0


def _ratio(rate: float, raw: float | None) -> float | None:
    return None if raw is None or raw <= 0 else rate / raw


@dataclass(frozen=True, slots=True)
class Figure:
    """A figure over its rounds (``samples``); the concurrency figures say what the writers
    did (``writers``)."""

    name: str
    unit: str
    samples: tuple[Sample, ...]
    writers: WritersRun | None = None

    @property
    def per_second(self) -> float:
        """The median round's rate."""
        return statistics.median(_rate(s.count, s.seconds) for s in self.samples)

    @property
    def best_per_second(self) -> float:
        """The fastest round's rate: the one least slowed by anything else on the machine."""
        return max(_rate(s.count, s.seconds) for s in self.samples)

    def _raw_rates(self) -> list[float]:
        return [_rate(s.raw_units, s.raw.seconds) for s in self.samples if s.raw is not None]

    @property
    def raw_per_second(self) -> float | None:
        rates = self._raw_rates()
        return statistics.median(rates) if rates else None

    @property
    def raw_best_per_second(self) -> float | None:
        rates = self._raw_rates()
        return max(rates) if rates else None

    @property
    def ratio(self) -> float | None:
        """The ledger's median rate over the raw store's doing the same rows (None: not
        measured)."""
        return _ratio(self.per_second, self.raw_per_second)

    @property
    def best_ratio(self) -> float | None:
        """The ledger's best rate over the raw store's best."""
        return _ratio(self.best_per_second, self.raw_best_per_second)

    @property
    def count(self) -> int:
        return self.samples[len(self.samples) // 2].count

    @property
    def seconds(self) -> float:
        return self.samples[len(self.samples) // 2].seconds

    @property
    def per_unit(self) -> PerUnit | None:
        total = sum(s.count for s in self.samples)
        if total == 0:
            return None
        return PerUnit.of(total, [s.cost for s in self.samples])

    @property
    def raw_per_unit(self) -> PerUnit | None:
        raws = [s.raw for s in self.samples if s.raw is not None]
        total = sum(s.raw_units for s in self.samples if s.raw is not None)
        if not raws or total == 0:
            return None
        return PerUnit.of(total, raws)

    def as_json(self) -> dict[str, Any]:
        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        per_unit, raw_per_unit = self.per_unit, self.raw_per_unit
        answer: dict[str, Any] = {
            "name": self.name,
            "unit": self.unit,
            "rounds": len(self.samples),
            "per_second": round(self.per_second, 1),
            "best_per_second": round(self.best_per_second, 1),
            "count": self.count,
            "seconds": round(self.seconds, 4),
            "raw_per_second": rounded(self.raw_per_second, 1),
            "raw_best_per_second": rounded(self.raw_best_per_second, 1),
            "ratio": rounded(self.ratio, 3),
            "best_ratio": rounded(self.best_ratio, 3),
            "per_unit": None if per_unit is None else per_unit.as_json(),
            "raw_per_unit": None if raw_per_unit is None else raw_per_unit.as_json(),
        }
        if self.writers is not None:
            answer["writers"] = self.writers.writers
            answer["failures"] = self.writers.failures
            answer["first_failure"] = self.writers.first_failure
        return answer


def _cpu_seconds() -> float:
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _silent(line: str) -> None:
    """Told nothing: the bench run without anyone to say its figures to."""


def _told(sample: Sample, unit: str) -> str:
    """One round's figure as the bench says it on its way."""
    rate = _rate(sample.count, sample.seconds)
    said = f"{sample.count} {unit} in {sample.seconds:.3f} s ({rate:.1f}/s)"
    if sample.raw is not None:
        said += f", raw in {sample.raw.seconds:.3f} s"
    return said


def _timed(work: Callable[[], Any], wire: WireTally | None) -> tuple[Any, Cost]:
    """What ``work`` answered, and its `Cost` (what it sent, counted in ``wire``)."""
    sent = None if wire is None else wire.snapshot()
    cpu_started, started = _cpu_seconds(), time.perf_counter()
    answer = work()
    seconds, cpu = time.perf_counter() - started, _cpu_seconds() - cpu_started
    return answer, Cost(seconds, cpu, None if wire is None or sent is None else wire.since(sent))


def _writers_figure(run: WritersRun, raw: WritersRun | None) -> Figure:
    def cost(of: WritersRun) -> Cost:
        return Cost(of.seconds, of.cpu_seconds, of.wire)

    if raw is None:
        return Figure("concurrency", "jobs", (Sample(run.jobs, cost(run)),), run)
    return Figure("concurrency", "jobs", (Sample(run.jobs, cost(run), cost(raw), raw.jobs),), run)


@dataclass(frozen=True, slots=True)
class Scaling:
    """What the most writers at once (`WRITER_COUNTS`) recorded a second over what one writer
    did, for the ledger and its raw baseline, and how many of their jobs failed."""

    writers: int
    ratio: float | None
    raw_ratio: float | None
    failures: int
    raw_failures: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "writers": self.writers,
            "ratio": None if self.ratio is None else round(self.ratio, 3),
            "raw_ratio": None if self.raw_ratio is None else round(self.raw_ratio, 3),
            "failures": self.failures,
            "raw_failures": self.raw_failures,
        }


def _scaling(one: Figure, most: Figure, raw_failures: int | None) -> Scaling:
    assert most.writers is not None
    raw = _ratio(most.raw_per_second or 0.0, one.raw_per_second)
    ratio = _ratio(most.per_second, one.per_second)
    return Scaling(most.writers.writers, ratio, raw, most.writers.failures, raw_failures)


@dataclass(frozen=True, slots=True)
class TreeCost:
    """How much longer `mace verify --all` took with its checkpoint pass than without, by the
    clock and in processor time (medians over rounds)."""

    wall: float
    cpu: float


def _tree_cost(with_tree: list[Sample], without: list[Sample]) -> TreeCost:
    """The fastest verify with the checkpoint pass over the fastest without, of one round.

    This machine ran the same verify a third faster or slower from one run to the next; the
    fastest run of each is the one least slowed by anything else, so their ratio varies least.
    """
    return TreeCost(
        min(run.seconds for run in with_tree) / min(run.seconds for run in without),
        min(run.cpu_seconds for run in with_tree) / min(run.cpu_seconds for run in without),
    )


@dataclass(frozen=True, slots=True)
class Flatness:
    """What a memory write and a context assembly cost on a log of ``entries`` entries over
    what they cost on one of `FLAT_SMALL` (1.0: flat)."""

    entries: int
    memory: float
    context: float

    def as_json(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "memory": round(self.memory, 3),
            "context": round(self.context, 3),
        }


@dataclass(frozen=True, slots=True)
class BenchReport:
    """The figures; the tree's cost (None: ``read`` and ``verify`` not both measured); the
    writers' scaling (None: ``concurrency`` not measured); flatness (None: not measured)."""

    figures: list[Figure]
    tree_cost: TreeCost | None
    flatness: Flatness | None
    scaling: Scaling | None = None


class Bench:
    def __init__(
        self, ledger: Ledger, settings: Settings, size: BenchSize, wire: WireTally | None = None
    ) -> None:
        """A bench of ``size`` on ``ledger``, whose store must be empty. ``wire``: the count of
        what this process sends its stores (`counting_wire`, entered before ``ledger`` was
        opened); without it, no figure has statements or round trips."""
        size.check(settings)
        if ledger.status.head():
            raise BenchError("the bench writes: give it an empty store")
        self.ledger = ledger
        self.settings = settings
        self.size = size
        self.wire = wire

    def run(self, *, compare_raw: bool = False, say: Say | None = None) -> BenchReport:
        """The figures; the tree's cost: verify with and without the checkpoint pass, both timed
        over the same store within a round (so the store's growth does not enter); and writer
        processes recording ``jobs`` each at once (`bench_writers`), once, after the rounds.
        ``compare_raw``: each figure's raw baseline beside it (`bench_raw`). ``say`` is told
        each figure as it is measured."""
        told: Say = say or _silent
        self.ledger.policy.set_bundle(TENANT, BUNDLE, ACTOR)
        if self.size.verify_events:
            told(f"filling the store to {self.size.verify_events} events")
        self._fill()
        raw = raw_store(self.ledger.status) if compare_raw else None
        try:
            return self._measure(raw, told)
        finally:
            if raw is not None:
                raw.drop()
                raw.close()

    def _measure(self, raw: RawStore | None, say: Say) -> BenchReport:
        samples: dict[str, list[Sample]] = {}
        costs: list[TreeCost] = []
        job_rows: list[Row] = []
        written = 0
        rounds, size = self.size.rounds, self.size
        steps = {name for name in UNITS if size.picked(name)}
        steps |= {NEEDS[name] for name in steps if name in NEEDS}
        if size.picked("concurrency") and raw is not None:
            steps.add("write")  # the raw writers insert a job's rows as ``write`` stored them
        for round_number in range(rounds):
            runs: dict[str, list[Sample]] = {"read": [], "verify": []}
            for name, work in self._round(round_number, runs, steps):
                stop_if_interrupted()
                head = self._head()
                # ``whatif`` re-runs the jobs ``write`` stored this round: its raw baseline reads
                # as many rows as those jobs stored.
                reads = written if name == "whatif" else None
                sample = self._measured(name, work, raw if size.picked(name) else None, reads)
                if name == "write":
                    written = sample.count
                if raw is not None and name == "write" and not job_rows:
                    job_rows = raw.written_after(head, sample.count // self.size.jobs)
                if not size.picked(name):
                    continue
                samples.setdefault(name, []).append(sample)
                say(f"round {round_number + 1}/{rounds} {name}: {_told(sample, UNITS[name])}")
            if runs["read"] and runs["verify"]:
                costs.append(_tree_cost(runs["verify"], runs["read"]))
        figures = [Figure(name, UNITS[name], tuple(rounds_)) for name, rounds_ in samples.items()]
        writers, raw_failures = (
            self._writers(raw, job_rows, say) if size.picked("concurrency") else ([], None)
        )
        figures += writers
        if self.size.http is not None and size.picked("http runs"):
            load = self.size.http
            sent = http_runs(self.ledger, self.settings, load.runs, load.batch)
            figures.append(self._served_figure("http runs", sent, raw))
            say(f"http runs: {sent.count} events in {sent.seconds:.3f} s")
        if self.size.otlp_spans and size.picked("otlp spans"):
            sent = otlp_spans(self.ledger, self.settings, self.size.otlp_spans)
            figures.append(self._served_figure("otlp spans", sent, raw))
            say(f"otlp spans: {sent.count} spans in {sent.seconds:.3f} s")
        tree_cost = None
        if costs:
            wall = statistics.median(cost.wall for cost in costs)
            tree_cost = TreeCost(wall, statistics.median(cost.cpu for cost in costs))
        flat = self.size.flat_entries and size.picked("flatness")
        flatness = self._flatness(say) if flat else None
        scaling = _scaling(writers[0], writers[-1], raw_failures) if writers else None
        return BenchReport(figures, tree_cost, flatness, scaling)

    def _writers(
        self, raw: RawStore | None, job_rows: list[Row], say: Say
    ) -> tuple[list[Figure], int | None]:
        """The concurrency figures: 1, 2, 4 and 8 writers, each beside its raw baseline; and how
        many of the most raw writers' inserts failed (None: no raw baseline)."""
        figures, raw_failures = [], None
        for writers in WRITER_COUNTS:
            stop_if_interrupted()
            tag = f"bench concurrency {writers}"
            run = writers_at_once(self.settings, writers, self.size.jobs, tag)
            raw_run = (
                None
                if raw is None
                else writers_at_once(self.settings, writers, self.size.jobs, "raw", job_rows)
            )
            said = f"concurrency {writers}: {run.jobs} jobs in {run.seconds:.3f} s"
            said += f", {run.failures} failed"
            if raw_run is not None:
                raw_failures = raw_run.failures
                said += f"; raw {raw_run.jobs} in {raw_run.seconds:.3f} s, {raw_failures} failed"
            say(said)
            figures.append(_writers_figure(run, raw_run))
        return figures, raw_failures

    def _served_figure(self, name: str, sent: Served, raw: RawStore | None) -> Figure:
        """A figure of what a service process recorded (``http runs``, ``otlp spans``)."""
        # The service records in a process of its own: its statements are not this process's
        # to count (its processor time is read from the system, where it says it).
        raw_cost = None
        if raw is not None:
            did = IoTally(rows_written=sent.rows_written, commits=sent.commits)
            raw_cost = self._raw_cost(raw, did, sent.written_after)
        cost = Cost(sent.seconds, sent.cpu_seconds, None)
        return Figure(name, SERVED[name], (Sample(sent.count, cost, raw_cost),))

    def _flatness(self, say: Say) -> Flatness:
        """Writes and assemblies timed at `FLAT_SMALL` entries, then at ``flat_entries``."""
        entries = self.size.flat_entries
        self.ledger.policy.set_bundle(FLAT_TENANT, BUNDLE, ACTOR)
        short = self._flat_costs(FLAT_SMALL)
        long = self._flat_costs(entries)
        flat = Flatness(entries, long[0] / short[0], long[1] / short[1])
        say(
            f"flatness: a log of {entries} entries: a write costs {flat.memory:.2f}x,"
            f" a context {flat.context:.2f}x what they cost on one of {FLAT_SMALL}"
        )
        return flat

    def _flat_costs(self, entries: int) -> tuple[float, float]:
        """Seconds a memory write and a context assembly take once the log holds ``entries``."""
        memories, n = self.ledger.memories, 0
        log = memories.log(FLAT_TENANT)
        n = 0 if log is None else log.version
        while n < entries - FLAT_TIMED:
            stop_if_interrupted()
            memories.remember_fact(FLAT_TENANT, _flat_key(n), _words(n), [], ACTOR, None)
            n += 1
        # Untimed, once: the first receipt after the fill brings the read models up to date
        # with every entry written since (a cost of the fill, paid once, not of a context).
        _assemblies(self.ledger, FLAT_TENANT, 1)
        _, write = _timed(lambda: _flat_writes(self.ledger, FLAT_TIMED), None)
        _, assemble = _timed(lambda: _assemblies(self.ledger, FLAT_TENANT, FLAT_TIMED), None)
        return write.seconds / FLAT_TIMED, assemble.seconds / FLAT_TIMED

    def _measured(
        self, name: str, work: Callable[[], int], raw: RawStore | None, reads: int | None = None
    ) -> Sample:
        """``work`` timed; then, with ``raw``, the raw store timed doing the same rows (reading
        ``reads`` rows, when given: the rows the work's jobs are made of)."""
        io = self.ledger.status.io
        before, head = io.snapshot(), self._head()
        count, cost = _timed(work, self.wire)
        sample = Sample(count, cost)
        if raw is None or name == "checkpoint":
            return sample
        # A verify or an audit reads the store with its own cursor, outside the tally: every
        # event, once (the few streams an audit's replays read besides are left out).
        if reads is not None:
            did = IoTally(rows_read=reads)
        else:
            did = IoTally(rows_read=count) if name in VERIFIES_BY_SCAN else io.since(before)
        return replace(sample, raw=self._raw_cost(raw, did, head))

    def _raw_cost(self, raw: RawStore, did: IoTally, written_after: int) -> Cost:
        """The raw store doing the I/O a figure did (``did``), whose rows were written after
        notification ``written_after``: the rows fetched first, untimed."""
        work = raw_work(raw, did, written_after)
        return _timed(work, self.wire)[1]

    def _fill(self) -> None:
        """Record runs until the store holds ``verify_events`` events."""
        number = 0
        while self._head() < self.size.verify_events:
            stop_if_interrupted()
            lines = [{"type": "RunStarted", "seed": number, "input": f"bulk run {number}"}]
            lines += [
                {"type": "ErrorEvent", "code": "E_BENCH", "message": f"step {step} of {number}"}
                for step in range(BULK_RUN - 2)
            ]
            lines.append({"type": "RunCompleted", "final_output": f"bulk run {number} done"})
            self.ledger.run_imports.record_once(parse_run(map(orjson.dumps, lines)), TENANT)
            number += 1

    def _head(self) -> int:
        return self.ledger.status.head()

    def _whatif_changes(self) -> WhatIfChanges:
        """``whatif``'s change: the default router's rules under another seed namespace, a
        router each job is re-decided under (stored once, untimed: a second put finds it)."""
        payload = default_snapshots()[SnapshotKind.ROUTER].payload
        router = Snapshot.declare("router", payload, seed_namespace="bench-whatif")
        return changes_of([("router", self.ledger.snapshots.put(router)[0].snapshot_id)])

    def _round(
        self, number: int, runs: dict[str, list[Sample]], steps: set[str]
    ) -> list[tuple[str, Callable[[], int]]]:
        """The round's ``steps``; ``read`` and ``verify`` keep each of their verifies in
        ``runs``. Whatever a step needs made beforehand (``record``'s runs) is made here,
        before any step is timed (``whatif``'s router)."""
        job_ids: list[str] = []
        receipt_ids: list[str] = []
        recorded = (
            record_runs(self.ledger, f"record-{number}", self.size.jobs)
            if "record" in steps
            else []
        )
        changes = self._whatif_changes() if "whatif" in steps else None

        def write() -> int:
            before = self._head()
            for i in range(self.size.jobs):
                log = self.ledger.jobs.run(f"what is {number} + {i}?", f"bench-{number}-{i}")
                job_ids.append(log.job_id)
            return self._head() - before  # every event stored with the jobs, witnesses included

        def record() -> int:
            before = self._head()
            for run in recorded:
                self.ledger.run_imports.record_once(run, TENANT)
            return self._head() - before

        def checkpoint() -> int:
            checkpoints = self.ledger.checkpoints
            before = checkpoints.newest()
            covered = checkpoints.write().newest.checkpoint.tree_size
            return covered - (0 if before is None else before.checkpoint.tree_size)

        def verifies(name: str, tree: bool) -> Callable[[], int]:
            def work() -> int:
                for _ in range(VERIFIES):
                    count, cost = _timed(
                        lambda: self.ledger.checkpoints.verify_events(tree=tree), None
                    )
                    runs[name].append(Sample(count, cost))
                return sum(run.count for run in runs[name])

            return work

        def scan() -> int:
            with AuditWorkers(self.settings, 1) as one:
                return self.ledger.audits.audit(AuditScope(), one).findings.events

        def replay() -> int:
            for job_id in job_ids:
                self.ledger.replays.run(job_id, ReplayMode.AUDIT, ACTOR)
            return len(job_ids)

        def whatif() -> int:
            assert changes is not None
            selection = BatchSelection(jobs=tuple(job_ids))
            with AuditWorkers(self.settings, 1) as one:
                report = self.ledger.whatif_batches.report(selection, changes, ACTOR, workers=one)
            return int(report["totals"]["jobs"])

        def memory() -> int:
            for i in range(self.size.memories):
                labels = ["pii"] if i % 7 == 0 else ["secret"] if i % 11 == 0 else []
                self.ledger.memories.remember_episode(TENANT, _words(i), labels, ACTOR, None)
            return self.size.memories

        def context() -> int:
            receipt_ids.extend(_assemblies(self.ledger, TENANT, self.size.contexts))
            return self.size.contexts

        def receipt_replay() -> int:
            for receipt_id in receipt_ids:
                self.ledger.receipts.replay(receipt_id, TENANT, ACTOR, MemoryView.AS_EMITTED)
            return len(receipt_ids)

        every = [
            ("write", write),
            ("record", record),
            ("checkpoint", checkpoint),
            ("read", verifies("read", tree=False)),
            ("verify", verifies("verify", tree=True)),
            ("scan", scan),
            ("replay", replay),
            ("whatif", whatif),
            ("memory", memory),
            ("context", context),
            ("receipt replay", receipt_replay),
        ]
        return [(name, work) for name, work in every if name in steps]
