"""SEM reads and writes are proven by the tenant's SEM log, not by the run (issue 27, points 2
and 4), on SQLite and PostgreSQL, each step in its own ledger that checkpoints as it closes,
as the CLI leaves the store.

The attacks: a run claiming a miss of a key the SEM log held where the run was recorded; a
copy of a real job claiming the SEM write the ledger made for the original; a read stamped with
a version that never existed (once a permanent INTEGRITY_FAILURE of replay, verify and audit).
Each is refused at ingest when the SEM log already contradicts it, or diverges at replay naming
the iteration, the key and both values; none is an integrity failure. And the race a live job
runs: another writer changes a key the job only read before the job commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error
from support.cli_output import assert_failure_line
from support.ledger_fixtures import run, store_of

from domain.determinism import DeterministicClock
from domain.governance import Actor
from domain.job import CaptureMode
from domain.replay_access import ReplayMode
from domain.run_file import parse_run
from domain.sem import SemEntry
from infrastructure.application import runs
from infrastructure.application.ledger import Ledger
from infrastructure.application.runs import RefusedSemClaim
from infrastructure.application.sem import TenantSem
from infrastructure.storage.settings import Settings
from projections.reflective_log import ReflectiveLog

CAPITAL = "world/country/france/capital"
COLOR = "user/person/default/favorite_color"
QUESTION = "what is the capital of france"
ANA = Actor.of("ana", ["admin", "auditor"])
NEVER_STORED = DeterministicClock("no-such-version").iso(7)


def step(settings: Settings) -> Ledger:
    """A ledger for one step; it checkpoints as it closes, as every CLI write does."""
    return Ledger.open(settings)


def job_as_run(ledger: Ledger, job_id: str, copy_id: str) -> list[dict[str, Any]]:
    """A recorded job turned into Run Event Schema v1 lines under another job id."""
    stream = ledger.jobs.stream(job_id)
    started = stream[0]["payload"]
    body = [
        {"type": e["event_type"], **e["payload"]}
        for e in stream
        if e["sequence_index"] is not None and e["event_type"] != "JobCompleted"
    ]
    completed = next(e for e in stream if e["event_type"] == "JobCompleted")["payload"]
    return [
        {
            "type": "RunStarted",
            "job_id": copy_id,
            "seed": started["job_seed"],
            "input": started["job_input"],
            "snapshot_ids": started["snapshot_ids"],
            "capture_mode": "full_io",
        },
        *body,
        {"type": "RunCompleted", "final_output": completed["final_output"]},
    ]


def ingest(ledger: Ledger, lines: list[dict[str, Any]]) -> ReflectiveLog:
    raw = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    return ledger.run_imports.record_once(parse_run(raw.split(b"\n")))[0]


def recorded(settings: Settings, text: str, seed: str = "s1") -> str:
    with step(settings) as ledger:
        return ledger.jobs.run(text, seed, capture_mode=CaptureMode.FULL_IO).job_id


def replayed(settings: Settings, job_id: str, mode: ReplayMode) -> dict[str, Any]:
    with step(settings) as ledger:
        return orjson.loads(orjson.dumps(ledger.replays.run(job_id, mode, ANA).report))  # type: ignore[no-any-return]


@pytest.fixture
def unchecked_ingest(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ingest as it was before it checked SEM claims: the jobs a store already holds."""
    monkeypatch.setattr(runs, "sem_claim_problem", lambda *_: None)
    yield


def test_a_claimed_miss_of_a_key_the_sem_log_held_diverges(settings: Settings) -> None:
    honest_miss = recorded(settings, QUESTION)  # recorded before anyone knew the capital
    with step(settings) as ledger:
        ledger.sem.put(CAPITAL, "Paris")
    with step(settings) as ledger:
        lines = job_as_run(ledger, honest_miss, "forged-miss")
        (read,) = [line for line in lines if line["type"] == "SemRead"]
        assert (read["exists"], read["value"]) == (False, None)
        ingest(ledger, lines)  # a miss names no version: the log cannot refuse it here
        assert ledger.jobs.verify("forged-miss").sem_entries == 1

    for mode in (ReplayMode.AUDIT, ReplayMode.PRODUCTION):
        report = replayed(settings, "forged-miss", mode)
        assert (report["ok"], report["error_code"]) == (False, "REPLAY_DIVERGENCE")
        (divergence,) = report["divergences"]
        assert (divergence["iteration"], divergence["field"]) == (0, f"sem_read {CAPITAL}")
        assert (divergence["recorded"]["exists"], divergence["recorded"]["value"]) == (False, None)
        assert (divergence["replayed"]["exists"], divergence["replayed"]["value"]) == (
            True,
            "Paris",
        )
    # The job that really missed was recorded before "Paris": it still reproduces.
    report = replayed(settings, honest_miss, ReplayMode.PRODUCTION)
    assert (report["ok"], report["reproduced"], report["divergences"]) == (True, True, [])


