"""``mace bench`` runs every measured path on both stores and refuses a store holding data.

Nothing here asserts a speed: figures are printed by the bench, never pass/fail in tests.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import run, store_of
from support.store_copies import fingerprint

from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.tooling.bench import ACTOR
from infrastructure.tooling.bench_writers import writers_at_once

LIMITS = " (MACE_MAX_BATCH_EVENTS, MACE_MAX_RUN_EVENTS)"
SMALL = (
    *("--jobs", "2", "--memories", "3", "--contexts", "2", "--rounds", "2"),
    *("--verify-events", "150", "--flat-entries", "160", "--http-runs", "2", "--http-batch", "5"),
)


def test_every_path_is_measured(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "bench", *SMALL, "--json")
    assert (code, err) == (0, "")
    report = orjson.loads(out)
    assert (report["rounds"], report["compare_raw"]) == (2, False)
    figures = {f["name"]: f for f in report["figures"] if f["name"] != "concurrency"}
    # Two runs over HTTP, each sent in two batches of five events: ten events a run.
    assert figures.pop("http runs")["count"] == 2 * 10
    assert list(figures) == [
        "write",
        "checkpoint",
        "read",
        "verify",
        "scan",
        "replay",
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
    assert report["tree_cost"] > 0
    assert report["tree_cpu_cost"] > 0
    # Writer processes at once, two jobs each: every one recorded, none failed.
    writers = [f for f in report["figures"] if f["name"] == "concurrency"]
    assert [(c["writers"], c["count"], c["failures"]) for c in writers] == [
        (1, 2, 0),
        (2, 4, 0),
        (4, 8, 0),
        (8, 16, 0),
    ]
    assert all(c["first_failure"] is None and c["per_second"] > 0 for c in writers)
    assert figures["replay"]["count"] == 2
    assert figures["memory"]["count"] == 3
    assert figures["context"]["count"] == figures["receipt replay"]["count"] == 2
    assert figures["write"]["count"] > 2 * 2  # more than one event per job
    assert all(f["per_second"] > 0 and f["unit"] for f in figures.values())
    # Writes and contexts timed on a log of 100 entries, then of 160: each cost over the other.
    assert report["flatness"]["entries"] == 160
    assert report["flatness"]["memory"] > 0 and report["flatness"]["context"] > 0
    # Without --compare-raw, no baseline is claimed.
    assert all(f["raw_per_second"] is None and f["ratio"] is None for f in report["figures"])
    with Ledger.open(cli_env) as ledger:
        filled, each_round, writers_jobs, over_http = 2, 2, (1 + 2 + 4 + 8) * 2, 2
        assert (
            store_of(ledger).verify_all().jobs == filled + 2 * each_round + writers_jobs + over_http
        )
        assert len(ledger.receipts.listing("bench", limit=500)) == 2 * 2 * 2  # emitted, replayed
        # One checkpoint per round (the `checkpoint` figure, which `verify` then checks), those
        # the service's notary wrote during the http runs (as deployed: off the request path),
        # and one written as the bench's ledger closed; none inside another timed figure.
        newest = ledger.checkpoints.newest()
        assert newest is not None and newest.checkpoint.number >= 2 + 1 + 1


def test_compare_raw_puts_a_measured_baseline_beside_every_figure_and_leaves_no_table(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    once = ("--rounds", "1", "--flat-entries", "0", "--http-runs", "1")
    code, out, err = run(capsys, "bench", *SMALL, *once, "--compare-raw", "--json")
    assert (code, err) == (0, "")
    report = orjson.loads(out)
    assert report["compare_raw"] is True
    for figure in report["figures"]:
        if figure["name"] == "checkpoint":  # no raw equivalent: a signature over a tree
            assert (figure["raw_per_second"], figure["ratio"]) == (None, None)
            continue
        assert figure["raw_per_second"] > 0, figure["name"]
        assert figure["ratio"] == pytest.approx(
            figure["per_second"] / figure["raw_per_second"], rel=0.01, abs=0.001
        )
    raw_writers = [f for f in report["figures"] if f["name"] == "concurrency"]
    assert [f["writers"] for f in raw_writers] == [1, 2, 4, 8]
    # The scratch table is gone, the ledger's own tables untouched by it: verify is clean.
    assert "mace_bench_raw" not in fingerprint(cli_env.store)[1]
    with Ledger.open(cli_env) as ledger:
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


def test_a_store_holding_data_is_refused_and_left_alone(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    # Any data: a job (a bench that fills a store is `test_every_path_is_measured`).
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.run("what is 2 + 3?", "held")
    with Ledger.open(cli_env) as ledger:
        head = store_of(ledger).recorder.max_notification_id()
    code, out, err = run(capsys, "bench", *SMALL)
    assert (code, out) == (2, "")
    assert (
        err
        == "mace: INVALID_INPUT: mace bench writes to the store: point MACE_STORE at an empty one\n"
    )
    with Ledger.open(cli_env) as ledger:
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


def test_a_writer_whose_jobs_fail_is_counted_and_its_first_error_shown(cli_env: Settings) -> None:
    Ledger.open(cli_env).close()
    run = writers_at_once(1, 2, "x" * 100_001)  # an input over the limit: each job refused
    assert (run.writers, run.jobs, run.failures) == (1, 0, 2)
    assert run.first_failure is not None
    assert run.first_failure.startswith("failed: InvalidInput: job input: ")


def test_a_writer_that_cannot_open_the_store_stops_the_figure_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = tmp_path / "notes.db"
    text.write_text("not a ledger\n" * 20)
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{text}")
    with pytest.raises(ChildProcessError) as raised:
        writers_at_once(2, 1, "t")
    assert str(raised.value) == (
        "a bench writer could not start: infrastructure.storage.settings.SettingsError:"
        f" MACE_STORE 'sqlite:///{text}' is not a SQLite database file"
    )
