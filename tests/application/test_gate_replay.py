"""Gates and policy (seed 002, seed 001 bundles), on SQLite and PostgreSQL, with run files written
by hand: a gate decision under a policy bundle the ledger holds is decided again by that bundle
(the recorded one, not the one in force) and compared; a bundle the ledger does not hold leaves
the run unreplayable in production, naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.cli_output import assert_failure_line
from support.hand_written_runs import (
    ANA,
    as_auditor,
    ingest_and_replay,
    math_iteration,
    run_file,
    with_brainstates,
)
from support.ledger_fixtures import run
from support.policy_gates import DENIED_HASH, NOTHING_DENIED, SECRETS_DENIED, gate

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

UNKNOWN_HASH = "ab" * 32


@pytest.fixture
def auditor(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """`as_auditor`, and SECRETS_DENIED set as the global bundle by `ANA`."""
    ids = as_auditor(cli_env, monkeypatch)
    with Ledger.open(cli_env) as ledger:
        ledger.policy.set_bundle(None, SECRETS_DENIED, ANA)
    return ids


def body(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return with_brainstates([*math_iteration(0, "2 + 3", 5), *events])


def test_a_gate_under_a_held_bundle_is_decided_again_by_that_bundle(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = run_file(tmp_path, "gated", auditor, body(gate("deny")), "2 + 3 = 5")
    # The bundle in force changes after the run: the replay decides by the recorded one.
    other = tmp_path / "other.yaml"
    other.write_text(NOTHING_DENIED)
    code, report = ingest_and_replay(cli_env, path, "gated")
    assert (code, report["reproduced"]) == (0, True)
    assert run(capsys, "policy", "set", str(other), "--global")[0] == 0
    code, out, _ = run(capsys, "replay", "gated", "--mode", "production", "--json")
    report = orjson.loads(out)
    assert (code, report["reproduced"], report["authoritative"]) == (0, True, True)
    row = next(r for r in report["checks"] if r["subject"] == "event 4 GateDecision")
    assert (row["check"], row["detail"]) == (
        "reexecuted",
        f"decided again under policy bundle {DENIED_HASH}: deny (rule no-secrets)",
    )


def test_a_gate_its_bundle_decides_otherwise_diverges(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    path = run_file(tmp_path, "let-through", auditor, body(gate("allow")), "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "let-through")
    assert (code, report["error_code"]) == (1, "REPLAY_DIVERGENCE")
    assert report["divergences"] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": None,
            "field": "event 4 GateDecision decision",
            "recorded": "allow",
            "replayed": "deny",
        }
    ]


def test_a_gate_without_a_subject_is_taken_as_recorded(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    path = run_file(tmp_path, "bare", auditor, body(gate("escalate", subject=None)), "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "bare")
    assert (code, report["reproduced"]) == (0, True)
    row = next(r for r in report["checks"] if r["subject"] == "event 4 GateDecision")
    assert row["check"] == "taken_as_recorded"


@pytest.mark.parametrize("kind", ["GateDecision", "PolicySnapshotRef"])
def test_a_bundle_the_ledger_does_not_hold_makes_the_run_unreplayable_in_production(
    auditor: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    event = (
        gate("deny", UNKNOWN_HASH)
        if kind == "GateDecision"
        else {"type": "PolicySnapshotRef", "policy_bundle_hash": UNKNOWN_HASH}
    )
    path = run_file(tmp_path, "unheld", auditor, body(event), "2 + 3 = 5")
    code, out, err = run(capsys, "ingest", path, "--json")
    assert (code, err) == (0, "")
    recorded = orjson.loads(out)
    assert recorded["replayable"] is False
    assert recorded["missing_artifacts"] == [
        {
            "event_type": kind,
            "missing": ["policy_bundle"],
            "reason": "the ledger holds no policy bundle with this hash",
            "sequence_index": 4,
            "step": f"policy bundle {UNKNOWN_HASH}",
        }
    ]
    code, _, err = run(capsys, "replay", "unheld", "--mode", "production")
    assert code == 1
    assert_failure_line(
        err,
        "MISSING_SNAPSHOT",
        f"policy bundle {UNKNOWN_HASH} (event 4 {kind}): the ledger holds no policy bundle with"
        " this hash",
    )
    code, out, _ = run(capsys, "replay", "unheld", "--json")
    audited = orjson.loads(out)
    assert (code, audited["ok"], audited["authoritative"]) == (0, True, False)
    assert ("event 4 " + kind, "missing") in [(r["subject"], r["check"]) for r in audited["checks"]]


def test_a_held_policy_reference_is_checked_against_the_ledger(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    event = {"type": "PolicySnapshotRef", "policy_bundle_hash": DENIED_HASH}
    path = run_file(tmp_path, "referenced", auditor, body(event), "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "referenced")
    assert (code, report["reproduced"], report["authoritative"]) == (0, True, True)
    row = next(r for r in report["checks"] if r["subject"] == "event 4 PolicySnapshotRef")
    assert (row["check"], row["detail"]) == (
        "hash_compared",
        f"policy bundle {DENIED_HASH} is held by the ledger",
    )


def test_what_a_policy_reference_says_besides_its_bundle_is_taken_as_recorded(
    cli_env: Settings,
    auditor: dict[str, str],
    tmp_path: Path,
) -> None:
    # Nothing here holds the outside system's snapshot id or address: the row says so.
    event = {
        "type": "PolicySnapshotRef",
        "policy_bundle_hash": DENIED_HASH,
        "snapshot_id": "0" * 64,
        "uri": "s3://nowhere/policy",
    }
    path = run_file(tmp_path, "addressed", auditor, body(event), "2 + 3 = 5")
    code, report = ingest_and_replay(cli_env, path, "addressed")
    assert code == 0
    row = next(r for r in report["checks"] if r["subject"] == "event 4 PolicySnapshotRef")
    assert row["detail"] == (
        f"policy bundle {DENIED_HASH} is held by the ledger; snapshot_id and uri taken as recorded"
    )
