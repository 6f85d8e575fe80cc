"""Input that must be refused whole, on SQLite and PostgreSQL: exit 2 or 422, one line, nothing
written; and stored rows without a state or topic, which must fail closed as INTEGRITY_FAILURE.

- Every JSON a user hands the command line (values, snapshot and mock files, run lines) goes
  through one parser: integers beyond signed 64 bits and non-finite numbers are refused with the
  JSONPath of the value, never stored as a rounded float.
- A snapshot is checked by its kind's own parser when it is stored, not first when a job uses it.
- A job's input is at most ``MAX_INPUT_CHARS`` characters, whichever way it arrives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error, auth
from support.ledger_fixtures import RawTable, run, store_of

from domain.job import MAX_INPUT_CHARS, Job
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

BIG = 123456789012345678901234567890
INT64_MAX = 2**63 - 1


@pytest.fixture
def cli_store(cli_env: Settings) -> Settings:
    """A store written to already (and checkpointed), so that "nothing written" can be
    measured."""
    with Ledger.open(cli_env) as ledger:
        ledger.sem.put("world/country/france/capital", "Paris")
    return cli_env


def position(settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        return store_of(ledger).recorder.max_notification_id() or 0


def refused(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> str:
    """``mace *argv`` exits 2 with one line on standard error and writes nothing."""
    before = position(settings)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith("mace: INVALID_INPUT: "), err
    assert position(settings) == before
    return err.removeprefix("mace: INVALID_INPUT: ").rstrip("\n")


def write(tmp_path: Path, name: str, content: bytes | str) -> str:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return str(path)


def run_lines(*lines: dict[str, Any] | str) -> str:
    """A run file: dictionaries as JSON lines, strings verbatim (JSON orjson would not write)."""
    return "".join(
        (line if isinstance(line, str) else orjson.dumps(line).decode()) + "\n" for line in lines
    )


START = {"type": "RunStarted", "seed": 7, "input": "say hello"}


# --- one JSON parser for what the command line reads ---------------------------------------------

BAD_JSON: dict[str, tuple[list[str], str | None, str]] = {
    # argv ("{file}" for the file), the file's content, the error
    "sem-value-beyond-64-bits": (
        ["sem", "put", "world/country/x/population", str(BIG)],
        None,
        "value: integer outside signed 64-bit range at $",
    ),
    "sem-value-below-64-bits": (
        ["sem", "put", "world/country/x/population", f"[{-(2**63) - 1}]"],
        None,
        "value: integer outside signed 64-bit range at $[0]",
    ),
    "sem-value-of-thousands-of-digits": (
        ["sem", "put", "world/country/x/population", '{"n": -' + "9" * 5000 + "}"],
        None,
        "value: integer outside signed 64-bit range at $.n",
    ),
    "sem-value-nan": (
        ["sem", "put", "world/country/x/population", '{"n": NaN}'],
        None,
        "value: non-finite float at $.n",
    ),
    "sem-value-overflowing-float": (
        ["sem", "put", "world/country/x/population", "1e400"],
        None,
        "value: non-finite float at $",
    ),
    "snapshot-file": (
        ["snapshot", "put", "--kind", "governance", "{file}"],
        f'{{"replay_max_iterations": {BIG}}}',
        "{file}: integer outside signed 64-bit range at $.replay_max_iterations",
    ),
    "snapshot-file-infinity": (
        ["snapshot", "put", "--kind", "governance", "{file}"],
        '{"replay_max_seconds": Infinity}',
        "{file}: non-finite float at $.replay_max_seconds",
    ),
    "ingest-line": (
        ["ingest", "{file}"],
        run_lines(START, f'{{"type": "RunCompleted", "final_output": {{"n": {BIG}}}}}'),
        "{file} line 2: integer outside signed 64-bit range at $.final_output.n",
    ),
    "ingest-line-nan": (
        ["ingest", "{file}"],
        run_lines(START, '{"type": "RunCompleted", "final_output": [NaN]}'),
        "{file} line 2: non-finite float at $.final_output[0]",
    ),
    "mock-file": (
        ["replay", "some-job", "--mode", "reexecute", "--mock", "math_agent={file}"],
        f'{{"text": "4", "claims": [{{"n": {BIG}}}]}}',
        "{file}: integer outside signed 64-bit range at $.claims[0].n",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_JSON))
def test_json_the_cli_reads_is_refused_with_its_path_and_nothing_is_written(
    cli_store: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    case: str,
) -> None:
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "operator,admin,auditor")
    argv, content, message = BAD_JSON[case]
    path = "" if content is None else write(tmp_path, "input.json", content)
    argv = [arg.replace("{file}", path) for arg in argv]
    assert refused(capsys, cli_store, *argv) == message.replace("{file}", path)


def test_integers_at_the_edges_of_64_bits_are_stored_exactly(
    cli_store: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    value = [INT64_MAX, -(2**63)]
    key = "world/country/x/population"
    assert run(capsys, "sem", "put", key, orjson.dumps(value).decode())[0] == 0
    code, out, _ = run(capsys, "sem", "get", key, "--json")
    assert code == 0
    assert b"[9223372036854775807,-9223372036854775808]" in out.encode()
    assert orjson.loads(out)["value"] == value


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"final_output": {"n": NaN}}', "non-finite float at $.final_output.n"),
        (b'{"final_output": [1, -Infinity]}', "non-finite float at $.final_output[1]"),
        (b'{"final_output": 1e400}', "non-finite float at $.final_output"),
        (
            b'{"final_output": {"n": %d}}' % BIG,
            "integer outside signed 64-bit range at $.final_output.n",
        ),
    ],
)
def test_http_bodies_are_held_to_the_same_rules(api: Api, raw: bytes, message: str) -> None:
    run_id = api.open_run(START)
    before = api.position()
    response = api.client.post(
        f"/v1/runs/{run_id}/complete",
        content=raw,
        headers={**auth("operator"), "content-type": "application/json"},
    )
    assert_error(response, 422, "INVALID_INPUT", f"body: {message}", "body")
    assert api.position() == before


def test_an_integer_too_long_to_parse_is_refused_like_any_bad_body(api: Api) -> None:
    """Python's JSON parser gives up on 4,300+ digits before any of our rules see the number."""
    run_id = api.open_run(START)
    before = api.position()
    response = api.client.post(
        f"/v1/runs/{run_id}/complete",
        content=b'{"final_output": ' + b"9" * 5000 + b"}",
        headers={**auth("operator"), "content-type": "application/json"},
    )
    assert_error(response, 422, "INVALID_INPUT", field="body")
    assert response.json()["error"]["message"].startswith("body: not a JSON body we can read")
    assert api.position() == before


