"""``mace bench`` runs every measured path on both stores, on a store of its own: the store
``MACE_STORE`` names is left as it was, and nothing of the bench's is left when it ends, Ctrl-C
included. It says each figure on standard error as it goes (``--quiet``: nothing).

Nothing here asserts a speed: figures are printed by the bench, never pass/fail in tests.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import (
    RawTable,
    interrupted,
    mace_to_interrupt,
    run,
    settings_for,
    store_of,
)
from support.lost_ctrl_c import LOST_CTRL_C, CtrlCAfterLine, python_ctrl_c
from support.store_copies import fingerprint

from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.otlp_decoding import spans_of_protobuf
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import ACTOR, Bench, BenchError, BenchSize, HttpLoad
from infrastructure.tooling.bench_otlp import plan_exports
from infrastructure.tooling.bench_writers import writers_at_once

LIMITS = " (MACE_MAX_BATCH_EVENTS, MACE_MAX_RUN_EVENTS)"


TINY = (
    *("--jobs", "1", "--memories", "1", "--contexts", "1", "--rounds", "1"),
    *("--verify-events", "0", "--flat-entries", "0", "--http-runs", "0", "--otlp-spans", "0"),
)


def test_every_path_is_measured(settings: Settings) -> None:
    """The bench's own paths through the Python API, on the test's store (``mace bench`` gives
    it a store of its own: `test_the_bench_runs_on_a_store_of_its_own`)."""
    size = BenchSize(2, 3, 2, 2, 150, 160, HttpLoad(2, 5), otlp_spans=8)
    said: list[str] = []
    with Ledger.open(settings) as ledger:
        report = Bench(ledger, settings, size).run(say=said.append)
    figures = {f.name: f.as_json() for f in report.figures if f.name != "concurrency"}
    # Two runs over HTTP, each sent in two batches of five events: ten events a run.
    assert figures.pop("http runs")["count"] == 2 * 10
    # Two agent traces of four spans, over OTLP/HTTP.
    otlp = figures.pop("otlp spans")
    assert (otlp["count"], otlp["unit"]) == (8, "spans")
    assert list(figures) == [
        "write",
        "record",
        "checkpoint",
        "read",
        "verify",
        "scan",
        "replay",
        "whatif",
        "memory",
        "context",
        "receipt replay",
    ]
    # The round's writes and whatever else the store took since the last checkpoint.
    assert figures["checkpoint"]["count"] >= figures["write"]["count"]
    assert figures["verify"]["count"] == figures["read"]["count"]
    # One audit's read of the whole store: at least the runs it was filled with, once.
    assert figures["scan"]["count"] >= 200
    assert figures["scan"]["count"] < figures["read"]["count"]
    # Three whole verifies a figure, of a store first filled with two runs of 100 events.
    assert figures["read"]["count"] % 3 == 0
    assert figures["read"]["count"] >= 3 * 200
    assert report.tree_cost is not None
    assert report.tree_cost.wall > 0
    assert report.tree_cost.cpu > 0
    # Writer processes at once, two jobs each: every one recorded, none failed.
    writers = [f.as_json() for f in report.figures if f.name == "concurrency"]
    assert [(c["writers"], c["count"], c["failures"]) for c in writers] == [
        (1, 2, 0),
        (2, 4, 0),
        (4, 8, 0),
        (8, 16, 0),
    ]
    assert all(c["first_failure"] is None and c["per_second"] > 0 for c in writers)
    assert figures["replay"]["count"] == figures["whatif"]["count"] == 2
    assert figures["memory"]["count"] == 3
    assert figures["context"]["count"] == figures["receipt replay"]["count"] == 2
    assert figures["write"]["count"] > 2 * 2  # more than one event per job
    # Two runs of the Stage-0 iteration: started, its four events, completed, and what the
    # ledger stores beside them (the seal, the content index).
    assert figures["record"]["count"] >= 2 * 6
    assert all(f["per_second"] > 0 and f["unit"] for f in figures.values())
    # Writes and contexts timed on a log of 100 entries, then of 160: each cost over the other.
    assert report.flatness is not None and report.flatness.entries == 160
    assert report.flatness.memory > 0 and report.flatness.context > 0
    # Without --compare-raw, no baseline is claimed.
    assert all(f.raw_per_second is None and f.ratio is None for f in report.figures)
    # Said as it went: the fill, each figure of each round, each writers' run, the rest.
    assert said[0] == "filling the store to 150 events"
    assert [line.split(":")[0] for line in said if line.startswith("round ")] == [
        f"round {n}/2 {name}" for n in (1, 2) for name in figures
    ]
    assert [line.split(":")[0] for line in said if line.startswith("concurrency")] == [
        f"concurrency {n}" for n in (1, 2, 4, 8)
    ]
    assert said[-3].startswith("http runs: 20 events in ")
    assert said[-2].startswith("otlp spans: 8 spans in ")
    assert said[-1].startswith("flatness: a log of 160 entries: a write costs ")
    with Ledger.open(settings) as ledger:
        filled, each_round, writers_jobs, over_http = 2, 2 + 2, (1 + 2 + 4 + 8) * 2, 2 + 2
        assert (
            store_of(ledger).verify_all().jobs == filled + 2 * each_round + writers_jobs + over_http
        )
        assert len(ledger.receipts.listing("bench", limit=500)) == 2 * 2 * 2  # emitted, replayed
        # One checkpoint per round (the `checkpoint` figure, which `verify` then checks), those
        # the service's notary wrote during the http runs (as deployed: off the request path),
        # and one written as the bench's ledger closed; none inside another timed figure.
        newest = ledger.checkpoints.newest()
        assert newest is not None and newest.checkpoint.number >= 2 + 1 + 1


def _bench_schemas(settings: Settings) -> list[str]:
    """Schemas the bench made in the test's PostgreSQL database ([] on SQLite)."""
    if settings.store.startswith("sqlite"):
        return []
    query = "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, 'mace_bench_')"
    return [str(row[0]) for row in RawTable(settings).execute(query)]


