"""What-if replay of one job (issue 31 points 1 and 5), on SQLite and PostgreSQL, through the use
case (`ledger.whatif.run`) on stores left checkpointed as every CLI write leaves them: a job
re-run under another router, SelfRepresentation or policy bundle says whether each decision
stays the same and, where not, the first that changes, then the rest; a record that is not
intact says nothing; every what-if is recorded, never authoritative, and the job is untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.hand_written_runs import ANA, R1, R4, math_iteration, run_file, with_brainstates
from support.ledger_fixtures import RawTable
from support.policy_gates import (
    DENIED_HASH,
    NOTHING_DENIED,
    NOTHING_DENIED_HASH,
    SECRETS_DENIED,
    gate,
)

from domain.errors import ErrorCode, InvalidInput, MaceError, NotFoundError
from domain.events import hash_of
from domain.governance import Actor
from domain.job import Job
from domain.run_file import parse_run
from domain.snapshot import Snapshot, SnapshotKind
from domain.whatif import WhatIfChanges, changes_of, parse_with
from domain.whatif_record import CounterfactualRecord
from infrastructure.application.ledger import Ledger
from infrastructure.application.snapshots import default_snapshots
from infrastructure.application.whatif import WhatIfResult
from infrastructure.storage.settings import Settings

ADDITION_ONLY = r"^\s*\d+\s*[+]\s*\d+\s*$"


def router(math_pattern: str | None = None, namespace: str | None = None) -> Snapshot:
    """The default router, its math rule's pattern replaced (None: kept), declared under
    ``namespace`` (None: the default one)."""
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": math_pattern} if math_pattern and rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    return Snapshot.declare("router", {"rules": rules}, seed_namespace=namespace)


def stored(settings: Settings, snapshot: Snapshot) -> str:
    with Ledger.open(settings) as ledger:
        return ledger.snapshots.put(snapshot)[0].snapshot_id


def whatif(
    settings: Settings, job_id: str, tenant: str = "default", **changes: str
) -> WhatIfResult:
    with Ledger.open(settings) as ledger:
        return ledger.whatif.run(job_id, changes_of(changes.items()), ANA, tenant=tenant)


def stage0_job(settings: Settings, job_id: str = "sum", text: str = "2 + 3") -> None:
    with Ledger.open(settings) as ledger:
        ledger.jobs.run(text, "s1", job_id=job_id)


def ingested(settings: Settings, tmp_path: Path, job_id: str, body: list[dict[str, Any]]) -> None:
    """A hand-written outside run, ingested as ``mace ingest`` records it."""
    with Ledger.open(settings) as ledger:
        ids = ledger.snapshots.default_ids()
    final = next(e["final_output"] for e in reversed(body) if e["type"] == "IterationTrace")
    path = run_file(tmp_path, job_id, ids, with_brainstates(body), final)
    with Ledger.open(settings) as ledger:
        ledger.run_imports.record_once(parse_run(Path(path).read_bytes().split(b"\n")))


def job_rows(settings: Settings, job_id: str) -> list[tuple[int, str, bytes]]:
    return RawTable(settings).rows(Job.id_for(job_id))


def test_an_equivalent_router_changes_no_decision(cli_env: Settings) -> None:
    stage0_job(cli_env)
    before = job_rows(cli_env, "sum")
    same_rules = stored(cli_env, router(namespace="router-copy"))
    result = whatif(cli_env, "sum", router=same_rules)
    report = result.report
    assert (report["verdict"], report["error"], report["differences"]) == ("unchanged", None, [])
    assert report["authoritative"] is False
    assert report["totals"]["facts_redecided"] > 0
    assert report["replay"]["authoritative"] is False
    assert job_rows(cli_env, "sum") == before


def test_new_router_rules_change_the_route_first_at_the_known_iteration(
    cli_env: Settings, tmp_path: Path
) -> None:
    two = [*math_iteration(0, "2 + 3", 5), *math_iteration(1, "4 * 5", 20)]
    ingested(cli_env, tmp_path, "two-sums", two)
    before = job_rows(cli_env, "two-sums")
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    report = whatif(cli_env, "two-sums", router=addition_only).report
    assert report["verdict"] == "changed"
    assert report["first_change"] == {
        "code": "REPLAY_DIVERGENCE",
        "iteration": 1,
        "field": "router_decision",
        "recorded": R1,
        "replayed": R4,
    }
    fields = [(d["iteration"], d["field"]) for d in report["differences"]]
    # Then the rest: the iteration's other decisions, its events, the answer, the states.
    assert (1, "selected_agents") in fields
    assert (1, "final_output") in fields
    assert (None, "final_answer") in fields
    assert all(iteration != 0 for iteration, _ in fields)
    assert report["totals"]["iterations_changed"] == 1
    assert job_rows(cli_env, "two-sums") == before


def test_a_route_that_no_longer_reads_memory_changes_first_at_the_route(cli_env: Settings) -> None:
    """The differences come in the order the run met them: the routing, then the SEM read the
    old route's agent made and the new one does not, then the agents' outputs. A batch's
    ``--expect`` names a job's first change, so that must be the decision that changed."""
    with Ledger.open(cli_env) as ledger:
        ledger.sem.put("world/country/france/capital", "Paris")
    stage0_job(cli_env, "capital", "What is the capital of France?")
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    no_knowledge = [rule for rule in payload["rules"] if rule["agent"] != "knowledge_agent"]
    without = stored(cli_env, Snapshot.declare("router", {"rules": no_knowledge}))
    report = whatif(cli_env, "capital", router=without).report
    assert report["verdict"] == "changed"
    assert (report["first_change"]["iteration"], report["first_change"]["field"]) == (
        0,
        "router_decision",
    )
    fields = [d["field"] for d in report["differences"] if d["iteration"] == 0]
    read = "sem_read world/country/france/capital"
    assert fields.index("selected_agents") < fields.index(read) < fields.index("agent_outputs")
    sem_read = report["differences"][fields.index(read)]
    assert (sem_read["recorded"]["value"], sem_read["replayed"]) == ("Paris", None)