def test_a_copy_claiming_the_originals_sem_write_is_refused_at_ingest(
    settings: Settings,
) -> None:
    original = recorded(settings, "my favorite color is blue")
    with step(settings) as ledger:
        lines = job_as_run(ledger, original, "copy-1")
        (write,) = [line for line in lines if line["type"] == "SemWrite"]
        before = store_of(ledger).recorder.max_notification_id()
        with pytest.raises(RefusedSemClaim) as refused:
            ingest(ledger, lines)
        assert store_of(ledger).recorder.max_notification_id() == before
        assert not ledger.jobs.exists("copy-1")
    assert str(refused.value) == (
        f"SemWrite (iteration 0) writes {COLOR} at {write['last_updated']}, a version the ledger"
        f" stored for job:{original}, not for this run"
    )
    assert refused.value.position == lines.index(write) - 1


@pytest.mark.usefixtures("unchecked_ingest")
def test_a_copy_claiming_a_write_the_ledger_never_made_for_it_diverges(
    settings: Settings,
) -> None:
    original = recorded(settings, "my favorite color is blue")
    with step(settings) as ledger:
        ingest(ledger, job_as_run(ledger, original, "copy-1"))
    report = replayed(settings, "copy-1", ReplayMode.AUDIT)
    assert report["error_code"] == "REPLAY_DIVERGENCE"
    (divergence,) = report["divergences"]
    assert (divergence["iteration"], divergence["field"]) == (0, f"sem_write {COLOR}")
    # The re-run writes over the original's version: the next one, not the one claimed.
    assert divergence["recorded"]["last_updated"] != divergence["replayed"]["last_updated"]
    assert divergence["recorded"]["value"] == divergence["replayed"]["value"] == "blue"
    assert replayed(settings, original, ReplayMode.PRODUCTION)["ok"] is True


