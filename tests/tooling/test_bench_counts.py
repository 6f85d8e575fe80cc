"""What ``mace bench`` counts per unit (statements, round trips) is what went over the wire, and
``--only`` measures the figures named and no other.

Nothing here asserts a speed: counts are exact, timings are printed by the bench only.
"""

from __future__ import annotations

import select
import tempfile
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import IO, Any

import orjson
import psycopg
import pytest
from psycopg import pq
from support.ledger_fixtures import run, store_of
from support.store_copies import fingerprint

from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.store_status import WireTally, counting_wire
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import ACTOR, FIGURES, TENANT, record_runs
from infrastructure.tooling.bench_raw import raw_store

TINY = (
    *("--jobs", "1", "--memories", "1", "--contexts", "1", "--rounds", "2"),
    *("--verify-events", "0", "--flat-entries", "0", "--http-runs", "0", "--otlp-spans", "0"),
)


class ProtocolTrace:
    """libpq's own trace of every PostgreSQL connection made while it is on: each message the
    client sent (F) and received (B), per connection, in order."""

    def __init__(self) -> None:
        self.files: list[IO[str]] = []

    def follow(self, connection: psycopg.Connection[Any]) -> None:
        file = tempfile.TemporaryFile("w+")  # noqa: SIM115  # read back in `wire`
        self.files.append(file)
        connection.pgconn.trace(file.fileno())
        connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def wire(self) -> WireTally:
        """Statements: the Execute and Query messages sent. Round trips: the times the client,
        having sent, read the server's answer (a run of F lines followed by a B line)."""
        statements = round_trips = 0
        for file in self.files:
            file.seek(0)
            sides = [line.split("\t")[:3] for line in file.read().splitlines()]
            statements += sum(1 for side in sides if side[0] == "F" and side[2] in EXECUTING)
            turns = pairwise(side[0] for side in sides)
            round_trips += sum(1 for turn in turns if turn == ("F", "B"))
        return WireTally(statements, round_trips)


EXECUTING = ("Execute", "Query")


@pytest.fixture
def protocol_trace(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProtocolTrace]:
    """Every psycopg connection made in the test traced from its first statement until it is
    closed (libpq writes the trace through a buffer it flushes when tracing stops)."""
    trace = ProtocolTrace()
    connect: Callable[..., psycopg.Connection[Any]] = psycopg.Connection.connect
    close = psycopg.Connection.close

    def traced(cls: type[psycopg.Connection[Any]], *args: Any, **kwargs: Any) -> Any:
        connection = connect(*args, **kwargs)
        trace.follow(connection)
        return connection

    def untraced(connection: psycopg.Connection[Any]) -> None:
        if not connection.closed:
            connection.pgconn.untrace()
        close(connection)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(traced))
    # ``psycopg.connect`` is the classmethod as bound when psycopg was imported.
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)
    monkeypatch.setattr(psycopg.Connection, "close", untraced)
    yield trace
    for file in trace.files:
        file.close()


def test_statements_and_round_trips_are_what_libpq_sent_and_waited_for(
    settings: Settings, protocol_trace: ProtocolTrace
) -> None:
    """A job, a recorded run, a verify, an audit replay and a raw baseline's insert and read,
    counted by `counting_wire` and by libpq's protocol trace of the same connections: the same
    statements and round trips, pipeline mode (a job's save) and server cursors included."""
    if settings.store.startswith("sqlite"):
        pytest.skip("PostgreSQL's wire: SQLite's statements are SQLite's own trace (below)")
    with counting_wire() as wire, Ledger.open(settings, checkpoint_on_close=False) as ledger:
        log = ledger.jobs.run("what is 2 + 3?", "counted")
        ledger.run_imports.record_once(record_runs(ledger, "counted", 1)[0], TENANT)
        ledger.checkpoints.verify_events(tree=True)
        ledger.replays.run(log.job_id, ReplayMode.AUDIT, ACTOR)
        raw = raw_store(ledger.status)
        try:
            raw.insert(raw.written_after(0, 8), 2)
            raw.read(20)
        finally:
            raw.drop()
            raw.close()
    counted = wire.snapshot()
    assert counted.statements > 20 and counted.round_trips > 10
    assert counted == protocol_trace.wire()


def test_answers_read_while_a_pipeline_still_sends_are_round_trips_counted(
    settings: Settings, protocol_trace: ProtocolTrace
) -> None:
    """A server that answers before psycopg waits for it (a loaded client): an answer already on
    the socket when the Sync goes, read as psycopg sends, is a round trip, and so is the Sync's,
    wherever psycopg reads it; then the pipeline's closing Sync: three, as libpq traced them."""
    if settings.store.startswith("sqlite"):
        pytest.skip("PostgreSQL's pipeline mode")
    with (
        counting_wire() as wire,
        psycopg.connect(settings.store, autocommit=True) as connection,
        connection.pipeline() as pipeline,
    ):
        connection.execute("SELECT 1")
        # A Flush asks the server for what it holds: its answer to the query is on the socket
        # before the Sync is sent.
        connection.pgconn.send_flush_request()
        while connection.pgconn.flush():
            pass
        select.select([connection.pgconn.socket], [], [])
        before = wire.snapshot()
        pipeline.sync()
        synced = wire.since(before)
    assert (synced.statements, synced.round_trips) == (0, 2)
    assert wire.snapshot() == protocol_trace.wire() == WireTally(1, 3)


