"""Governance actions and ``mace export-test`` answer ``--json`` with one canonical JSON line: for
an action, the body the HTTP service answers the same action with (its response model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_output import canonical_line, json_error
from support.ledger_fixtures import run
from support.replay_cli import ROUTER_ID, act, new_job, replay_json

from infrastructure.api.response_models.governance import ForceContinueAsked, HaltChanged, VoteCast
from infrastructure.storage.settings import Settings


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code, out, err = run(capsys, *argv, "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def test_each_governance_action_answers_as_the_http_service(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ada", "admin")
    asked = _json(
        capsys, "governance", "request", job_id, "--action", "force_continue", "--reason", "r"
    )
    by_ada = {"actor_id": "ada", "roles": ["admin"]}
    assert asked == {"job_id": job_id, "requested": "force_continue", "by": by_ada}
    ForceContinueAsked.model_validate(asked)

    act(monkeypatch, "cleo", "council")
    by_cleo = {"actor_id": "cleo", "roles": ["council"]}
    for vote in ("approve", "reject"):
        cast = _json(capsys, "governance", vote, job_id, "--action", "force_continue")
        assert cast == {"job_id": job_id, "motion": "force_continue", "vote": vote, "by": by_cleo}
        VoteCast.model_validate(cast)

    act(monkeypatch, "sec", "admin,council")
    by_sec = {"actor_id": "sec", "roles": ["admin", "council"]}
    halted = _json(capsys, "governance", "halt", ROUTER_ID, "--reason", "key leak")
    assert halted == {"snapshot_id": ROUTER_ID, "halted": True, "tenant": "default", "by": by_sec}
    cleared = _json(capsys, "governance", "clear", ROUTER_ID)
    assert cleared == {**halted, "halted": False}
    for answer in (halted, cleared):
        HaltChanged.model_validate(answer)

    # A refused action under --json is the JSON error, nothing on standard output.
    code, out, err = run(
        capsys, "governance", "approve", "nope", "--action", "force_continue", "--json"
    )
    assert (code, out) == (2, "")
    assert json_error(err) == {"code": "NOT_FOUND", "message": "no job nope"}


def test_export_test_json_names_the_files_and_the_outcome_they_assert(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    job_id = new_job(capsys)
    act(monkeypatch, "ana", "admin,auditor")
    assert replay_json(capsys, job_id)[0] == 0  # a replay result on record: the test asserts it
    out_dir = tmp_path / "regressions"
    written = _json(capsys, "export-test", job_id, "-o", str(out_dir))
    test_file = next(out_dir.glob("test_replay_*.py"))
    bundle = next(out_dir.glob("test_replay_*.bundle.json"))
    assert written == {
        "job_id": job_id,
        "tenant": "default",
        "test_file": str(test_file),
        "bundle_file": str(bundle),
        "asserts": {"ok": True, "error_code": None, "divergences": 0},
        "differences": [],
    }