def forged_stamp(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The run with its SEM read stamped by a version no entry ever had."""
    return [
        {**line, "last_updated": NEVER_STORED} if line["type"] == "SemRead" else line
        for line in lines
    ]


def forged_stamp_run(settings: Settings) -> list[dict[str, Any]]:
    """A real job reading the capital, as a run whose read names a version never stored."""
    with step(settings) as ledger:
        ledger.sem.put(CAPITAL, "Paris")
    real = recorded(settings, QUESTION)
    with step(settings) as ledger:
        return forged_stamp(job_as_run(ledger, real, "forged-stamp"))


def test_a_read_stamped_with_a_version_that_never_existed_is_refused_at_ingest(
    settings: Settings,
) -> None:
    lines = forged_stamp_run(settings)
    with step(settings) as ledger:
        before = store_of(ledger).recorder.max_notification_id()
        with pytest.raises(RefusedSemClaim, match="a version the ledger does not hold") as refused:
            ingest(ledger, lines)
        assert store_of(ledger).recorder.max_notification_id() == before
    assert str(refused.value) == (
        f"SemRead (iteration 0) reads {CAPITAL} at {NEVER_STORED}, a version the ledger does not"
        " hold"
    )


@pytest.mark.usefixtures("unchecked_ingest")
def test_an_impossible_read_stamp_already_stored_is_no_integrity_failure(
    settings: Settings,
) -> None:
    lines = forged_stamp_run(settings)
    with step(settings) as ledger:
        ingest(ledger, lines)
    with step(settings) as ledger:
        verified = ledger.jobs.verify("forged-stamp")
        assert (verified.sealed, verified.sem_entries) == (True, 1)
    for _ in range(2):  # and again: nothing the emitter sent fails a command for ever
        report = replayed(settings, "forged-stamp", ReplayMode.AUDIT)
        assert report["error_code"] == "REPLAY_DIVERGENCE"
        (divergence,) = report["divergences"]
        assert (divergence["iteration"], divergence["field"]) == (0, f"sem_read {CAPITAL}")
        assert divergence["recorded"]["last_updated"] == NEVER_STORED
        assert divergence["replayed"]["last_updated"] != NEVER_STORED


class RacedSem:
    """The tenant's SEM as a job reads it, with another writer's write landing just after the
    job's read of ``key`` (once)."""

    def __init__(self, inner: TenantSem, key: str, race: Callable[[], None]) -> None:
        self.inner = inner
        self.key = key
        self.race: Callable[[], None] | None = race
        self.reads = 0

    @property
    def tenant(self) -> str:
        return self.inner.tenant

    def entry(self, key: str) -> SemEntry | None:
        found = self.inner.entry(key)
        self.reads += key == self.key
        if self.reads == 1 and self.race is not None:
            race, self.race = self.race, None
            race()
        return found


def test_a_key_changed_between_a_jobs_read_and_its_commit_never_false_diverges(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with step(settings) as ledger:
        ledger.sem.put(CAPITAL, "Paris")

    def other_writer() -> None:
        with step(settings) as other:
            other.sem.put(CAPITAL, "Lyon")

    with step(settings) as ledger:
        tenant_sem = ledger.jobs.sem.of
        monkeypatch.setattr(
            ledger.jobs.sem,
            "of",
            lambda tenant: RacedSem(tenant_sem(tenant), CAPITAL, other_writer),
        )
        log = ledger.jobs.run(QUESTION, "s1", capture_mode=CaptureMode.FULL_IO)
        (read,) = [e for e in ledger.jobs.stream(log.job_id) if e["event_type"] == "SemRead"]
    # The commit saw the key move, and the job ran again on what the log held then.
    assert read["payload"]["value"] == "Lyon"
    report = replayed(settings, log.job_id, ReplayMode.PRODUCTION)
    assert (report["ok"], report["reproduced"], report["divergences"]) == (True, True, [])


def test_ingest_names_the_refused_line_and_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    original = recorded(cli_env, "my favorite color is blue")
    with step(cli_env) as ledger:
        lines = job_as_run(ledger, original, "copy-1")
        before = store_of(ledger).recorder.max_notification_id()
    path = tmp_path / "copy.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, out, err = run(capsys, "ingest", str(path))
    assert (code, out) == (2, "")
    (write,) = [line for line in lines if line["type"] == "SemWrite"]
    assert_failure_line(
        err,
        "INVALID_INPUT",
        f"{path} event {lines.index(write)}: SemWrite (iteration 0) writes {COLOR} at"
        f" {write['last_updated']}, a version the ledger stored for job:{original}, not for"
        " this run",
    )
    with step(cli_env) as ledger:
        assert store_of(ledger).recorder.max_notification_id() == before


def test_an_http_batch_with_a_refused_sem_claim_answers_422_and_writes_nothing(
    api: Api,
) -> None:
    """The batch's events go to the run's job as they come: its SEM claims are checked there,
    before anything of the batch is written, and the run stays open for a batch without it."""
    api.ledger.sem.put(CAPITAL, "Paris")
    real = api.ledger.jobs.run(QUESTION, "s1", capture_mode=CaptureMode.FULL_IO).job_id
    started, *body, _ = forged_stamp(job_as_run(api.ledger, real, "forged-stamp"))
    run_id = api.open_run({k: v for k, v in started.items() if k != "type"})
    items = [{"event_id": f"e{i}", "event": line} for i, line in enumerate(body)]
    before = api.position()
    read_at = next(i for i, line in enumerate(body) if line["type"] == "SemRead")
    assert_error(
        api.send(run_id, items),
        422,
        "INVALID_INPUT",
        f"SemRead (iteration 0) reads {CAPITAL} at {NEVER_STORED}, a version the ledger does not"
        " hold",
        field=f"body.events.{read_at}.event",
    )
    assert api.position() == before
    assert api.get(f"/v1/runs/{run_id}").json()["events"] == 0