def test_a_raw_insert_is_its_rows_and_a_begin_and_commit_per_commit(settings: Settings) -> None:
    """Eight rows in two commits: twelve statements on SQLite (its trace callback fires once a row
    of an ``executemany``); on PostgreSQL the same twelve in six round trips, each commit's inserts
    sent in one pipeline."""
    with counting_wire() as wire, Ledger.open(settings, checkpoint_on_close=False) as ledger:
        ledger.jobs.run("what is 2 + 3?", "rows")
        raw = raw_store(ledger.status)
        try:
            rows = raw.written_after(0, 8)
            before = wire.snapshot()
            raw.insert(rows, 2)
            did = wire.since(before)
        finally:
            raw.drop()
            raw.close()
    expected = (12, 0) if settings.store.startswith("sqlite") else (12, 6)
    assert (did.statements, did.round_trips) == expected


def test_counts_do_not_nest_and_stop_with_their_block(settings: Settings) -> None:
    with counting_wire() as wire:
        with pytest.raises(RuntimeError, match="one count at a time"), counting_wire():
            pass
        with Ledger.open(settings, checkpoint_on_close=False) as ledger:
            ledger.jobs.run("what is 2 + 3?", "inside")
        inside = wire.snapshot()
    assert inside.statements > 0
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        ledger.jobs.run("what is 2 + 4?", "outside")
    assert wire == inside


def test_only_measures_the_figures_named_with_their_counts_and_baselines(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--only`` takes names and comma lists; ``replay`` needs ``write``'s jobs, which are made
    untimed. Each figure has its median and best round, per unit processor time, statements and
    round trips, its raw baseline's beside them."""
    code, out, err = run(
        capsys,
        "bench",
        *TINY,
        "--only",
        "replay,record",
        "--only",
        "record",
        "--compare-raw",
        "--json",
    )
    assert code == 0, err
    report = orjson.loads(out)
    assert report["only"] == ["record", "replay"]
    assert [f["name"] for f in report["figures"]] == ["record", "replay"]
    assert (report["tree_cost"], report["scaling"], report["flatness"]) == (None, None, None)
    postgres = not cli_env.store.startswith("sqlite")
    for figure in report["figures"]:
        assert figure["rounds"] == 2
        assert figure["best_per_second"] >= figure["per_second"] > 0
        assert figure["raw_best_per_second"] >= figure["raw_per_second"] > 0
        for costs in (figure["per_unit"], figure["raw_per_unit"]):
            assert costs["cpu_ms"] > 0 and costs["statements"] > 0
            assert (costs["round_trips"] > 0) is postgres
    record = report["figures"][0]
    # A run of the Stage-0 iteration recorded per commit, as the raw store inserts its rows.
    assert record["unit"] == "events" and record["count"] >= 6
    said = [line.split(":")[1] for line in err.splitlines() if "round " in line]
    assert said == [f" round {n}/2 {name}" for n in (1, 2) for name in ("record", "replay")]


def test_the_batch_whatif_is_measured_in_jobs_beside_the_raw_read(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """``whatif``: the round's jobs (``write``'s, made untimed) re-run under another router as
    ``mace audit --with`` re-runs them, one worker, its record left out; jobs per second beside
    the raw store reading the rows the what-if read."""
    code, out, err = run(
        capsys, "bench", *TINY, "--jobs", "2", "--only", "whatif", "--compare-raw", "--json"
    )
    assert code == 0, err
    report = orjson.loads(out)
    [whatif] = report["figures"]
    assert (whatif["name"], whatif["unit"], whatif["count"], whatif["rounds"]) == (
        "whatif",
        "jobs",
        2,
        2,
    )
    assert whatif["raw_per_second"] > 0 and whatif["ratio"] > 0
    assert whatif["per_unit"]["statements"] > 0 and whatif["raw_per_unit"]["statements"] > 0


def test_an_unknown_figure_is_refused_in_one_line_naming_the_known_ones(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(cli_env.store)
    code, out, err = run(capsys, "bench", "--only", "write,nope")
    known = ", ".join(name.replace(" ", "-") for name in FIGURES)
    assert (code, out) == (2, "")
    assert err == f"mace: INVALID_INPUT: --only: no figure 'nope'; known: {known}\n"
    assert fingerprint(cli_env.store) == before


def test_a_writer_reports_what_its_jobs_spent(settings: Settings) -> None:
    """The concurrency figures count in the writer processes: each says its processor time and
    what it sent over its jobs, from the go."""
    from infrastructure.tooling.bench_writers import writers_at_once  # noqa: PLC0415

    Ledger.open(settings).close()
    ran = writers_at_once(settings, 2, 1, "tallied")
    assert (ran.jobs, ran.failures) == (2, 0)
    assert ran.cpu_seconds > 0
    assert ran.wire.statements > 2
    assert (ran.wire.round_trips > 0) is (not settings.store.startswith("sqlite"))
    with Ledger.open(settings) as ledger:
        assert store_of(ledger).verify_all().jobs == 2