def test_a_selfrep_without_the_math_agent_routes_to_the_fallback(cli_env: Settings) -> None:
    stage0_job(cli_env)
    payload = default_snapshots()[SnapshotKind.SELFREP].payload
    agents = {**payload["agents"], "math_agent": {"status": "unavailable"}}
    selfrep = stored(cli_env, Snapshot.declare("selfrep", {**payload, "agents": agents}))
    report = whatif(cli_env, "sum", selfrep=selfrep).report
    first = report["first_change"]
    assert (report["verdict"], first["iteration"], first["field"]) == (
        "changed",
        0,
        "router_decision",
    )
    assert first["recorded"] == R1
    assert first["replayed"]["agent"] == "generic_agent"


def gated_run(settings: Settings, tmp_path: Path, tenant_of_notes: str) -> None:
    """A run whose gate SECRETS_DENIED (in force store-wide) denies; NOTHING_DENIED put in force
    for ``tenant_of_notes``."""
    with Ledger.open(settings) as ledger:
        ledger.policy.set_bundle(None, SECRETS_DENIED, ANA)
        ledger.policy.set_bundle(tenant_of_notes, NOTHING_DENIED, ANA)
    ingested(settings, tmp_path, "gated", [*math_iteration(0, "2 + 3", 5), gate("deny")])


def test_another_policy_bundle_decides_an_outside_gate_again(
    cli_env: Settings, tmp_path: Path
) -> None:
    gated_run(cli_env, tmp_path, "default")
    unchanged = whatif(cli_env, "gated", policy=DENIED_HASH).report
    assert unchanged["verdict"] == "unchanged"
    report = whatif(cli_env, "gated", policy=NOTHING_DENIED_HASH).report
    assert report["verdict"] == "changed"
    assert report["differences"] == [
        {
            "code": "REPLAY_DIVERGENCE",
            "iteration": None,
            "field": "event 4 GateDecision decision",
            "recorded": "deny",
            "replayed": "allow",
        }
    ]


def test_what_an_outside_run_vouches_for_is_said_not_redecided(
    cli_env: Settings, tmp_path: Path
) -> None:
    arguments = {"q": "capital of france"}
    call = {
        "type": "ToolCall",
        "call_id": "c1",
        "tool": "search",
        "tool_schema_hash": hash_of({"tool": "search"}),
        "arguments": arguments,
        "request_hash": hash_of(arguments),
    }
    result = {"type": "ToolResult", "call_id": "c1", "status": "ok", "result": {"hits": 1}}
    ingested(cli_env, tmp_path, "tooled", [*math_iteration(0, "2 + 3", 5), call, result])
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    report = whatif(cli_env, "tooled", router=addition_only).report
    assert report["verdict"] == "unchanged"
    subjects = {row["subject"]: row["check"] for row in report["not_redecided"]}
    assert subjects == {
        "event 4 ToolCall": "taken_as_recorded",
        "event 5 ToolResult": "taken_as_recorded",
    }
    assert "never an outside agent, model or tool" in report["not_redecided_why"]


def test_a_tampered_job_fails_closed_before_any_change(cli_env: Settings) -> None:
    stage0_job(cli_env)
    table = RawTable(cli_env)
    stream = Job.id_for("sum")
    state = table.state(stream, 2)
    table.set_column(stream, 2, "state", state.replace(b"2 + 3", b"2 + 4"))
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    report = whatif(cli_env, "sum", router=addition_only).report
    assert report["verdict"] == "failed"
    assert report["error"]["code"] == "INTEGRITY_FAILURE"
    assert report["differences"] == []


