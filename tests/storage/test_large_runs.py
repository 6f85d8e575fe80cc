"""Large runs: a run at MACE_MAX_RUN_EVENTS with megabytes of payload commits on PostgreSQL, whole
or not at all, in notification order; `mace ingest` refuses a run over the limit, writing nothing.

eventsourcing's own insert sends a save as one statement in psycopg's pipeline mode, which never
finishes once the statement runs to several MB: the process hung holding the events table's lock.
The ingest below runs in a subprocess so that a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import orjson
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from support.ledger_fixtures import run, settings_for, store_of, subprocess_env

from infrastructure.application.ledger import Ledger
from infrastructure.storage.backends.postgres_recorder import (
    CHUNK_BYTES,
    CHUNK_ROWS,
    ChunkedPostgresRecorder,
    insert_chunks,
)
from infrastructure.storage.settings import Settings

HANG_GUARD_SECONDS = 600
"""Far beyond what the ingest below needs; only there so that a hang fails instead of blocking."""


def write_run(path: Path, events: int, message_bytes: int) -> Path:
    lines = [{"type": "RunStarted", "seed": 7, "input": "a large run"}]
    lines += [
        {"type": "ErrorEvent", "code": "E_BIG", "message": f"{n:06d}".ljust(message_bytes, "m")}
        for n in range(events)
    ]
    lines.append({"type": "RunCompleted", "final_output": "done"})
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def stored(size: int) -> StoredEvent:
    return StoredEvent(originator_id=uuid4(), originator_version=1, topic="t", state=b"x" * size)


# --- chunks -------------------------------------------------------------------------------------


def test_chunks_keep_every_event_in_order_within_both_bounds() -> None:
    events = [stored(size) for size in [10] * 2500 + [300_000] * 9 + [10] * 3]
    chunks = list(insert_chunks(events))
    assert [e for chunk in chunks for e in chunk] == events
    assert all(0 < len(chunk) <= CHUNK_ROWS for chunk in chunks)
    assert all(sum(len(e.state) for e in chunk) <= CHUNK_BYTES for chunk in chunks)
    assert [len(chunk) for chunk in chunks] == [CHUNK_ROWS, CHUNK_ROWS, 503, 3, 6]


def test_an_event_larger_than_a_chunk_goes_alone() -> None:
    small, big = stored(10), stored(CHUNK_BYTES + 1)
    assert [list(chunk) for chunk in insert_chunks([small, big, small])] == [
        [small],
        [big],
        [small],
    ]
    assert list(insert_chunks([])) == []


# --- PostgreSQL: large saves --------------------------------------------------------------------


def test_a_run_at_the_limit_with_megabytes_of_payload_commits_on_postgres(
    postgres_url: str, tmp_path: Path
) -> None:
    limit = 2000
    run_file = write_run(tmp_path / "large.jsonl", limit, 6000)
    env = subprocess_env(postgres_url, MACE_MAX_RUN_EVENTS=str(limit))
    mace = Path(sys.executable).with_name("mace")
    done = subprocess.run(
        [str(mace), "ingest", str(run_file), "--json"],
        env=env,
        capture_output=True,
        timeout=HANG_GUARD_SECONDS,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, b"")
    job_id = orjson.loads(done.stdout)["job_id"]
    with Ledger.open(settings_for(postgres_url), create=False) as ledger:
        assert isinstance(store_of(ledger).recorder, ChunkedPostgresRecorder)
        notifications = store_of(ledger).recorder.select_notifications(1, 10 * limit)
        # Several MB in one save: many chunks, one transaction, ids in insert order, no gaps.
        assert sum(len(n.state) for n in notifications) > 10 * CHUNK_BYTES
        assert [n.id for n in notifications] == list(range(1, len(notifications) + 1))
        assert ledger.jobs.verify(job_id).events == limit + 3  # started, events, completed, seal
        messages = [e["payload"]["message"][:6] for e in ledger.jobs.stream(job_id)[1:-2]]
        assert messages == [f"{n:06d}" for n in range(limit)]


def test_a_large_save_that_conflicts_in_its_last_chunk_writes_nothing(postgres_url: str) -> None:
    with Ledger.open(settings_for(postgres_url)) as ledger:
        taken = stored(10)
        store_of(ledger).recorder.insert_events([taken])
        head = store_of(ledger).recorder.max_notification_id()
        save = [stored(CHUNK_BYTES // 4) for _ in range(12)] + [taken]
        assert len(list(insert_chunks(save))) > 3
        with pytest.raises(IntegrityError):
            store_of(ledger).recorder.insert_events(save)
        assert store_of(ledger).recorder.max_notification_id() == head
        assert store_of(ledger).recorder.select_events(save[0].originator_id) == []


# --- MACE_MAX_RUN_EVENTS on `mace ingest` (both stores) ----------------------------------------


def test_ingest_refuses_a_run_over_max_run_events_and_writes_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("MACE_MAX_RUN_EVENTS", "10")
    assert run(capsys, "init")[0] == 0
    with Ledger.open(cli_env, create=False) as ledger:
        head = store_of(ledger).recorder.max_notification_id()
        code, out, err = run(capsys, "ingest", str(write_run(tmp_path / "over.jsonl", 11, 20)))
        assert (code, out) == (2, "")
        assert err == (
            f"mace: PAYLOAD_TOO_LARGE: run in {tmp_path}/over.jsonl would exceed 10 events"
            " (MACE_MAX_RUN_EVENTS)\n"
        )
        assert store_of(ledger).recorder.max_notification_id() == head
    code, out, err = run(capsys, "ingest", str(write_run(tmp_path / "at.jsonl", 10, 20)))
    assert (code, err) == (0, "")
    assert "10 events recorded and sealed" in out
