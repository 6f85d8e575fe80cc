"""The README's examples work as written: its main-job command and its Python API example."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import orjson
import pytest

from infrastructure.cli import main

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", README, re.S)


@pytest.fixture
def fresh_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory with no MACE_* settings: the embedded default."""
    for name in ("MACE_STORE", "MACE_SIGNING_KEYS", "MACE_ACTIVE_KEY_ID", "MACE_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_main_job_command_runs_on_the_sqlite_default(
    fresh_directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    steps = blocks("bash")[0].split(" && ")
    mace_steps = [shlex.split(step)[1:] for step in steps if step.startswith(".venv/bin/mace ")]
    assert len(mace_steps) >= 3
    for argv in mace_steps:
        assert main(argv) == 0, argv
    out = capsys.readouterr().out
    assert "answer: 2 + 3 = 5" in out
    assert "answer: Your favorite color is blue." in out
    assert re.search(r"ok: \d+ events in \d+ streams verified \(3 jobs, 3 sealed\)", out)
    assert (fresh_directory / "mace.db").exists()
    assert main(["jobs", "--json"]) == 0
    listed = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [job["replayable"] for job in listed] == [True, True, True]


def test_python_api_example_records_a_run(
    fresh_directory: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (example,) = blocks("python")
    exec(compile(example, "README.md", "exec"), {})
    job_id, replayable = capsys.readouterr().out.split()
    assert re.fullmatch(r"[0-9a-f]{64}", job_id)
    assert replayable == "False"
    assert main(["events", job_id, "--type", "ToolResult", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert orjson.loads(line)["payload"]["result"] == {"hits": 3}