# --- snapshots are checked by their kind's parser when stored ------------------------------------

ROUTER_RULE = {"rule_id": "R1", "pattern": ".*", "agent": "math_agent", "why": "always"}
BAD_SNAPSHOTS: dict[str, tuple[str, dict[str, Any], str]] = {
    "router-no-rules": (
        "router",
        {"rules": []},
        "router snapshot: field rules: List should have at least 1 item after validation, not 0",
    ),
    "router-bad-regex": (
        "router",
        {"rules": [ROUTER_RULE, {**ROUTER_RULE, "rule_id": "R2", "pattern": "("}]},
        "router snapshot: field rules[1].pattern: not a valid regular expression: missing ),"
        " unterminated subpattern at position 0",
    ),
    "router-redos": (
        "router",
        {"rules": [ROUTER_RULE, {**ROUTER_RULE, "rule_id": "R2", "pattern": "^(a+)+$"}]},
        "router snapshot: field rules[1]: rule R2: pattern '^(a+)+$' can take exponential time on"
        " some inputs (a quantified part inside a repeated group (nested quantifiers)); expected"
        " no nested quantifiers, overlapping alternatives under a quantifier or backreferences",
    ),
    "router-polynomial": (
        "router",
        {"rules": [ROUTER_RULE, {**ROUTER_RULE, "rule_id": "R2", "pattern": r"\w*\d*x"}]},
        "router snapshot: field rules[1]: rule R2: pattern '\\\\w*\\\\d*x' can take polynomial time"
        " on some inputs (2 repeated parts in a row that can match the same characters); expected"
        " repeated parts in a row to match different characters (\\s*\\d+, not \\w*\\d*)",
    ),
    "router-repeated-id": (
        "router",
        {"rules": [ROUTER_RULE, ROUTER_RULE]},
        "router snapshot: rule ids must be unique, repeated: ['R1']",
    ),
    "privacy-attribute": (
        "privacy",
        {"deny_sem_attributes": ["Pass Word"]},
        "privacy snapshot: field deny_sem_attributes: attributes must be snake_case: ['Pass Word']",
    ),
    "selfrep-unknown-field": (
        "selfrep",
        {"agents": {}, "colour": "red"},
        "selfrep snapshot: field colour: Extra inputs are not permitted",
    ),
    "brainstate-capacity": (
        "brainstate",
        {"working_memory": {"capacity": 0}},
        "brainstate snapshot: field working_memory.capacity: Input should be greater than or"
        " equal to 1",
    ),
    "governance-seconds": (
        "governance",
        {"replay_max_seconds": 0},
        "governance snapshot: field replay_max_seconds: Input should be greater than 0",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SNAPSHOTS))
