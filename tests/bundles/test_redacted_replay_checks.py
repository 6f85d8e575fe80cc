"""What a redacted bundle's replay says of the facts redaction hid, on SQLite and PostgreSQL:
content emptied but matching by hash is `hash_compared`; a fact in an iteration PII was taken
from, or an answer the bundle does not hold, could not be compared at all, and says so; a fact
redaction left alone was re-executed and compared in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.bundle_files import bundle_replay, export
from support.cli_output import NOT_REPRODUCED_LINE
from support.hand_written_runs import R4, math_iteration, run_file, with_brainstates
from support.ledger_fixtures import run

from domain.events import hash_of

PII_USER = "bob [refused:"
"""A user name that holds the opening of a refusal mark: redaction takes it for PII."""


def misrouted_with_pii() -> list[dict[str, Any]]:
    """One iteration whose router decision (event and trace) is not what its RouterConfig
    decides, in an iteration that holds PII."""
    percept, _, output, trace = with_pii_user(math_iteration(0, "2 + 3", 5))
    trace["router_decision"] = R4
    return with_brainstates(
        [percept, {"type": "RouterDecision", "iteration": 0, **R4}, output, trace]
    )


def redacted_replay(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, job_id: str
) -> tuple[int, dict[str, Any], str]:
    """The job exported with --redact, then replayed from that bundle: exit code, report, err."""
    return bundle_replay(capsys, export(capsys, job_id, tmp_path / f"{job_id}.json", "--redact"))


def test_facts_hidden_by_pii_redaction_are_taken_as_recorded_never_compared_by_hash(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    ids = auditor
    path = run_file(tmp_path, "hidden", ids, misrouted_with_pii(), "2 + 3 = 5")
    assert run(capsys, "ingest", path)[0] == 0
    code, _, _ = run(capsys, "replay", "hidden")
    assert code == 1  # in the ledger, the routing diverges
    code, report, err = redacted_replay(capsys, tmp_path, "hidden")
    assert (code, err) == (1, NOT_REPRODUCED_LINE), err
    assert (report["ok"], report["reproduced"], report["authoritative"]) == (False, False, False)
    checked = {row["subject"]: (row["check"], row["detail"]) for row in report["checks"]}
    assert checked["event 1 RouterDecision"] == (
        "taken_as_recorded",
        "not compared: pii redacted from iteration 0",
    )
    assert "hash_compared" not in {check for check, _ in checked.values()}


def test_model_io_redaction_leaves_the_outputs_compared_by_hash(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    ids = auditor
    body = with_brainstates(math_iteration(0, "2 + 3", 5))
    assert run(capsys, "ingest", run_file(tmp_path, "plain", ids, body, "2 + 3 = 5"))[0] == 0
    code, report, err = redacted_replay(capsys, tmp_path, "plain")
    assert (code, err) == (0, ""), err
    checked = {row["subject"]: (row["check"], row["detail"]) for row in report["checks"]}
    assert checked["event 2 AgentOutput"] == (
        "hash_compared",
        "re-executed; compared where the bundle's redaction left content, emptied content by its"
        " hash where it has one",
    )
    assert checked["event 3 IterationTrace"] == (
        "taken_as_recorded",
        "not compared: model_io content redacted: the answer is not in the bundle",
    )
    assert checked["final answer"][0] == "taken_as_recorded"
    # Routing was re-decided and compared in full: redaction left it alone.
    assert checked["event 1 RouterDecision"][0] == "reexecuted"
    assert (report["reproduced"], report["authoritative"]) == (True, False)


def test_a_failed_agents_error_text_is_redacted_with_its_trace_copy(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    # What an agent raised may quote the model or a tool: it is model I/O content.
    ids = auditor
    canary = "CANARY-AGENT-ERROR"
    lines = math_iteration(0, "2 + 3", 5)
    output, trace = lines[2], lines[3]
    output.update(status="failed", response=None, response_hash=hash_of(None), error=canary)
    trace["agent_outputs"] = [{k: v for k, v in output.items() if k not in {"type", "iteration"}}]
    path = run_file(tmp_path, "raised", ids, with_brainstates(lines), "2 + 3 = 5")
    assert run(capsys, "ingest", path)[0] == 0
    code, out, err = run(capsys, "export", "raised", "-o", str(tmp_path / "r.json"), "--redact")
    assert (code, err) == (0, ""), err
    assert canary.encode() not in (tmp_path / "r.json").read_bytes()
    assert "payload.error" in out
    assert "payload.agent_outputs" in out


def with_pii_user(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The iteration's percept and agent prompt name a user redaction takes for PII."""
    percept, decision, output, trace = lines
    percept["user"] = PII_USER
    output["prompt"] = {**output["prompt"], "user": PII_USER}
    output["request_hash"] = hash_of(output["prompt"])
    trace["agent_outputs"] = [{k: v for k, v in output.items() if k not in {"type", "iteration"}}]
    return [percept, decision, output, trace]


@pytest.mark.parametrize(
    ("case", "started", "body", "field"),
    [
        (
            "an iteration skipped, PII in the first",
            {},
            [
                *with_pii_user(math_iteration(0, "2 + 3", 5)),
                *[{**line, "iteration": 7} for line in math_iteration(1, "4 * 5", 20)],
            ],
            "iterations",
        ),
        (
            "a job input its first iteration did not read, written with a redaction mark",
            {"input": "wire $1M to acct 99 [REDACTED:pii]"},
            [*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)],
            "job_input",
        ),
    ],
)
def test_redaction_never_sets_aside_the_runs_shape_or_its_input(
    auditor: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    case: str,
    started: dict[str, Any],
    body: list[dict[str, Any]],
    field: str,
) -> None:
    # Redaction rewrites content, never iteration numbers nor the job's input (unless PII was
    # taken from it): a run that fails in the ledger fails from its redacted bundle too.
    ids = auditor
    path = Path(run_file(tmp_path, "shaped", ids, with_brainstates(body), "4 * 5 = 20"))
    if started:
        first, *rest = path.read_text().splitlines(keepends=True)
        path.write_text(
            orjson.dumps({**orjson.loads(first), **started}).decode() + "\n" + "".join(rest)
        )
    assert run(capsys, "ingest", str(path))[0] == 0
    code, out, _ = run(capsys, "replay", "shaped", "--json")
    assert (code, orjson.loads(out)["divergences"][0]["field"]) == (1, field), case
    code, report, _ = redacted_replay(capsys, tmp_path, "shaped")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE"), case
    assert report["divergences"][0]["field"] == field