def test_the_bench_runs_on_a_store_of_its_own(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store holding data is left as it was, and the bench runs all the same: it writes to a
    store it makes (SQLite: a folder beside MACE_STORE's file; PostgreSQL: a schema in its
    database) and removes when it ends."""
    assert run(capsys, "run", "what is 2 + 3?", "--seed", "held")[0] == 0  # checkpointed
    before = fingerprint(cli_env.store), sorted(tmp_path.iterdir())
    code, out, err = run(capsys, "bench", *TINY, "--json")
    assert code == 0, err
    report = orjson.loads(out)
    assert report["store"] != cli_env.parsed_store().describe()
    # Said on standard error as it went, figure by figure, where the bench's store is first.
    lines = err.splitlines()
    assert lines[0].startswith("mace bench: on a store of its own, removed when it ends: ")
    assert "mace bench: round 1/1 write: " in lines[1]
    assert len(lines) == 1 + 11 + 4  # eleven figures a round, four writers' runs
    assert (fingerprint(cli_env.store), sorted(tmp_path.iterdir())) == before
    assert _bench_schemas(cli_env) == []


def test_ctrl_c_stops_the_bench_with_130_and_leaves_nothing_behind(
    cli_env: Settings, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Ledger.open(cli_env).close()
    before = fingerprint(cli_env.store), sorted(tmp_path.iterdir())
    with mace_to_interrupt(store_url, "bench", *TINY, "--rounds", "50") as bench:
        assert bench.stderr is not None
        said = [bench.stderr.readline() for _ in range(2)]  # its store, a figure
        assert "round 1/50 write: " in said[-1], said
        code, out, err = interrupted(bench)
    assert (code, out) == (130, "")
    assert err.endswith("mace: interrupted\n"), err
    assert (fingerprint(cli_env.store), sorted(tmp_path.iterdir())) == before
    assert _bench_schemas(cli_env) == []
    # Nothing half-filled for the next run to refuse; --quiet says nothing on stderr.
    code, out, err = run(capsys, "bench", *TINY, "--only", "write", "--quiet")
    assert (code, err) == (0, "")
    assert out.startswith("mace bench on ")


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
    ("lose", "line"),
    [(LOST_CTRL_C["finaliser"], 1), (LOST_CTRL_C["sqlite callback"], 7)],
    ids=["in a finaliser before the first figure", "in a sqlite callback after scan"],
)
def test_a_ctrl_c_lost_where_python_ignores_it_still_stops_the_bench(
    cli_env: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    lose: Callable[[], None],
    line: int,
) -> None:
    """A Ctrl-C whose KeyboardInterrupt a finaliser or a SQLite callback swallowed (a real one
    lands there now and then) stops the bench before its next figure: 130, one line said of
    it, nothing left behind. Lines: the bench's store, ten figures, four writers' runs."""
    Ledger.open(cli_env).close()
    before = fingerprint(cli_env.store), sorted(tmp_path.iterdir())
    with python_ctrl_c():
        monkeypatch.setattr(sys, "stderr", CtrlCAfterLine(sys.stderr, line, lose))
        code, out, err = run(capsys, "bench", *TINY)
    assert (code, out) == (130, "")
    said = err.splitlines()
    assert said[line:] == ["mace: interrupted"], said
    assert (fingerprint(cli_env.store), sorted(tmp_path.iterdir())) == before
    assert _bench_schemas(cli_env) == []


def test_compare_raw_puts_a_measured_baseline_beside_every_figure_and_leaves_no_table(
    settings: Settings,
) -> None:
    with Ledger.open(settings) as ledger:
        size = BenchSize(2, 3, 2, 1, 150, 0, HttpLoad(1, 5), otlp_spans=4)
        bench = Bench(ledger, settings, size)
        report = bench.run(compare_raw=True)
    for figure in report.figures:
        if figure.name == "checkpoint":  # no raw equivalent: a signature over a tree
            assert (figure.raw_per_second, figure.ratio) == (None, None)
            continue
        assert figure.raw_per_second is not None and figure.raw_per_second > 0, figure.name
        assert figure.ratio == pytest.approx(figure.per_second / figure.raw_per_second)
    raw_writers = [f for f in report.figures if f.name == "concurrency"]
    assert [f.writers.writers for f in raw_writers if f.writers] == [1, 2, 4, 8]
    # The scratch table is gone, the ledger's own tables untouched by it: verify is clean.
    assert "mace_bench_raw" not in fingerprint(settings.store)[1]
    with Ledger.open(settings) as ledger:
        assert (
            store_of(ledger).verify_all().events == store_of(ledger).recorder.max_notification_id()
        )


def test_the_tally_counts_what_a_figure_did_in_the_events_table(cli_env: Settings) -> None:
    """The raw baseline repeats the tallied I/O: it must be what the ledger did."""
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        before, head = (
            store_of(ledger).io.snapshot(),
            store_of(ledger).recorder.max_notification_id(),
        )
        log = ledger.jobs.run("what is 2 + 3?", "tally")
        did = store_of(ledger).io.since(before)
        written = (store_of(ledger).recorder.max_notification_id() or 0) - (head or 0)
        assert (did.rows_written, did.commits) == (written, 1)  # the whole job, one commit

        before = store_of(ledger).io.snapshot()
        ledger.replays.run(log.job_id, ReplayMode.AUDIT, ACTOR)
        did = store_of(ledger).io.since(before)
        job_rows = len(ledger.jobs.stream(log.job_id))
        assert did.commits == 2  # the request, then the result with the replay record
        assert did.rows_read >= job_rows


def test_the_python_api_refuses_a_ledger_holding_data(settings: Settings) -> None:
    """Figures from a store already holding other data would not compare (``mace bench``
    always gives the bench a new store)."""
    with Ledger.open(settings) as ledger:
        ledger.jobs.run("what is 2 + 3?", "held")
        head = store_of(ledger).recorder.max_notification_id()
        with pytest.raises(BenchError, match="the bench writes: give it an empty store"):
            Bench(ledger, settings, BenchSize(1, 1, 1, 1))
        assert store_of(ledger).recorder.max_notification_id() == head


@pytest.mark.parametrize("option", ["--jobs", "--memories", "--contexts", "--rounds"])
def test_sizes_below_one_are_refused(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    code, _, err = run(capsys, "bench", option, "0")
    assert code == 2
    assert err == f"mace: INVALID_INPUT: {option} must be at least 1, got 0\n"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (("--http-runs", "-1"), "--http-runs must be at least 1 (or 0: none), got -1"),
        *(
            (("--http-batch", size), f"--http-batch must be from 2 to 500{LIMITS}, got {size}")
            for size in ("0", "1", "501")
        ),
    ],
)
def test_http_sizes_the_service_would_not_take_are_refused(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], given: tuple[str, ...], message: str
) -> None:
    code, out, err = run(capsys, "bench", *given)
    assert (code, out) == (2, "")
    assert err == f"mace: INVALID_INPUT: {message}\n"


@pytest.mark.parametrize("entries", ["-1", "50", "100"])
def test_a_flat_log_no_longer_than_the_short_one_is_refused(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], entries: str
) -> None:
    code, _, err = run(capsys, "bench", "--flat-entries", entries)
    assert code == 2
    assert err == (
        f"mace: INVALID_INPUT: --flat-entries must be 0 (none) or more than 100, got {entries}\n"
    )


def test_a_negative_fill_is_refused(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "bench", "--verify-events", "-1")
    assert code == 2
    assert err == "mace: INVALID_INPUT: --verify-events must be at least 0, got -1\n"


def test_a_writer_whose_jobs_fail_is_counted_and_its_first_error_shown(settings: Settings) -> None:
    Ledger.open(settings).close()
    run = writers_at_once(settings, 1, 2, "x" * 100_001)  # an input over the limit: each refused
    assert (run.writers, run.jobs, run.failures) == (1, 0, 2)
    assert run.first_failure is not None
    assert run.first_failure.startswith("failed: InvalidInput: job input: ")


def test_a_writer_that_cannot_open_the_store_stops_the_figure_in_one_line(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a ledger\n" * 20)
    with pytest.raises(ChildProcessError) as raised:
        writers_at_once(settings_for(f"sqlite:///{text}"), 2, 1, "t")
    assert str(raised.value) == (
        "a bench writer could not start: infrastructure.storage.settings.SettingsError:"
        f" MACE_STORE 'sqlite:///{text}' is not a SQLite database file"
    )


def test_the_otlp_exports_are_agent_traces_recorded_whole_in_the_commits_the_baseline_makes(
    settings: Settings,
) -> None:
    """The ``otlp spans`` figure's exports, taken in process as the service takes them (quiet
    period 0): several spans a request, some traces split over two, each trace an agent's run
    recorded once whole; and the service's commits are the ones its raw baseline makes."""
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        plan = plan_exports(12, ledger.snapshots.default_ids(), 5)
        requests = [spans_of_protobuf(body) for body in plan.bodies]
        assert [len(spans) for spans in requests] == [5, 5, 2]
        assert (plan.spans, plan.traces) == (12, 3)
        before = store_of(ledger).io.snapshot()
        recorded = []
        for spans in requests:
            intake = ledger.trace_intake.hold(spans, "acme", 0.0, 0.0)
            assert (intake.accepted, intake.rejected) == (len(spans), [])
            recorded += intake.recorded
        did = store_of(ledger).io.since(before)
        assert did.commits == plan.commits == (2 + 2 + 1) + 2 * 3
        assert [outcome.duplicate for outcome in recorded] == [False] * 3
        for outcome in recorded:
            assert outcome.log is not None
            job = ledger.jobs.stream(outcome.log.job_id, tenant="acme")
            # Two model calls (the second answering after the tool), the tool's call and result.
            assert [entry["event_type"] for entry in job] == [
                "JobStarted",
                "ModelCallEnvelope",
                "ToolCall",
                "ToolResult",
                "ModelCallEnvelope",
                "JobCompleted",
                "JobSealed",
            ]


@pytest.mark.parametrize("spans", ["-4", "3", "10"])
def test_otlp_spans_not_whole_traces_are_refused(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], spans: str
) -> None:
    code, out, err = run(capsys, "bench", "--otlp-spans", spans)
    assert (code, out) == (2, "")
    assert err == (
        "mace: INVALID_INPUT: --otlp-spans must be 0 (none) or a positive multiple of 4"
        f" (the spans of an agent's trace), got {spans}\n"
    )