def test_snapshot_put_refuses_what_its_kind_cannot_use(
    cli_store: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    kind, payload, message = BAD_SNAPSHOTS[case]
    source = write(tmp_path, "snapshot.json", orjson.dumps(payload))
    assert refused(capsys, cli_store, "snapshot", "put", "--kind", kind, source) == message


@pytest.mark.parametrize("case", sorted(BAD_SNAPSHOTS))
def test_a_snapshot_its_kind_cannot_use_is_422_and_writes_nothing(api: Api, case: str) -> None:
    kind, payload, message = BAD_SNAPSHOTS[case]
    before = api.position()
    response = api.post("/v1/snapshots", {"kind": kind, "payload": payload})
    assert_error(response, 422, "INVALID_INPUT", message, "body.payload")
    assert api.position() == before


def test_a_job_under_a_stored_router_rule_that_can_backtrack_is_refused_before_it_runs(
    cli_store: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store written before rules were checked may hold such a rule: naming it for a new job
    is refused in one line, so no input (27 `a`s and a `!` took seconds) ever reaches it."""
    rule = {**ROUTER_RULE, "pattern": "^(a+)+$"}
    with Ledger.open(cli_store) as ledger:
        stored, _ = ledger.snapshots.put(Snapshot.declare("router", {"rules": [rule]}))
    message = refused(
        capsys,
        cli_store,
        "run",
        "a" * 36 + "!",
        "--seed",
        "s1",
        "--snapshot",
        f"router={stored.snapshot_id}",
    )
    assert message == (
        f"router snapshot {stored.snapshot_id} cannot be used: field rules[0]: rule R1: pattern"
        " '^(a+)+$' can take exponential time on some inputs (a quantified part inside a repeated"
        " group (nested quantifiers)); expected no nested quantifiers, overlapping alternatives"
        " under a quantifier or backreferences"
    )


def test_http_job_under_a_stored_router_rule_that_can_backtrack_is_422(api: Api) -> None:
    rule = {**ROUTER_RULE, "pattern": "^(a+)+$"}
    stored, _ = api.ledger.snapshots.put(Snapshot.declare("router", {"rules": [rule]}))
    before = api.position()
    body = {"input": "a" * 36 + "!", "seed": "s1", "snapshot_ids": {"router": stored.snapshot_id}}
    response = api.post("/v1/jobs", body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "INVALID_INPUT"
    assert "rule R1: pattern '^(a+)+$' can take exponential" in response.json()["error"]["message"]
    assert api.position() == before


def test_http_job_longer_than_its_router_can_route_in_bounded_time_is_422(api: Api) -> None:
    """The routing budget holds over HTTP as on the Python API and the command line."""
    rule = {**ROUTER_RULE, "pattern": r"\s+$"}
    stored, _ = api.ledger.snapshots.put(Snapshot.declare("router", {"rules": [rule]}))
    before = api.position()
    body = {"input": " " * 3162 + "!", "seed": "s1", "snapshot_ids": {"router": stored.snapshot_id}}
    response = api.post("/v1/jobs", body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == {
        "code": "INVALID_INPUT",
        "message": "job input: 3163 characters, at most 3162 under this router: rule R1"
        " ('\\\\s+$') may take time growing as n**2",
    }
    assert api.position() == before


# --- one limit on a job's input -------------------------------------------------------------------


def test_job_input_over_the_limit_is_refused_by_the_job_itself() -> None:
    with pytest.raises(ValueError, match=f"^job input: {MAX_INPUT_CHARS + 1} characters, at most"):
        Job.check_start("j1", "s1", "x" * (MAX_INPUT_CHARS + 1), {})
    Job.check_start("j1", "s1", "x" * MAX_INPUT_CHARS, {})


def test_mace_run_refuses_input_over_the_limit_and_takes_it_at_the_limit(
    cli_store: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    over = "x" * (MAX_INPUT_CHARS + 1)
    message = f"job input: {MAX_INPUT_CHARS + 1} characters, at most {MAX_INPUT_CHARS}"
    assert refused(capsys, cli_store, "run", over, "--seed", "s1") == message
    code, out, err = run(capsys, "run", over[1:], "--seed", "s1", "--json")
    assert (code, err) == (0, ""), err
    assert orjson.loads(out)["final_output"]


def test_mace_ingest_refuses_input_over_the_limit(
    cli_store: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    started = {**START, "input": "x" * (MAX_INPUT_CHARS + 1)}
    source = write(
        tmp_path, "run.jsonl", run_lines(started, {"type": "RunCompleted", "final_output": "ok"})
    )
    assert refused(capsys, cli_store, "ingest", source) == (
        f"{source} line 1: field input: String should have at most {MAX_INPUT_CHARS} characters"
    )


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/runs"])
def test_http_refuses_input_over_the_same_limit(api: Api, path: str) -> None:
    before = api.position()
    body = {**START, "input": "x" * (MAX_INPUT_CHARS + 1)}
    if path == "/v1/jobs":
        body = {"input": body["input"], "seed": "s1"}
    response = api.post(path, body)
    message = f"body.input: String should have at most {MAX_INPUT_CHARS} characters"
    assert_error(response, 422, "INVALID_INPUT", message, "body.input")
    assert api.position() == before


# --- a stored row without a state or a topic fails closed ----------------------------------------

READS = [
    ["verify", "--all"],
    ["verify", "{job}"],
    ["events", "{job}"],
    ["replay", "{job}"],
    ["export", "{job}", "-o", "{out}"],
]


@pytest.mark.parametrize("column", ["state", "topic"])
def test_a_row_without_state_or_topic_is_one_integrity_failure_line_on_every_read(
    settings: Settings,
    api: Api,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    column: str,
) -> None:
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "operator,admin,auditor")
    code, out, _ = run(capsys, "run", "2 + 3", "--seed", "s1", "--json")
    assert code == 0
    job_id = orjson.loads(out)["job_id"]
    stream = Job.id_for(job_id)
    RawTable(settings).set_column(stream, 2, column, None)
    expected = f"stream {stream} version 2: "
    # The read models read only the topics they project, so a row without a topic is not theirs
    # to see (``verify`` is what finds it); a row without a state is, when they catch up.
    for argv in [["jobs"], *READS] if column == "state" else READS:
        names = {"{job}": job_id, "{out}": str(tmp_path / "job.bundle.json")}
        code, _, err = run(capsys, *[names.get(a, a) for a in argv])
        assert code == 1, (argv, err)
        assert err.startswith("mace: INTEGRITY_FAILURE: ") and err.count("\n") == 1, (argv, err)
        # Below a checkpoint, ``verify --all`` names the checkpoint and the row's position first.
        below = f"(the log now has {expected.removesuffix(': ')} there)"
        assert (below if argv == ["verify", "--all"] else expected) in err, (argv, err)
    listing = ["/v1/jobs"] if column == "state" else []
    for path in [*listing, f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events"]:
        response = api.get(path, "default_operator")
        text = assert_error(response, 500, "INTEGRITY_FAILURE")
        assert f"stream {stream} version 2: " in text
