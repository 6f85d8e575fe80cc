"""The same byte and event limits on every way in (issue 28, point 4), on SQLite and PostgreSQL:
the Python API (`RunRecorder`, the run use cases), ``mace ingest`` and ``mace sem put`` refuse in
one line what the HTTP service refuses (PAYLOAD_TOO_LARGE, or INVALID_INPUT for a SEM key), and
write nothing. Before, ``mace ingest`` stored a 100 MB ``final_output`` and a 100 MB run, and
``mace sem put`` a key of 100,000 characters.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import run, store_of

from domain.events import ErrorEvent, RunCompleted, RunStarted, StageTransition
from domain.job import DEFAULT_TENANT
from domain.run_draft import RunTooLarge
from domain.run_file import parse_run
from infrastructure.application.errors import failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.application.limits import READ_CHUNK, InputLimits
from infrastructure.application.run_recorder import RunRecorder
from infrastructure.application.settings import Settings

SMALL = {"max_body_bytes": 1024, "max_run_events": 5, "max_run_bytes": 4096}
BIG_TEXT = "x" * 2000  # one event or output past 1024 bytes, a few past 4096 in all


@pytest.fixture
def limited(settings: Settings) -> Iterator[Ledger]:
    with Ledger.open(settings.model_copy(update=SMALL)) as opened:
        yield opened


def head(ledger: Ledger) -> int | None:
    return store_of(ledger).recorder.max_notification_id()


def assert_too_large(exc: pytest.ExceptionInfo[RunTooLarge], message: str) -> None:
    failure = failure_of(exc.value)
    assert failure is not None
    assert (failure.code, failure.status, failure.exit_code) == ("PAYLOAD_TOO_LARGE", 413, 2)
    assert failure.message == message


# --- the Python API -------------------------------------------------------------------------------


def test_a_run_recorder_refuses_an_event_past_the_run_s_limits_as_it_is_emitted(
    limited: Ledger,
) -> None:
    recorder = RunRecorder(limited.run_uploads, RunStarted(seed=7, input="hi", job_id="r1"))
    opened = head(limited)  # the recorder writes as it goes: opening the run is written
    with pytest.raises(RunTooLarge) as big:
        recorder.emit(ErrorEvent(code="E", message=BIG_TEXT))
    assert_too_large(big, "run r1 event 0: 2076 bytes, at most 1024 (MACE_MAX_BODY_BYTES)")
    assert head(limited) == opened
    for n in range(5):
        recorder.emit(StageTransition(to_stage=f"s{n}"))
    emitted = head(limited)
    with pytest.raises(RunTooLarge) as many:
        recorder.emit(StageTransition(to_stage="s5"))
    assert_too_large(many, "run r1 would exceed 5 events (MACE_MAX_RUN_EVENTS)")
    with pytest.raises(RunTooLarge) as output:
        recorder.complete(BIG_TEXT)
    assert_too_large(output, "run r1 final_output: 2002 bytes, at most 1024 (MACE_MAX_BODY_BYTES)")
    assert head(limited) == emitted
    assert limited.run_uploads.get(recorder.run_id, DEFAULT_TENANT).count == 5
    assert recorder.complete("done").sealed


def test_recording_a_run_holds_it_to_the_run_byte_limit_whichever_use_case_is_called(
    limited: Ledger,
) -> None:
    before = head(limited)
    events = [ErrorEvent(code="E", message="m" * 900) for _ in range(5)]
    started, completed = RunStarted(seed=7, input="hi"), RunCompleted(final_output="done")
    message = "run holds more than 4096 bytes of events (MACE_MAX_RUN_BYTES)"
    with pytest.raises(RunTooLarge) as direct:
        limited.runs.record(started, events, completed)
    assert_too_large(direct, message)
    lines = [started, *events, completed]
    with pytest.raises(RunTooLarge) as imported:
        limited.run_imports.record_once(
            parse_run([line.model_dump_json().encode() for line in lines])
        )
    assert_too_large(imported, message)
    assert head(limited) == before


def test_a_run_file_is_refused_as_soon_as_it_is_read_past_the_limit() -> None:
    """Never held whole: what is read stops one chunk past the limit."""
    limits = InputLimits(body_bytes=1024, batch_events=5, run_events=5, run_bytes=4096)
    stream = io.BytesIO(b"x" * (100 * READ_CHUNK))
    with pytest.raises(RunTooLarge, match=r"^run.jsonl is larger than 4096 bytes \(MACE_MAX_"):
        limits.read_run_file("run.jsonl", stream)
    assert stream.tell() <= 4096 + READ_CHUNK
    assert limits.read_run_file("ok", io.BytesIO(b"y" * 4096)) == b"y" * 4096


# --- the command line, on a store as its writes leave it (checkpointed) ---------------------------


def write_run(path: Path, final_output: str, *messages: str) -> str:
    lines = [
        {"type": "RunStarted", "seed": 7, "input": "hi"},
        *({"type": "ErrorEvent", "code": "E", "message": m} for m in messages),
        {"type": "RunCompleted", "final_output": final_output},
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def test_mace_ingest_refuses_a_file_a_final_output_or_an_event_over_the_limits(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    for name, value in SMALL.items():
        monkeypatch.setenv(f"MACE_{name.upper()}", str(value))
    assert run(capsys, "init")[0] == 0
    with Ledger.open(cli_env, create=False) as ledger:
        before = head(ledger)
    huge = write_run(tmp_path / "huge.jsonl", "done", *["m" * 900] * 5)
    output = write_run(tmp_path / "output.jsonl", BIG_TEXT)
    event = write_run(tmp_path / "event.jsonl", "done", BIG_TEXT)
    refusals = {
        huge: f"{huge} is larger than 4096 bytes (MACE_MAX_RUN_BYTES)",
        output: f"run in {output} final_output: 2002 bytes, at most 1024 (MACE_MAX_BODY_BYTES)",
        event: f"run in {event} event 0: 2076 bytes, at most 1024 (MACE_MAX_BODY_BYTES)",
    }
    for path, message in refusals.items():
        assert run(capsys, "ingest", path) == (2, "", f"mace: PAYLOAD_TOO_LARGE: {message}\n")
    with Ledger.open(cli_env, create=False) as ledger:
        assert head(ledger) == before
    fits = write_run(tmp_path / "fits.jsonl", "done", *["m" * 500] * 5)
    code, out, err = run(capsys, "ingest", fits)
    assert (code, err) == (0, "")
    assert "5 events recorded and sealed" in out


def test_mace_sem_put_refuses_a_key_of_100000_characters_in_one_line(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "init")[0] == 0
    with Ledger.open(cli_env, create=False) as ledger:
        before = head(ledger)
    key = "user/person/ana/" + "a" * 99_984
    expected = "mace: INVALID_INPUT: SEM key: 100000 characters, at most 256\n"
    assert run(capsys, "sem", "put", key, '"blue"') == (2, "", expected)
    assert run(capsys, "sem", "get", key) == (2, "", expected)
    with Ledger.open(cli_env, create=False) as ledger:
        assert head(ledger) == before
    assert run(capsys, "sem", "put", "user/person/ana/favorite_color", '"blue"')[0] == 0


def test_a_run_recorder_refuses_the_event_that_takes_the_run_past_its_byte_limit(
    limited: Ledger,
) -> None:
    """As an HTTP batch is: at the event that crosses the limit, not only once the run is
    complete (each event is held to the limits by the size it was encoded at, once)."""
    recorder = RunRecorder(limited.run_uploads, RunStarted(seed=7, input="hi", job_id="r2"))
    for _ in range(4):
        recorder.emit(ErrorEvent(code="E", message="m" * 900))
    emitted = head(limited)
    with pytest.raises(RunTooLarge) as crossing:
        recorder.emit(ErrorEvent(code="E", message="m" * 900))
    assert_too_large(crossing, "run r2 holds more than 4096 bytes of events (MACE_MAX_RUN_BYTES)")
    assert head(limited) == emitted
    assert limited.run_uploads.get(recorder.run_id, DEFAULT_TENANT).count == 4