@pytest.mark.parametrize("which", ["free", "wrong kind"])
def test_a_named_snapshot_the_ledger_cannot_use_is_missing(cli_env: Settings, which: str) -> None:
    stage0_job(cli_env)
    with Ledger.open(cli_env) as ledger:
        selfrep = ledger.snapshots.default_ids()["selfrep"]
    named = "ab" * 32 if which == "free" else selfrep
    report = whatif(cli_env, "sum", router=named).report
    assert (report["verdict"], report["error"]["code"]) == ("failed", "MISSING_SNAPSHOT")
    assert named in report["error"]["message"]


def test_a_named_snapshot_halted_for_the_tenant_stops_the_what_if(cli_env: Settings) -> None:
    stage0_job(cli_env)
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    with Ledger.open(cli_env) as ledger:
        ledger.governance.halt_snapshot(addition_only, "key leak", ANA, "default")
    report = whatif(cli_env, "sum", router=addition_only).report
    assert (report["verdict"], report["error"]["code"]) == ("failed", "FORCE_HALT_REPLAY")
    # Another tenant's halt is not this tenant's: its what-if runs.
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.run("2 + 3", "s1", job_id="sum", tenant="acme")
    assert whatif(cli_env, "sum", "acme", router=addition_only).verdict == "unchanged"


def test_another_tenants_policy_bundle_behaves_like_a_free_one(
    cli_env: Settings, tmp_path: Path
) -> None:
    gated_run(cli_env, tmp_path, "acme")
    report = whatif(cli_env, "gated", policy=NOTHING_DENIED_HASH).report
    assert (report["verdict"], report["error"]["code"]) == ("failed", "MISSING_SNAPSHOT")
    assert "is not held for tenant 'default'" in report["error"]["message"]


def test_another_tenants_job_is_not_found_and_nothing_is_recorded(cli_env: Settings) -> None:
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.run("2 + 3", "s1", job_id="theirs", tenant="acme")
    same_rules = stored(cli_env, router(namespace="router-copy"))
    with pytest.raises(NotFoundError):
        whatif(cli_env, "theirs", router=same_rules)


def test_an_actor_without_a_replay_role_is_refused_before_anything(cli_env: Settings) -> None:
    stage0_job(cli_env)
    same_rules = stored(cli_env, router(namespace="router-copy"))
    with Ledger.open(cli_env) as ledger, pytest.raises(MaceError) as refused:
        ledger.whatif.run("sum", changes_of([("router", same_rules)]), Actor.of("eve", ["council"]))
    assert refused.value.code is ErrorCode.ACCESS_DENIED
    assert "a what-if needs one of the roles" in refused.value.message


def test_every_what_if_is_recorded_signed_and_never_authoritative(cli_env: Settings) -> None:
    stage0_job(cli_env)
    addition_only = stored(cli_env, router(ADDITION_ONLY))
    first = whatif(cli_env, "sum", router=addition_only)
    again = whatif(cli_env, "sum", router=addition_only)
    assert first.record_id != again.record_id  # the same what-if asked twice: two records
    with Ledger.open(cli_env) as ledger:
        record = ledger.whatif.get(first.record_id)
        with pytest.raises(NotFoundError):
            ledger.whatif.get(first.record_id, tenant="acme")
    assert isinstance(record, CounterfactualRecord)
    assert (record.kind, record.kind_version, record.authoritative) == ("whatif", 1, False)
    assert (record.actor_id, record.roles) == ("ana", ["admin", "auditor"])
    assert record.parameters == {"job_id": "sum", "changes": {"router": addition_only}}
    assert record.outcome == first.verdict == "unchanged"
    assert record.report == first.report
    # The job's replays are untouched: no request, no result, no governance record.
    with Ledger.open(cli_env) as ledger:
        assert ledger.governance.record("job:sum") is None


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["model=" + "ab" * 32], "unknown key 'model'"),
        (["router=xyz"], "expected a router snapshot id (64 lowercase hex characters)"),
        (["policy=" + "AB" * 32], "expected a policy bundle hash"),
        (["router=" + "ab" * 32, "router=" + "cd" * 32], "router is given twice"),
        (["router"], "expected KEY=ID"),
        ([], "nothing to change"),
    ],
)
def test_bad_with_options_are_one_line(options: list[str], expected: str) -> None:
    with pytest.raises(InvalidInput) as bad:
        parse_with(options)
    assert expected in str(bad.value)
    assert "\n" not in str(bad.value)


def test_changes_name_each_key_once_in_order() -> None:
    changes = parse_with(["selfrep=" + "cd" * 32, "policy=" + "ef" * 32, "router=" + "ab" * 32])
    assert changes == WhatIfChanges(
        {SnapshotKind.SELFREP: "cd" * 32, SnapshotKind.ROUTER: "ab" * 32}, "ef" * 32
    )
    assert list(changes.as_json()) == ["policy", "router", "selfrep"]
