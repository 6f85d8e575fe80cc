"""``mace replay``, ``mace governance`` and ``mace verify`` end to end, on SQLite and PostgreSQL.

Exit codes: 0 the replay reproduced the job; 1 it ran and failed (one stderr line
``mace: <CODE>: <message>``), and is recorded in the job's governance log; 2 bad usage, in which
case nothing is written. Identity comes from ``MACE_ACTOR`` and ``MACE_ROLES``.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from support.cli_output import (
    assert_failure_line,
    assert_usage_error,
    canonical_line,
    event_count,
    json_error,
)
from support.ledger_fixtures import RawTable, run
from support.misrouted_run import WRONG_DECISION
from support.replay_cli import (
    DEFAULT_IDS,
    REPLAY_ROLES_TEXT,
    RIGHT_DECISION,
    ROUTER_ID,
    act,
    diverging_run,
    governance_log,
    new_job,
    replay_entries,
    replay_json,
    write_run_file,
    written_state,
)

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM
from domain.job import Job
from domain.snapshot import Snapshot
from infrastructure.storage.settings import Settings
from projections.replay_report import render_markdown

# --- helpers ------------------------------------------------------------------------------------


# --- mace replay: exit codes, JSON and reports --------------------------------------------------


def test_replay_ok_exits_0_with_text_summary(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "ana", "auditor,admin")
    code, out, err = run(capsys, "replay", job_id)
    assert (code, err) == (0, "")
    assert out == (
        "verdict: REPRODUCED, authoritative; of 7 facts: 7 re-executed and matched,"
        " 0 compared by hash, 0 taken as recorded, 0 missing\n"
        f"replay of job {job_id} (attempt 1, audit, by ana [admin, auditor])\n"
    )


def test_replay_json_report_is_canonical(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "ana", "admin,auditor")
    code, report, _ = replay_json(capsys, job_id)
    assert code == 0
    assert (report["job_id"], report["mode"], report["attempt"]) == (job_id, "audit", 1)
    assert (report["ok"], report["error_code"], report["error_message"]) == (True, None, None)
    assert (report["authoritative"], report["divergences"]) == (True, [])
    assert report["actor"] == {"actor_id": "ana", "roles": ["admin", "auditor"]}
    assert report["snapshot_ids"] == DEFAULT_IDS
    assert report["steps"][0]["step"] == "1 load reflective log"
    assert report["steps"][-1] == {
        "step": "result",
        "outcome": "ok",
        "detail": "replay reproduced the job",
    }
    assert all(step["outcome"] == "ok" for step in report["steps"])

    for attempt, mode in enumerate(("reexecute", "production"), start=2):
        code, again, _ = replay_json(capsys, job_id, "--mode", mode)
        assert code == 0
        assert (again["mode"], again["attempt"], again["ok"]) == (mode, attempt, True)
        assert again["authoritative"] is True


def test_replay_report_dir_writes_json_and_markdown(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ana", "operator")
    reports = tmp_path / "reports" / "nested"
    code, out, err = run(capsys, "replay", job_id, "--report-dir", str(reports), "--json")
    assert (code, err) == (0, "")
    report = canonical_line(out)
    written = (reports / "replay_report.json").read_bytes()
    assert written == out.encode()
    assert written == canonical_json(orjson.loads(written)) + b"\n"
    markdown = (reports / "replay_report.md").read_text(encoding="utf-8")
    assert markdown == render_markdown(report)
    assert markdown.startswith(f"# Replay report: job `{job_id}`, attempt 1\n")
    assert "- Result: **OK** (authoritative)\n" in markdown
    assert sorted(p.name for p in reports.iterdir()) == ["replay_report.json", "replay_report.md"]

    # The text rendering names the files; a second attempt overwrites them with its own report.
    code, out, err = run(capsys, "replay", job_id, "--report-dir", str(reports))
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == (
        f"report: {reports / 'replay_report.json'} and {reports / 'replay_report.md'}"
    )
    second = orjson.loads((reports / "replay_report.json").read_bytes())
    assert second["attempt"] == 2
    assert (reports / "replay_report.md").read_text(encoding="utf-8") == render_markdown(second)


@pytest.mark.parametrize("where", ["under-a-file", "is-a-file"])
def test_unwritable_report_dir_exits_2_and_records_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    where: str,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ana", "admin,auditor")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    target = blocker / "reports" if where == "under-a-file" else blocker
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "replay", job_id, "--report-dir", str(target), "--json")
    assert_usage_error(code, out, err, f"--report-dir {target}: cannot write there: ")
    assert written_state(cli_env, capsys) == before
    assert replay_entries(governance_log(capsys, job_id)) == []
    assert blocker.read_text() == "not a directory"


@pytest.mark.parametrize("blocked", ["replay_report.json", "replay_report.md"])
def test_report_dir_whose_report_file_cannot_be_written_exits_2_and_records_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    blocked: str,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ana", "admin,auditor")
    reports = tmp_path / "reports"
    (reports / blocked).mkdir(parents=True)  # a directory where the report file must go
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "replay", job_id, "--report-dir", str(reports), "--json")
    message = f"--report-dir {reports}: {blocked} exists and cannot be overwritten"
    assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before


# --- mace replay: bad usage ---------------------------------------------------------------------

NOT_JSON_MOCK = "not json {"
BAD_SHAPE_MOCK = '{"text": 5}'
UNKNOWN_FIELD_MOCK = '{"text": "5", "confidence": 1}'
GOOD_MOCK = '{"text": "2 + 3 = 5"}'

# name: (MACE_ACTOR or None to unset, MACE_ROLES or None to unset, argv after the job, message)
USAGE_CASES: dict[str, tuple[str | None, str | None, list[str], str]] = {
    "no-actor": (
        None,
        "admin",
        [],
        "set MACE_ACTOR (who you are) and MACE_ROLES (comma-separated: operator, admin, auditor,"
        " council, store_operator) to act",
    ),
    "no-roles": (
        "ana",
        None,
        [],
        "set MACE_ACTOR (who you are) and MACE_ROLES",
    ),
    "empty-roles": ("ana", "", [], "set MACE_ACTOR (who you are) and MACE_ROLES"),
    "only-commas": ("ana", " , ", [], "MACE_ACTOR/MACE_ROLES: actor ana holds no role"),
    "unknown-role": (
        "ana",
        "admin,wizard",
        [],
        "MACE_ACTOR/MACE_ROLES: unknown role in ['admin', 'wizard']: expected some of"
        " ['operator', 'admin', 'auditor', 'council', 'store_operator']",
    ),
    "bad-actor": (
        "bad actor!",
        "admin",
        [],
        "MACE_ACTOR/MACE_ROLES: invalid actor id 'bad actor!'",
    ),
    "unknown-mode": (
        "ana",
        "admin",
        ["--mode", "bogus"],
        "argument --mode: invalid choice: 'bogus'",
    ),
    "mock-in-audit": (
        "ana",
        "admin",
        ["--mock", "math_agent={good}"],
        "--mock is for --mode reexecute only",
    ),
    "mock-in-production": (
        "ana",
        "admin,auditor",
        ["--mode", "production", "--mock", "math_agent={good}"],
        "--mock is for --mode reexecute only",
    ),
    "mock-not-json": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent={not_json}"],
        "{not_json} is not JSON",
    ),
    "mock-bad-shape": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent={bad_shape}"],
        "--mock 'math_agent={bad_shape}': expected a JSON object with text (string)",
    ),
    "mock-unknown-field": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent={unknown_field}"],
        "expected a JSON object with text (string)",
    ),
    "mock-missing-file": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent={missing}"],
        "cannot read {missing}: No such file or directory",
    ),
    "mock-unknown-agent": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "wizard_agent={good}"],
        "unknown agent 'wizard_agent'",
    ),
    "mock-no-file": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent"],
        "--mock 'math_agent': expected AGENT=FILE",
    ),
    "mock-twice": (
        "ana",
        "admin",
        ["--mode", "reexecute", "--mock", "math_agent={good}", "--mock", "math_agent={good}"],
        "--mock names the same agent twice",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_CASES))
def test_replay_bad_usage_exits_2_and_writes_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    case: str,
) -> None:
    job_id = new_job(capsys)
    files = {
        "good": GOOD_MOCK,
        "not_json": NOT_JSON_MOCK,
        "bad_shape": BAD_SHAPE_MOCK,
        "unknown_field": UNKNOWN_FIELD_MOCK,
    }
    paths = {name: tmp_path / f"{name}.json" for name in (*files, "missing")}
    for name, text in files.items():
        paths[name].write_text(text)
    actor, roles, extra, message = USAGE_CASES[case]
    for name, value in (("MACE_ACTOR", actor), ("MACE_ROLES", roles)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    names = {name: str(path) for name, path in paths.items()}
    argv = [arg.format(**names) for arg in extra]
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "replay", job_id, *argv, "--json")
    assert_usage_error(code, out, err, message.format(**names))
    assert written_state(cli_env, capsys) == before


@pytest.mark.parametrize(
    ("job_id", "error"),
    [
        ("no-such-job", {"code": "NOT_FOUND", "message": "no job no-such-job"}),
        (
            "bad id!",
            {
                "code": "INVALID_INPUT",
                "message": "invalid job id 'bad id!': expected 1-128 characters of letters,"
                " digits and . _ : -, starting with a letter or digit",
            },
        ),
    ],
)
def test_replay_unknown_job_exits_2_and_writes_nothing(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    job_id: str,
    error: dict[str, str],
) -> None:
    new_job(capsys)
    act(monkeypatch, "ana", "admin,auditor")
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "replay", job_id, "--json")
    assert (code, out, json_error(err)) == (2, "", error)
    assert written_state(cli_env, capsys) == before


def test_reexecute_with_a_mock_is_ok_but_not_authoritative(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "rob", "operator")
    mock = tmp_path / "math.json"
    mock.write_text(
        '{"text": "2 + 3 = 5", "claims": [{"expression": "2 + 3", "value": 5}],'
        ' "evidence": [{"agent": "math_agent", "kind": "computation"}]}'
    )
    code, report, _ = replay_json(
        capsys, job_id, "--mode", "reexecute", "--mock", f"math_agent={mock}"
    )
    assert code == 0
    assert (report["ok"], report["authoritative"]) == (True, False)
    assert report["non_authoritative_reasons"] == [
        "math_agent answered by a declared mock in iteration 0"
    ]
    code, out, err = run(
        capsys, "replay", job_id, "--mode", "reexecute", "--mock", f"math_agent={mock}"
    )
    assert (code, err) == (0, "")
    assert out == (
        "verdict: REPRODUCED, NON-AUTHORITATIVE; of 7 facts: 7 re-executed and matched,"
        " 0 compared by hash, 0 taken as recorded, 0 missing\n"
        f"replay of job {job_id} (attempt 2, reexecute, by rob [operator])\n"
        "  not authoritative: math_agent answered by a declared mock in iteration 0\n"
    )


def test_reexecute_stopped_after_a_mock_answered_is_not_authoritative(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "rob", "operator")
    mock = tmp_path / "math.json"
    mock.write_text('{"text": "2 + 3 = 6"}')
    code, report, err = replay_json(
        capsys, job_id, "--mode", "reexecute", "--mock", f"math_agent={mock}"
    )
    assert code == 1
    assert_failure_line(
        err, "REPLAY_DIVERGENCE", "iteration 0: agent_outputs differs from the record"
    )
    assert [d["field"] for d in report["divergences"]] == ["agent_outputs"]
    assert report["divergences"][0]["replayed"][0]["response"]["text"] == "2 + 3 = 6"
    # Seed 000 section 7: a result that used mocked outputs is never authoritative.
    assert report["non_authoritative_reasons"] == [
        "math_agent answered by a declared mock in iteration 0"
    ]
    assert report["authoritative"] is False
    (result,) = [e for e in governance_log(capsys, job_id) if e["event"] == "REPLAY_RESULT"]
    assert result["authoritative"] is False


# --- access control -----------------------------------------------------------------------------

ROLE_SETS = {
    "operator": "operator",
    "admin": "admin",
    "auditor": "auditor",
    "council": "council",
    "admin+auditor": "admin,auditor",
}
ALLOWED = {
    "audit": {"operator", "admin", "auditor", "admin+auditor"},
    "reexecute": {"operator", "admin", "auditor", "admin+auditor"},
    "production": {"admin+auditor"},
}


def refusal(mode: str, actor: str, roles: list[str]) -> str:
    if mode == "production":
        return (
            "production replay needs an actor holding admin and auditor, or a council approval"
            f" of production_replay for this job; {actor} holds {roles}"
        )
    return f"{mode} replay needs one of the roles {REPLAY_ROLES_TEXT}; {actor} holds {roles}"


@pytest.mark.parametrize("roles", sorted(ROLE_SETS))
@pytest.mark.parametrize("mode", sorted(ALLOWED))
def test_access_matrix(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    roles: str,
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "dora", ROLE_SETS[roles])
    held = sorted(ROLE_SETS[roles].split(","))
    code, report, err = replay_json(capsys, job_id, "--mode", mode)
    allowed = roles in ALLOWED[mode]
    if allowed:
        assert (code, report["ok"], report["error_code"]) == (0, True, None)
    else:
        message = refusal(mode, "dora", held)
        assert code == 1
        assert_failure_line(err, "ACCESS_DENIED", message)
        assert (report["ok"], report["error_code"], report["error_message"]) == (
            False,
            "ACCESS_DENIED",
            message,
        )
        assert report["authoritative"] is False
        assert report["non_authoritative_reasons"] == ["the replay was refused before it ran"]
        assert report["steps"] == [
            {"step": "access", "outcome": "failed", "detail": f"ACCESS_DENIED: {message}"}
        ]

    # Allowed or refused, the attempt is on record.
    entries = replay_entries(governance_log(capsys, job_id))
    assert [(e["event"], e["attempt"]) for e in entries] == [
        ("REPLAY_REQUEST", 1),
        ("REPLAY_RESULT", 1),
    ]
    request, result = entries
    assert request["scope"] == f"job:{job_id}"
    assert (request["mode"], request["actor_id"], request["roles"]) == (mode, "dora", held)
    assert request["force_continue"] is False
    assert (result["ok"], result["error_code"], result["divergences"]) == (
        allowed,
        None if allowed else "ACCESS_DENIED",
        0,
    )
    assert result["authoritative"] is allowed


def test_production_replay_after_council_approval(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys, capture="full_io")
    act(monkeypatch, "olga", "operator")
    code, _, err = run(capsys, "replay", job_id, "--mode", "production")
    assert code == 1
    assert_failure_line(err, "ACCESS_DENIED", refusal("production", "olga", ["operator"]))

    act(monkeypatch, "cleo", "council")
    code, out, err = run(capsys, "governance", "approve", job_id, "--action", "production_replay")
    assert (code, out, err) == (0, f"approve production_replay for job {job_id} by cleo\n", "")

    # The council member holds no replay role: the approval does not make them a replayer.
    code, _, err = run(capsys, "replay", job_id, "--mode", "production")
    assert code == 1
    assert_failure_line(err, "ACCESS_DENIED", refusal("production", "cleo", ["council"]))

    act(monkeypatch, "olga", "operator")
    code, report, _ = replay_json(capsys, job_id, "--mode", "production")
    assert (code, report["ok"], report["authoritative"], report["attempt"]) == (0, True, True, 3)

    # The approval is for that job only.
    other = new_job(capsys, "hello", "s2", capture="full_io")
    code, _, err = run(capsys, "replay", other, "--mode", "production")
    assert code == 1
    assert_failure_line(err, "ACCESS_DENIED", refusal("production", "olga", ["operator"]))

    # A later reject withdraws the approval.
    act(monkeypatch, "cleo", "council")
    code, out, _ = run(capsys, "governance", "reject", job_id, "--action", "production_replay")
    assert (code, out) == (0, f"reject production_replay for job {job_id} by cleo\n")
    act(monkeypatch, "olga", "operator")
    code, _, err = run(capsys, "replay", job_id, "--mode", "production")
    assert code == 1
    assert_failure_line(err, "ACCESS_DENIED")

    log = governance_log(capsys, job_id)
    votes = [(e["motion"], e["vote"], e["actor_id"]) for e in log if e["event"] == "COUNCIL_VOTE"]
    assert votes == [
        ("production_replay", "approve", "cleo"),
        ("production_replay", "reject", "cleo"),
    ]
    results = [(e["attempt"], e["error_code"]) for e in log if e["event"] == "REPLAY_RESULT"]
    assert results == [(1, "ACCESS_DENIED"), (2, "ACCESS_DENIED"), (3, None), (4, "ACCESS_DENIED")]


# --- mace governance ----------------------------------------------------------------------------


@pytest.mark.parametrize("roles", ["operator", "auditor", "council", "auditor,council"])
def test_governance_request_is_for_admins_only(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    roles: str,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "eve", roles)
    before = written_state(cli_env, capsys)
    code, out, err = run(
        capsys, "governance", "request", job_id, "--action", "force_continue", "--reason", "why"
    )
    assert (code, out) == (1, "")
    held = sorted(roles.split(","))
    assert_failure_line(
        err,
        "ACCESS_DENIED",
        f"only the admin role may request a force-continue; eve holds {held}",
    )
    assert written_state(cli_env, capsys) == before


def test_governance_request_by_an_admin(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "adam", "admin")
    code, out, err = run(
        capsys,
        "governance",
        "request",
        job_id,
        "--action",
        "force_continue",
        "--reason",
        "  router drift under investigation  ",
    )
    assert (code, out, err) == (0, f"force-continue requested for job {job_id} by adam\n", "")
    (opened, request) = governance_log(capsys, job_id)
    assert (opened["event"], opened["scope"], opened["version"]) == (
        "GOVERNANCE_OPENED",
        f"job:{job_id}",
        1,
    )
    assert request["event"] == "FORCE_CONTINUE_REQUEST"
    assert (request["reason"], request["actor_id"], request["roles"]) == (
        "router drift under investigation",
        "adam",
        ["admin"],
    )

    # Bad requests: exit 2 and nothing written.
    before = written_state(cli_env, capsys)
    for argv, message in (
        (
            [job_id, "--action", "force_continue", "--reason", "   "],
            "a reason must be one line of 1-500 characters",
        ),
        (
            [job_id, "--action", "force_continue", "--reason", "x" * 501],
            "a reason must be one line of 1-500 characters",
        ),
        (
            [job_id, "--action", "production_replay", "--reason", "r"],
            "argument --action: invalid choice: 'production_replay'",
        ),
        ([job_id, "--action", "force_continue"], "the following arguments are required: --reason"),
        (["no-such-job", "--action", "force_continue", "--reason", "r"], "no job no-such-job"),
    ):
        code, out, err = run(capsys, "governance", "request", *argv)
        assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before


@pytest.mark.parametrize("vote", ["approve", "reject"])
@pytest.mark.parametrize("roles", ["operator", "admin", "auditor", "admin,auditor"])
def test_governance_votes_are_for_the_council_only(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    vote: str,
    roles: str,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "vic", roles)
    before = written_state(cli_env, capsys)
    for action in ("force_continue", "production_replay"):
        code, out, err = run(capsys, "governance", vote, job_id, "--action", action)
        assert (code, out) == (1, "")
        held = sorted(roles.split(","))
        assert_failure_line(
            err, "ACCESS_DENIED", f"only the council role may vote; vic holds {held}"
        )
    assert written_state(cli_env, capsys) == before


def test_governance_votes_by_the_council(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "cleo", "council")
    for vote, action in (
        ("approve", "force_continue"),
        ("reject", "force_continue"),
        ("approve", "production_replay"),
    ):
        code, out, err = run(capsys, "governance", vote, job_id, "--action", action)
        assert (code, out, err) == (0, f"{vote} {action} for job {job_id} by cleo\n", "")
    votes = [e for e in governance_log(capsys, job_id) if e["event"] == "COUNCIL_VOTE"]
    assert [(v["motion"], v["vote"], v["actor_id"], v["roles"]) for v in votes] == [
        ("force_continue", "approve", "cleo", ["council"]),
        ("force_continue", "reject", "cleo", ["council"]),
        ("production_replay", "approve", "cleo", ["council"]),
    ]
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "governance", "approve", job_id, "--action", "bogus")
    assert_usage_error(code, out, err, "argument --action: invalid choice: 'bogus'")
    code, out, err = run(capsys, "governance", "approve", "nope", "--action", "force_continue")
    assert_usage_error(code, out, err, "no job nope")
    assert written_state(cli_env, capsys) == before


def test_four_eyes_the_requester_cannot_approve(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ada", "admin,council")
    code, _, _ = run(
        capsys, "governance", "request", job_id, "--action", "force_continue", "--reason", "r"
    )
    assert code == 0
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "governance", "approve", job_id, "--action", "force_continue")
    assert (code, out) == (2, "")
    assert err == (
        "mace: INVALID_INPUT: ada requested this force-continue: the council approval must come"
        " from someone else\n"
    )
    assert written_state(cli_env, capsys) == before
    # Rejecting their own request, or voting on another motion, is still theirs to do.
    code, _, _ = run(capsys, "governance", "reject", job_id, "--action", "force_continue")
    assert code == 0
    code, _, _ = run(capsys, "governance", "approve", job_id, "--action", "production_replay")
    assert code == 0


def test_halt_and_clear_flow(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "sec", "admin")
    code, out, err = run(capsys, "governance", "halt", ROUTER_ID, "--reason", "key leak")
    assert (code, out, err) == (
        0,
        f"FORCE_HALT_REPLAY set on snapshot {ROUTER_ID} for tenant default by sec\n",
        "",
    )

    act(monkeypatch, "ana", "admin,auditor")
    halted = (
        f"router snapshot {ROUTER_ID} is halted (SECURITY_INCIDENT: key leak) until the council"
        " appends FORCE_HALT_CLEAR"
    )
    code, report, err = replay_json(capsys, job_id)
    assert code == 1
    assert_failure_line(err, "FORCE_HALT_REPLAY", halted)
    assert (report["error_code"], report["error_message"]) == ("FORCE_HALT_REPLAY", halted)
    code, out, err = run(capsys, "replay", job_id)
    assert code == 1
    assert_failure_line(err, "FORCE_HALT_REPLAY", halted)
    assert out == (
        "verdict: FAILED FORCE_HALT_REPLAY, authoritative; of 4 facts: 0 re-executed and"
        " matched, 0 compared by hash, 0 taken as recorded, 0 missing, 4 not checked\n"
        f"replay of job {job_id} (attempt 2, audit, by ana [admin, auditor])\n"
        f"  failed: 2b force halts: FORCE_HALT_REPLAY: {halted}\n"
    )
    # A job run later with the same snapshot is halted too.
    other = new_job(capsys, "hello", "s2")
    code, _, err = run(capsys, "replay", other)
    assert code == 1
    assert_failure_line(err, "FORCE_HALT_REPLAY", halted)

    # Only the council clears.
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID)
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "ACCESS_DENIED",
        "only the council role may clear a halt; ana holds ['admin', 'auditor']",
    )
    assert written_state(cli_env, capsys) == before
    act(monkeypatch, "cleo", "council")
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID)
    assert (code, out, err) == (
        0,
        f"FORCE_HALT_CLEAR on snapshot {ROUTER_ID} for tenant default by cleo\n",
        "",
    )

    act(monkeypatch, "ana", "admin,auditor")
    code, report, _ = replay_json(capsys, job_id)
    assert (code, report["ok"], report["attempt"]) == (0, True, 3)
    assert run(capsys, "replay", other)[0] == 0

    # Clearing again: the snapshot is not halted any more.
    act(monkeypatch, "cleo", "council")
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID)
    assert (code, out) == (2, "")
    assert err == (
        f"mace: INVALID_INPUT: snapshot {ROUTER_ID} is not halted in scope"
        f" tenant-snapshot:{ROUTER_ID}\n"
    )
    assert written_state(cli_env, capsys) == before

    scope = f"tenant-snapshot:{ROUTER_ID}"
    halts = [e for e in governance_log(capsys, job_id) if e["scope"] == scope]
    assert [e["event"] for e in halts] == [
        "GOVERNANCE_OPENED",
        "FORCE_HALT_REPLAY",
        "FORCE_HALT_CLEAR",
    ]
    assert (halts[1]["snapshot_id"], halts[1]["cause"], halts[1]["reason"]) == (
        ROUTER_ID,
        "SECURITY_INCIDENT",
        "key leak",
    )
    assert (halts[1]["actor_id"], halts[2]["actor_id"], halts[2]["roles"]) == (
        "sec",
        "cleo",
        ["council"],
    )


def test_clear_of_a_snapshot_never_halted_and_bad_snapshot_ids(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new_job(capsys)
    act(monkeypatch, "cleo", "council")
    before = written_state(cli_env, capsys)
    selfrep = DEFAULT_IDS["selfrep"]
    unknown = "a" * 64
    for argv, message in (
        (
            ["clear", selfrep],
            f"snapshot {selfrep} is not halted in scope tenant-snapshot:{selfrep}",
        ),
        (
            ["clear", "nothex"],
            "invalid snapshot id 'nothex': expected 64 lowercase hex characters",
        ),
        (
            ["halt", "nothex", "--reason", "r"],
            "invalid snapshot id 'nothex': expected 64 lowercase hex characters",
        ),
        (
            ["clear", selfrep.upper()],
            f"invalid snapshot id '{selfrep.upper()}': expected 64 lowercase hex characters",
        ),
        (["clear", unknown], f"no snapshot {unknown}"),
        (["halt", unknown, "--reason", "r"], f"no snapshot {unknown}"),
        (["halt", selfrep, "--reason", " "], "a reason must be one line of 1-500 characters"),
        (["halt", selfrep, "--reason", "a\nb"], "a reason must be one line of 1-500 characters"),
        (["halt", selfrep, "--reason", "a\rb"], "a reason must be one line of 1-500 characters"),
    ):
        code, out, err = run(capsys, "governance", *argv)
        assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before


def test_governance_log_of_one_job_and_of_all(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = new_job(capsys)
    second = new_job(capsys, "hello", "s2")
    act(monkeypatch, "ana", "admin,auditor")
    assert run(capsys, "replay", first)[0] == 0
    assert run(capsys, "replay", second, "--mode", "reexecute")[0] == 0
    act(monkeypatch, "cleo", "council")
    assert run(capsys, "governance", "approve", second, "--action", "production_replay")[0] == 0

    everything = governance_log(capsys)
    assert [(e["scope"], e["event"], e["version"]) for e in everything] == [
        # A job's first replay request opens its record.
        (f"job:{first}", "REPLAY_REQUEST", 1),
        (f"job:{first}", "REPLAY_RESULT", 2),
        (f"job:{second}", "REPLAY_REQUEST", 1),
        (f"job:{second}", "REPLAY_RESULT", 2),
        (f"job:{second}", "COUNCIL_VOTE", 3),
    ]
    assert governance_log(capsys, first) == everything[:2]
    assert governance_log(capsys, second) == everything[2:]
    request = everything[2]
    assert set(request) >= {
        "scope",
        "version",
        "event",
        "attempt",
        "mode",
        "force_continue",
        "actor_id",
        "roles",
        "recorded_at",
    }
    assert (request["attempt"], request["mode"], request["actor_id"]) == (1, "reexecute", "ana")
    result = everything[3]
    assert set(result) >= {
        "scope",
        "version",
        "event",
        "attempt",
        "ok",
        "error_code",
        "authoritative",
        "divergences",
        "report_digest",
        "recorded_at",
    }

    # Text: one line per entry, the fields beyond scope, version and event as canonical JSON.
    code, out, err = run(capsys, "governance", "log")
    assert (code, err) == (0, "")
    expected = []
    for entry in everything:
        rest = {k: v for k, v in entry.items() if k not in {"scope", "version", "event"}}
        expected.append(
            f"{entry['scope']} #{entry['version']} {entry['event']} {canonical_json(rest).decode()}"
        )
    assert out.splitlines() == expected
    code, out, err = run(capsys, "governance", "log", first)
    assert (code, err) == (0, "")
    assert out.splitlines() == expected[:2]

    # A halt on a snapshot a job declares belongs to that job's log, and to every such job's.
    assert run(capsys, "governance", "halt", ROUTER_ID, "--reason", "incident 7")[0] == 0
    halt_scope = f"tenant-snapshot:{ROUTER_ID}"
    for job_id in (first, second):
        assert [e["event"] for e in governance_log(capsys, job_id) if e["scope"] == halt_scope] == [
            "GOVERNANCE_OPENED",
            "FORCE_HALT_REPLAY",
        ]

    before = written_state(cli_env, capsys)
    for job_id, message in (
        ("no-such-job", "no job no-such-job"),
        ("bad id!", "invalid job id 'bad id!'"),
    ):
        code, out, err = run(capsys, "governance", "log", job_id, "--json")
        assert_usage_error(code, out, err, message)
    assert written_state(cli_env, capsys) == before


def test_governance_log_on_a_store_without_governance(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = new_job(capsys)
    assert run(capsys, "governance", "log") == (0, "", "")
    assert run(capsys, "governance", "log", job_id, "--json") == (0, "", "")


# --- divergence and force-continue on an ingested run -------------------------------------------


def test_ingested_divergence_and_governed_force_continue(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    real = new_job(capsys, capture="full_io")
    code, out, err = run(
        capsys, "ingest", write_run_file(tmp_path, diverging_run(capsys, real)), "--json"
    )
    assert (code, err) == (0, "")
    assert canonical_line(out) == {
        "job_id": "diverged-1",
        "events": 4,
        "replayable": True,
        "missing_artifacts": [],
        "duplicate": False,
    }
    divergence = {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 0,
        "field": "router_decision",
        "recorded": WRONG_DECISION,
        "replayed": RIGHT_DECISION,
    }
    differs = "iteration 0: router_decision differs from the record"

    act(monkeypatch, "ana", "admin,auditor")
    code, out, err = run(capsys, "replay", "diverged-1")
    assert code == 1
    assert_failure_line(err, "REPLAY_DIVERGENCE", differs)
    assert out == (
        "verdict: FAILED REPLAY_DIVERGENCE, authoritative; of 6 facts: 4 re-executed and"
        " matched, 0 compared by hash, 0 taken as recorded, 0 missing, 2 diverged\n"
        "replay of job diverged-1 (attempt 1, audit, by ana [admin, auditor])\n"
        f"  failed: compare router_decision (iteration 0): REPLAY_DIVERGENCE: {differs}\n"
        "  REPLAY_DIVERGENCE at iteration 0, field router_decision:\n"
        f"    recorded: {canonical_json(WRONG_DECISION).decode()}\n"
        f"    replayed: {canonical_json(RIGHT_DECISION).decode()}\n"
    )

    reports = tmp_path / "reports"
    code, out, err = run(capsys, "replay", "diverged-1", "--json", "--report-dir", str(reports))
    assert code == 1
    assert_failure_line(err, "REPLAY_DIVERGENCE", differs)
    report = canonical_line(out)
    assert (reports / "replay_report.json").read_bytes() == out.encode()
    assert report["divergences"] == [divergence]
    assert canonical_json(report["divergences"][0]) == canonical_json(divergence)
    assert (report["ok"], report["error_code"], report["authoritative"]) == (
        False,
        "REPLAY_DIVERGENCE",
        True,
    )
    markdown = (reports / "replay_report.md").read_text(encoding="utf-8")
    assert markdown == render_markdown(report)
    assert f"```json\n{canonical_json(divergence).decode()}\n```" in markdown

    # --force-continue without governance: refused.
    required = (
        f"{differs}; continuing needs an admin's force-continue request and a council approval"
        " for this job in its governance record"
    )
    code, report, err = replay_json(capsys, "diverged-1", "--force-continue")
    assert code == 1
    assert_failure_line(err, "FORCE_CONTINUE_REQUIRED", required)
    assert report["error_code"] == "FORCE_CONTINUE_REQUIRED"
    assert report["force_continue"] is True

    # An admin's request alone is not enough.
    act(monkeypatch, "adam", "admin")
    code, _, _ = run(
        capsys, "governance", "request", "diverged-1", "--action", "force_continue", "--reason", "r"
    )
    assert code == 0
    act(monkeypatch, "ana", "admin,auditor")
    code, _, err = run(capsys, "replay", "diverged-1", "--force-continue")
    assert code == 1
    assert_failure_line(err, "FORCE_CONTINUE_REQUIRED", required)

    # A council approval by someone else completes it.
    act(monkeypatch, "cleo", "council")
    assert run(capsys, "governance", "approve", "diverged-1", "--action", "force_continue")[0] == 0
    act(monkeypatch, "ana", "admin,auditor")

    # Without --force-continue the replay still stops at the divergence.
    code, _, err = run(capsys, "replay", "diverged-1")
    assert code == 1
    assert_failure_line(err, "REPLAY_DIVERGENCE", differs)

    forced_message = "forced replay found 2 divergence(s)"
    # The run's RouterDecision event was changed with its trace: the event diverges too.
    event_divergence = {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 0,
        "field": "events.RouterDecision",
        "recorded": [{"iteration": 0, "schema_version": 1, **WRONG_DECISION}],
        "replayed": [{"iteration": 0, "schema_version": 1, **RIGHT_DECISION}],
    }
    forced_reason = "forced past divergences with a council-approved force-continue"
    code, report, err = replay_json(capsys, "diverged-1", "--force-continue")
    assert code == 1
    assert_failure_line(err, "REPLAY_DIVERGENCE", forced_message)
    assert (report["ok"], report["error_code"], report["error_message"]) == (
        False,
        "REPLAY_DIVERGENCE",
        forced_message,
    )
    assert report["authoritative"] is False
    assert report["non_authoritative_reasons"] == [forced_reason]
    assert report["divergences"] == [divergence, event_divergence]
    steps = {s["step"]: s for s in report["steps"]}
    assert steps["compare router_decision (iteration 0)"]["detail"] == (
        f"REPLAY_DIVERGENCE: {differs} (forced: continuing)"
    )
    # It ran to the end: every later field was compared, the final answer too.
    assert steps["8 iteration 0: brainstate_after"]["outcome"] == "ok"
    assert steps["9 final answer"]["outcome"] == "ok"
    assert report["steps"][-1] == {"step": "result", "outcome": "failed", "detail": forced_message}

    code, out, err = run(capsys, "replay", "diverged-1", "--force-continue")
    assert code == 1
    assert_failure_line(err, "REPLAY_DIVERGENCE", forced_message)
    lines = out.splitlines()
    assert lines[0].startswith("verdict: FAILED REPLAY_DIVERGENCE, NON-AUTHORITATIVE; of 7 facts:")
    assert lines[1] == "replay of job diverged-1 (attempt 7, audit, by ana [admin, auditor])"
    assert f"  not authoritative: {forced_reason}" in lines
    assert lines[-6:-3] == [
        "  REPLAY_DIVERGENCE at iteration 0, field router_decision:",
        f"    recorded: {canonical_json(WRONG_DECISION).decode()}",
        f"    replayed: {canonical_json(RIGHT_DECISION).decode()}",
    ]
    assert lines[-3:] == [
        "  REPLAY_DIVERGENCE at iteration 0, field events.RouterDecision:",
        f"    recorded: {canonical_json(event_divergence['recorded']).decode()}",
        f"    replayed: {canonical_json(event_divergence['replayed']).decode()}",
    ]

    results = [e for e in governance_log(capsys, "diverged-1") if e["event"] == "REPLAY_RESULT"]
    assert [
        (r["attempt"], r["error_code"], r["authoritative"], r["divergences"]) for r in results
    ] == [
        (1, "REPLAY_DIVERGENCE", True, 1),
        (2, "REPLAY_DIVERGENCE", True, 1),
        (3, "FORCE_CONTINUE_REQUIRED", True, 1),
        (4, "FORCE_CONTINUE_REQUIRED", True, 1),
        (5, "REPLAY_DIVERGENCE", True, 1),
        (6, "REPLAY_DIVERGENCE", False, 2),
        (7, "REPLAY_DIVERGENCE", False, 2),
    ]
    requests = [e for e in governance_log(capsys, "diverged-1") if e["event"] == "REPLAY_REQUEST"]
    assert [r["force_continue"] for r in requests] == [False, False, True, True, False, True, True]


def test_production_replay_of_unpersisted_output_fails(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(
        capsys, "run", "2 + 3", "--seed", "p1", "--capture", "prompts_only", "--json"
    )
    job_id = canonical_line(out)["job_id"]
    act(monkeypatch, "ana", "admin,auditor")
    missing = (
        "iteration 0 agent math_agent (event 2): response not persisted: capture mode"
        " prompts_only stores the hash of response only"
    )
    code, report, err = replay_json(capsys, job_id, "--mode", "production")
    assert code == 1
    assert_failure_line(err, "MISSING_PERSISTED_AGENT_OUTPUT", missing)
    assert report["capture_mode"] == "prompts_only"
    assert [m["step"] for m in report["unreconstructable"]] == ["iteration 0 agent math_agent"]


def test_tampered_snapshot_halts_replays_until_cleared(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    table = RawTable(cli_env)
    stream = Snapshot.id_for(ROUTER_ID)
    original = table.state(stream, 1)
    table.set_column(stream, 1, "state", original.replace(b"R1", b"R9"))

    act(monkeypatch, "ana", "admin,auditor")
    tampered = f"router snapshot {ROUTER_ID}: stream {stream} version 1: MAC mismatch"
    code, report, err = replay_json(capsys, job_id)
    assert code == 1
    assert_failure_line(err, "INTEGRITY_FAILURE", tampered)
    assert report["steps"][-1]["step"] == "3 snapshot signatures"

    halted = (
        f"router snapshot {ROUTER_ID} is halted (INTEGRITY_FAILURE: signature check failed in"
        f" replay {job_id}#1) until the council appends FORCE_HALT_CLEAR"
    )
    code, _, err = run(capsys, "replay", job_id)
    assert code == 1
    assert_failure_line(err, "FORCE_HALT_REPLAY", halted)
    (halt,) = [e for e in governance_log(capsys, job_id) if e["event"] == "FORCE_HALT_REPLAY"]
    assert (halt["scope"], halt["cause"], halt["actor_id"]) == (
        f"tenant-snapshot:{ROUTER_ID}",
        "INTEGRITY_FAILURE",
        "ana",
    )
    code, _, err = run(capsys, "verify", job_id)
    assert code == 1
    assert_failure_line(err, "INTEGRITY_FAILURE")

    # The council clears it once the snapshot is restored; the job replays again.
    table.set_column(stream, 1, "state", original)
    act(monkeypatch, "cleo", "council")
    assert run(capsys, "governance", "clear", ROUTER_ID)[0] == 0
    act(monkeypatch, "ana", "admin,auditor")
    code, report, _ = replay_json(capsys, job_id)
    assert (code, report["ok"], report["attempt"]) == (0, True, 3)


# --- mace verify --------------------------------------------------------------------------------


def test_verify_a_job(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = new_job(capsys)
    code, out, err = run(capsys, "verify", job_id)
    assert (code, err) == (0, "")
    assert out == f"ok: job {job_id}: 7 events verified (sealed), 5 snapshots verified\n"
    code, out, err = run(capsys, "verify", job_id, "--check-sequence")
    assert (code, err) == (0, "")
    assert out == (
        f"ok: job {job_id}: 7 events verified (sealed), 5 snapshots verified,"
        " sequence and event ids checked\n"
    )
    code, out, err = run(capsys, "verify", job_id, "--json")
    assert (code, err) == (0, "")
    assert canonical_line(out) == {
        "ok": True,
        "error_code": None,
        "job_id": job_id,
        "events": 7,
        "sealed": True,
        "snapshots": 5,
        "sequence_checked": False,
        "sem_entries": 0,
    }
    code, out, _ = run(capsys, "verify", job_id, "--check-sequence", "--json")
    assert code == 0
    assert canonical_line(out)["sequence_checked"] is True


def test_verify_an_ingested_job_with_sequence(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    real = new_job(capsys)
    assert run(capsys, "ingest", write_run_file(tmp_path, diverging_run(capsys, real)))[0] == 0
    code, out, err = run(capsys, "verify", "diverged-1", "--check-sequence", "--json")
    assert (code, err) == (0, "")
    assert canonical_line(out)["events"] == 7


def test_verify_and_replay_a_tampered_job(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    table = RawTable(cli_env)
    stream = Job.id_for(job_id)
    state = bytearray(table.state(stream, 2))
    state[-3] ^= 0x01
    table.set_column(stream, 2, "state", bytes(state))
    failure = f"stream {stream} version 2: MAC mismatch"

    code, out, err = run(capsys, "verify", job_id)
    assert (code, out) == (1, "")
    assert_failure_line(err, "INTEGRITY_FAILURE", failure)
    code, out, err = run(capsys, "verify", job_id, "--check-sequence", "--json")
    assert code == 1
    assert_failure_line(err, "INTEGRITY_FAILURE", failure)
    assert canonical_line(out) == {
        "ok": False,
        "error_code": "INTEGRITY_FAILURE",
        "stream": str(stream),
        "version": 2,
        "reason": "MAC mismatch",
    }
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert code == 1
    # Below a checkpoint, the checkpoint that no longer holds is named, and where.
    verdict = canonical_line(out)
    assert (verdict["error_code"], verdict["stream"]) == (
        "INTEGRITY_FAILURE",
        str(CHECKPOINT_STREAM),
    )
    assert verdict["reason"].endswith(f" (the log now has stream {stream} version 2 there)")

    # A replay of the tampered job fails closed, and the attempt is still recorded.
    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, job_id)
    assert code == 1
    assert_failure_line(err, "INTEGRITY_FAILURE", f"job stream: {failure}")
    assert (report["error_code"], report["capture_mode"], report["snapshot_ids"]) == (
        "INTEGRITY_FAILURE",
        None,
        {},
    )
    entries = [e for e in replay_entries(governance_log(capsys)) if e["scope"] == f"job:{job_id}"]
    assert [(e["event"], e.get("error_code")) for e in entries] == [
        ("REPLAY_REQUEST", None),
        ("REPLAY_RESULT", "INTEGRITY_FAILURE"),
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "name one JOB_ID or give --all (see 'mace verify --help')"),
        (["--json"], "name one JOB_ID or give --all (see 'mace verify --help')"),
        (["{job}", "--all"], "name one JOB_ID or give --all (see 'mace verify --help')"),
        (["--all", "--check-sequence"], "--check-sequence applies to one job: name a JOB_ID"),
        (["no-such-job"], "no job no-such-job"),
        (["bad id!"], "invalid job id 'bad id!'"),
    ],
)
def test_verify_bad_usage_exits_2(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    job_id = new_job(capsys)
    before = event_count(cli_env)
    code, out, err = run(capsys, "verify", *(a.format(job=job_id) for a in argv))
    assert_usage_error(code, out, err, message)
    assert event_count(cli_env) == before
