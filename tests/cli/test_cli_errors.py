"""How ``mace`` says no: one line ``mace: CODE: message``, or with ``--json`` one canonical JSON
error on stderr and nothing on stdout; the same code the HTTP service answers; Ctrl-C is 130.
"""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest
from support.api_support import Api, assert_error
from support.cli_output import canonical_line, json_error
from support.ledger_fixtures import (
    INTERRUPT_GUARD_SECONDS,
    TEST_CHECKPOINT_KEY,
    RawTable,
    mace_to_interrupt,
    run,
    settings_for,
)
from support.lost_ctrl_c import MACE_LOSING_CTRL_C

from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


def test_usage_refused_by_the_parser_is_a_json_error_under_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "jobs", "--json", "--no-such-option")
    assert (code, out) == (2, "")
    assert json_error(err) == {
        "code": "INVALID_INPUT",
        "message": "unrecognized arguments: --no-such-option (see 'mace --help')",
    }
    code, out, err = run(capsys, "jobs", "--no-such-option")
    assert (code, out) == (2, "")
    assert (
        err == "mace: INVALID_INPUT: unrecognized arguments: --no-such-option (see 'mace --help')\n"
    )


def test_an_unknown_job_is_not_found_in_one_line_or_as_json(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "run", "2 + 3", "--seed", "s1")[0] == 0
    code, out, err = run(capsys, "events", "no-such-job", "--json")
    assert (code, out) == (2, "")
    assert json_error(err) == {"code": "NOT_FOUND", "message": "no job no-such-job"}
    assert run(capsys, "events", "no-such-job") == (
        2,
        "",
        "mace: NOT_FOUND: no job no-such-job\n",
    )


def test_an_integrity_failure_is_a_json_error_under_json(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rule = {"rule_id": "R4", "pattern": ".*", "agent": "generic_agent", "why": "fallback"}
    source = tmp_path / "router.json"
    source.write_bytes(orjson.dumps({"rules": [rule]}))
    code, out, err = run(capsys, "snapshot", "put", "--kind", "router", str(source), "--json")
    assert (code, err) == (0, ""), err
    snapshot_id = canonical_line(out)["snapshot_id"]
    stream = Snapshot.id_for(snapshot_id)
    table = RawTable(cli_env)
    table.set_column(stream, 1, "state", table.state(stream, 1).replace(b"R4", b"R1"))

    code, out, err = run(capsys, "snapshot", "show", snapshot_id, "--json")
    assert (code, out) == (1, "")
    assert json_error(err) == {
        "code": "INTEGRITY_FAILURE",
        "message": f"stream {stream} version 1: MAC mismatch",
    }


def test_http_and_cli_give_an_unknown_job_the_same_code(
    api: Api,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    api.new_job()
    message = assert_error(api.get("/v1/jobs/no-such-job/events"), 404, "NOT_FOUND")
    monkeypatch.setenv("MACE_STORE", settings.store)
    assert settings.signing_keys is not None
    monkeypatch.setenv("MACE_SIGNING_KEYS", settings.signing_keys.get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k1")
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(TEST_CHECKPOINT_KEY))
    code, out, err = run(capsys, "events", "no-such-job", "--tenant", "acme", "--json")
    assert (code, out) == (2, "")
    assert json_error(err) == {"code": "NOT_FOUND", "message": message}


def test_a_ctrl_c_lost_in_a_finaliser_stops_follow_in_one_line(store_url: str) -> None:
    """``mace follow`` waits for commits until interrupted. A Ctrl-C whose KeyboardInterrupt a
    finaliser swallowed (SIGUSR1 delivers one there: `MACE_LOSING_CTRL_C`) stops it at its next
    poll all the same: 130, one line, no traceback, no "Exception ignored". (One that gets
    through: `test_follow_applies_each_commit_and_stops_on_ctrl_c`.)"""
    Ledger.open(settings_for(store_url)).close()
    with mace_to_interrupt(store_url, "follow", program=MACE_LOSING_CTRL_C) as follower:
        assert follower.stderr is not None
        # The command says it is following once it waits: lose a Ctrl-C then.
        assert follower.stderr.readline().startswith("following ")
        follower.send_signal(signal.SIGUSR1)
        out, err = follower.communicate(timeout=INTERRUPT_GUARD_SECONDS)
    assert (follower.returncode, out, err) == (130, "", "mace: interrupted\n")
