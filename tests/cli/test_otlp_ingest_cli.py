"""``mace ingest --otlp FILE``: an OTLP/JSON export recorded, each whole trace one job, on a
store the CLI checkpoints on every write; a partial trace is named and not recorded (exit 1);
a bad span or a file that is not an export is one line and exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.ledger_fixtures import run
from support.otlp_traces import CHAT, TRACE, agent_trace, export, span

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

pytestmark = pytest.mark.storage


def written(tmp_path: Path, raw: bytes, name: str = "traces.json") -> str:
    path = tmp_path / name
    path.write_bytes(raw)
    return str(path)


def jobs(capsys: pytest.CaptureFixture[str]) -> list[str]:
    code, out, _ = run(capsys, "jobs", "--json")
    assert code == 0
    return [job["job_id"] for job in orjson.loads(out)["jobs"]]


def test_an_export_is_recorded_once_and_verifies(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = written(tmp_path, export(*agent_trace()))
    code, out, err = run(capsys, "ingest", "--otlp", path, "--json")
    assert (code, err) == (0, "")
    [first] = orjson.loads(out)["traces"]
    assert (first["trace_id"], first["recorded"], first["events"]) == (TRACE, True, 3)
    assert first["duplicate"] is False

    code, out, err = run(capsys, "ingest", "--otlp", path)
    assert (code, err) == (0, "")
    said = f"trace {TRACE}: job {first['job_id']}: this run was recorded before (same content);"
    assert out.splitlines()[0] == said + " nothing written"
    assert jobs(capsys) == [first["job_id"]]
    code, out, err = run(capsys, "verify", first["job_id"])
    assert (code, err) == (0, ""), out
    with Ledger.open(cli_env) as ledger:
        assert ledger.jobs.reflective_log(first["job_id"]).capture_mode == "full_io"


def test_a_partial_trace_is_named_not_recorded_and_exits_1(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = written(tmp_path, export(*agent_trace()[1:]))
    code, out, err = run(capsys, "ingest", "--otlp", path)
    assert (code, err) == (1, "")
    assert out == (
        f"trace {TRACE}: not recorded, its root span (a span without a parent) has not arrived:"
        " a partial trace is never recorded as a complete run; send the whole trace\n"
    )
    assert jobs(capsys) == []


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        (b"[]", "expected an OTLP ExportTraceServiceRequest (a JSON object with resourceSpans)"),
        (
            export({**agent_trace()[0], "spanId": "not-hex"}),
            "span 'invoke_agent w': spanId 'not-hex' is not hex (OTLP/JSON ids are hex strings)",
        ),
        (
            export(
                agent_trace()[0],
                span(
                    CHAT,
                    "chat",
                    {"gen_ai.operation.name": "chat", "gen_ai.request.temperature": -1.0},
                ),
            ),
            f"span {TRACE}/{CHAT} ('chat'): attribute gen_ai.request.temperature: Input should be"
            " greater than or equal to 0",
        ),
        (
            orjson.dumps(
                {"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}
            ),
            "not an OTLP ExportTraceServiceRequest: ",
        ),
    ],
    ids=["not-an-object", "id-not-hex", "negative-temperature", "bad-field"],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    cli_env: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    raw: bytes,
    said: Any,
) -> None:
    code, out, err = run(capsys, "ingest", "--otlp", written(tmp_path, raw))
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1
    assert said in err
    assert jobs(capsys) == []
