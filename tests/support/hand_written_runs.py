"""Run files written by hand from Run Event Schema v1, for tests that must not trust the recorder.

`math_iteration` is what the Stage-0 runtime does when the math agent answers an expression under
the default snapshots, line by line. Only the BrainState in a trace is folded by the BrainState
reducer (its own golden tests pin it): it holds seeded jitter no one would work out by hand.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from domain.canonical import canonical_json
from domain.events import INGEST_LINE, MaterialisedState, RunEvent, hash_of
from domain.governance import Actor
from domain.replay_access import ReplayMode
from domain.run_file import parse_run
from domain.snapshot import SnapshotKind
from domain.stage0.config import BrainStateConfig, parse_config
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.storage.settings import Settings
from projections.brainstate import fold_brainstate

SEED = "two-steps"
USER = "default"
R1 = {"agent": "math_agent", "fallback": None, "rule_id": "R1", "why": "matched_R1_math"}
ANA = Actor.of("ana", ["admin", "auditor"])
"""The caller: the CLI's once `as_auditor` made it so, the use cases' in `ingest_and_replay`."""
R4 = {"agent": "generic_agent", "fallback": None, "rule_id": "R4", "why": "matched_R4_fallback"}


def math_iteration(
    iteration: int, expression: str, value: int, *, response_kept: bool = True
) -> list[dict[str, Any]]:
    """One iteration of the math agent answering ``expression``: its events and its trace.

    ``response_kept=False``: the agent's response kept as its hash only, as capture modes
    ``prompts_only`` and ``none`` keep it.
    """
    prompt = {"after_failure": False, "text": expression, "user": USER}
    answer = f"{expression} = {value}"
    claims = [{"expression": expression, "value": value}]
    evidence = [{"agent": "math_agent", "kind": "computation"}]
    response = {"claims": claims, "evidence": evidence, "text": answer}
    output = {
        "agent": "math_agent",
        "status": "ok",
        "prompt": prompt,
        "response": response if response_kept else None,
        "request_hash": hash_of(prompt),
        "response_hash": hash_of(response),
        "error": None,
    }
    return [
        {"type": "InputReceived", "iteration": iteration, "text": expression, "user": USER},
        {"type": "RouterDecision", "iteration": iteration, **R1},
        {"type": "AgentOutput", "iteration": iteration, **output},
        {
            "type": "IterationTrace",
            "iteration": iteration,
            "router_decision": R1,
            "selected_agents": ["math_agent"],
            "agent_outputs": [output],
            "sem_reads": [],
            "sem_writes": [],
            "final_output": answer,
            "claims": claims,
            "evidence_items": evidence,
        },
    ]


def with_brainstates(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each trace given the BrainState before its iteration and after its last event."""
    config = parse_config(
        SnapshotKind.BRAINSTATE, default_snapshots()[SnapshotKind.BRAINSTATE].payload
    )
    assert isinstance(config, BrainStateConfig)
    done: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    for line in lines:
        if line["type"] == "InputReceived":
            before = state(config, done)
        brainstates = {"brainstate_before": before, "brainstate_after": state(config, done)}
        done.append({**line, **brainstates} if line["type"] == "IterationTrace" else line)
    return done


def state(config: BrainStateConfig, lines: list[dict[str, Any]]) -> dict[str, Any]:
    events: list[RunEvent] = [INGEST_LINE.validate_python(line) for line in lines]
    return MaterialisedState.of(fold_brainstate(config, events, SEED)).model_dump()


def run_file(
    tmp_path: Path,
    job_id: str,
    snapshot_ids: dict[str, str],
    body: list[dict[str, Any]],
    final_output: str,
    capture_mode: str = "full_io",
) -> str:
    """The run written to ``tmp_path/<job_id>.jsonl``, its path."""
    started = {
        "type": "RunStarted",
        "job_id": job_id,
        "seed": SEED,
        "input": "2 + 3",
        "snapshot_ids": snapshot_ids,
        "capture_mode": capture_mode,
    }
    lines = [
        started,
        *body,
        {"type": "RunCompleted", "final_output": final_output},
    ]
    path = tmp_path / f"{job_id}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return str(path)


def as_auditor(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Make the CLI's caller `ANA`, an admin and auditor; the default snapshots' ids, stored."""
    monkeypatch.setenv("MACE_ACTOR", ANA.actor_id)
    monkeypatch.setenv("MACE_ROLES", ",".join(sorted(ANA.roles)))
    with Ledger.open(settings) as ledger:
        return ledger.snapshots.default_ids()


@pytest.fixture
def auditor(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """`as_auditor` as a fixture: the caller an admin and auditor, the default snapshots' ids."""
    return as_auditor(cli_env, monkeypatch)


def ingest_and_replay(
    settings: Settings, path: str, job_id: str, mode: str = "production"
) -> tuple[int, dict[str, Any]]:
    """The run file recorded as ``mace ingest`` records it, then replayed as ``mace replay
    --json`` replays it, as `ANA`, through the use cases the two commands call, in one ledger
    that checkpoints as it closes: the exit code the command gives (0 for an ok outcome, else
    1) and the report, as its canonical JSON reads back."""
    run = parse_run(Path(path).read_bytes().split(b"\n"))
    with Ledger.open(settings) as ledger:
        ledger.run_imports.record_once(run)
        result = ledger.replays.run(job_id, ReplayMode(mode), ANA)
    report: dict[str, Any] = orjson.loads(canonical_json(result.report))
    return (0 if result.outcome.ok else 1), report
