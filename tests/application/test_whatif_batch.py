"""What-if over a batch of recorded jobs (issue 31 point 3), on SQLite and PostgreSQL, through
the use case (`ledger.whatif_batches.run`) on stores left checkpointed as every CLI write leaves
them: every selected job re-run under a change through the one-job what-if, each changed job's
first change exact, totals, expected changes that do not fail, and one record for the batch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from support.hand_written_runs import ANA, R1, R4
from support.ledger_fixtures import RawTable, store_of

from domain.errors import InvalidInput, MaceError
from domain.governance import Actor
from domain.job import Job
from domain.snapshot import Snapshot, SnapshotKind
from domain.whatif import changes_of
from domain.whatif_batch import ExpectedChange, parse_expectations, parse_job_list
from domain.whatif_record import CounterfactualRecord
from infrastructure.application.audit_workers import AuditWorkers
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import LedgerReplaySource
from infrastructure.application.snapshots import default_snapshots
from infrastructure.application.whatif_batch import BatchResult, BatchSelection
from infrastructure.storage.settings import Settings

ADDITION_ONLY = r"^\s*\d+\s*[+]\s*\d+\s*$"
JOBS = {"sum": "2 + 3", "product": "4 * 5", "hello": "hello there"}
"""Under the addition-only router only the product routes differently (the math agent's rule no
longer matches it, the fallback's does); the sum stays the math agent's, the greeting the
fallback's."""
PRODUCT_FIRST_CHANGE = {
    "code": "REPLAY_DIVERGENCE",
    "iteration": 0,
    "field": "router_decision",
    "recorded": R1,
    "replayed": R4,
}


def addition_only_router(settings: Settings) -> str:
    payload: dict[str, Any] = default_snapshots()[SnapshotKind.ROUTER].payload
    rules = [
        {**rule, "pattern": ADDITION_ONLY} if rule["rule_id"] == "R1" else rule
        for rule in payload["rules"]
    ]
    with Ledger.open(settings) as ledger:
        return ledger.snapshots.put(Snapshot.declare("router", {"rules": rules}))[0].snapshot_id


def record_jobs(settings: Settings, jobs: dict[str, str], tenant: str = "default") -> int:
    """The jobs run and recorded (each store write checkpointed on close); the log's head."""
    with Ledger.open(settings) as ledger:
        for job_id, text in jobs.items():
            ledger.jobs.run(text, "s1", job_id=job_id, tenant=tenant)
    with Ledger.open(settings) as ledger:
        return store_of(ledger).recorder.max_notification_id() or 0


def batch(
    settings: Settings,
    router: str,
    selection: BatchSelection | None = None,
    expected: frozenset[ExpectedChange] = frozenset(),
    actor: Actor = ANA,
    progress: Callable[[int, int], None] | None = None,
) -> BatchResult:
    with Ledger.open(settings) as ledger:
        changes = changes_of([("router", router)])
        chosen = selection or BatchSelection()
        return ledger.whatif_batches.run(chosen, changes, actor, expected, progress)


def rows_by_job(result: BatchResult) -> dict[str, dict[str, Any]]:
    return {row["job_id"]: row for row in result.report["jobs"]}


def counterfactual_rows(settings: Settings) -> list[tuple[Any, ...]]:
    return RawTable(settings).execute(
        "SELECT originator_id FROM {table} WHERE topic LIKE %s", ("%CounterfactualRecord%",)
    )


def test_a_batch_names_each_changed_job_at_its_first_change_and_records_once(
    cli_env: Settings,
) -> None:
    record_jobs(cli_env, JOBS)
    before = {job_id: RawTable(cli_env).rows(Job.id_for(job_id)) for job_id in JOBS}
    router = addition_only_router(cli_env)
    result = batch(cli_env, router)
    report = result.report
    assert (report["verdict"], result.passed, report["authoritative"]) == ("changed", False, False)
    assert report["totals"] == {
        "jobs": 3,
        "unchanged": 2,
        "changed": 1,
        "unexpected": 1,
        "failed": 0,
        "open": 0,
    }
    rows = rows_by_job(result)
    assert list(rows) == ["sum", "product", "hello"]  # the log's order
    assert rows["product"]["first_change"] == {**PRODUCT_FIRST_CHANGE, "expected": False}
    assert (rows["sum"]["verdict"], rows["sum"]["first_change"]) == ("unchanged", None)
    assert (rows["hello"]["verdict"], rows["hello"]["first_change"]) == ("unchanged", None)
    assert report["first_change"] == {"job_id": "product", **rows["product"]["first_change"]}
    # One signed record for the batch, none per job; the jobs untouched, byte for byte.
    assert len(counterfactual_rows(cli_env)) == 1
    with Ledger.open(cli_env) as ledger:
        record = ledger.whatif.get(result.record_id)
    assert isinstance(record, CounterfactualRecord)
    assert (record.kind, record.kind_version, record.authoritative) == ("whatif_batch", 1, False)
    assert (record.outcome, record.totals, record.actor_id) == ("changed", report["totals"], "ana")
    assert record.parameters["changes"] == {"router": router}
    assert record.parameters["selection"]["since"] == 0
    assert record.report["jobs"] == report["jobs"]
    assert {job_id: RawTable(cli_env).rows(Job.id_for(job_id)) for job_id in JOBS} == before


def test_expected_changes_pass_and_expectations_not_met_are_said(cli_env: Settings) -> None:
    record_jobs(cli_env, JOBS)
    router = addition_only_router(cli_env)
    expected = frozenset(
        {ExpectedChange("product", "router_decision"), ExpectedChange("sum", "router_decision")}
    )
    result = batch(cli_env, router, expected=expected)
    report = result.report
    assert (report["verdict"], result.passed) == ("expected", True)
    assert report["totals"]["unexpected"] == 0
    assert rows_by_job(result)["product"]["first_change"]["expected"] is True
    assert report["expected_not_seen"] == [{"job_id": "sum", "field": "router_decision"}]
    # An expectation on another field than the one the job changes first does not cover it.
    elsewhere = frozenset({ExpectedChange("product", "final_answer")})
    assert batch(cli_env, router, expected=elsewhere).report["verdict"] == "changed"


def test_an_equivalent_router_changes_nothing(cli_env: Settings) -> None:
    record_jobs(cli_env, JOBS)
    payload = default_snapshots()[SnapshotKind.ROUTER].payload
    with Ledger.open(cli_env) as ledger:
        copy = Snapshot.declare("router", payload, seed_namespace="router-copy")
        same = ledger.snapshots.put(copy)[0].snapshot_id
    told: list[tuple[int, int]] = []
    result = batch(cli_env, same, progress=lambda done, total: told.append((done, total)))
    assert (result.report["verdict"], result.passed) == ("unchanged", True)
    assert told == [(1, 3), (2, 3), (3, 3)]
    assert result.report["totals"]["unchanged"] == 3
    assert result.report["first_change"] is None


def test_the_window_and_the_tenant_select_the_jobs(cli_env: Settings) -> None:
    head = record_jobs(cli_env, {"sum": "2 + 3"})
    record_jobs(cli_env, {"product": "4 * 5"})
    record_jobs(cli_env, {"product": "4 * 5", "sum": "2 + 3"}, tenant="acme")
    router = addition_only_router(cli_env)

    after_first = batch(cli_env, router, BatchSelection(since=head))
    assert [(r["tenant"], r["job_id"]) for r in after_first.report["jobs"]] == [
        ("default", "product"),
        ("acme", "product"),
        ("acme", "sum"),
    ]
    acme = batch(cli_env, router, BatchSelection(tenant="acme"))
    assert [r["job_id"] for r in acme.report["jobs"]] == ["product", "sum"]
    assert rows_by_job(acme)["product"]["first_change"] == {
        **PRODUCT_FIRST_CHANGE,
        "expected": False,
    }
    first_only = batch(cli_env, router, BatchSelection(tenant="default", until=head))
    assert [r["job_id"] for r in first_only.report["jobs"]] == ["sum"]
    assert first_only.report["selection"] == {
        "tenant": "default",
        "since": 0,
        "until": head,
        "jobs": None,
    }


def test_jobs_named_by_list_and_one_not_held_fails_the_batch(cli_env: Settings) -> None:
    record_jobs(cli_env, JOBS)
    record_jobs(cli_env, {"elsewhere": "4 * 5"}, tenant="acme")
    router = addition_only_router(cli_env)
    named = BatchSelection(jobs=("product", "elsewhere", "sum"))
    result = batch(cli_env, router, named)
    rows = rows_by_job(result)
    assert (result.report["verdict"], result.passed) == ("failed", False)
    assert result.report["totals"]["failed"] == 1
    # Another tenant's job behaves exactly like a free id.
    assert rows["elsewhere"]["error"]["code"] == "NOT_FOUND"
    assert rows["product"]["first_change"] == {**PRODUCT_FIRST_CHANGE, "expected": False}
    assert rows["sum"]["verdict"] == "unchanged"


def test_a_job_still_being_recorded_is_skipped_not_failed(cli_env: Settings) -> None:
    record_jobs(cli_env, JOBS)
    router = addition_only_router(cli_env)
    with Ledger.open(cli_env) as ledger:
        ledger.jobs.start("recording", "s1", "4 * 5", ledger.snapshots.default_ids())
    result = batch(
        cli_env, router, expected=frozenset({ExpectedChange("product", "router_decision")})
    )
    rows = rows_by_job(result)
    assert rows["recording"]["verdict"] == "open"
    assert (result.report["totals"]["open"], result.report["totals"]["failed"]) == (1, 0)
    assert (result.report["verdict"], result.passed) == ("expected", True)


def test_a_tampered_job_fails_alone_and_is_named(cli_env: Settings) -> None:
    record_jobs(cli_env, JOBS)
    router = addition_only_router(cli_env)
    raw = RawTable(cli_env)
    stream = Job.id_for("hello")
    state = raw.state(stream, 2)
    raw.set_column(stream, 2, "state", state[:-2] + bytes([state[-2] ^ 1]) + state[-1:])
    rows = rows_by_job(batch(cli_env, router))
    assert rows["hello"]["verdict"] == "failed"
    assert rows["hello"]["error"]["code"] == "INTEGRITY_FAILURE"
    assert rows["product"]["first_change"] == {**PRODUCT_FIRST_CHANGE, "expected": False}


def test_an_actor_without_a_replay_role_is_refused_and_nothing_is_written(
    cli_env: Settings,
) -> None:
    record_jobs(cli_env, JOBS)
    router = addition_only_router(cli_env)
    with pytest.raises(MaceError) as refused:
        batch(cli_env, router, actor=Actor.of("eve", ["council"]))
    assert refused.value.code == "ACCESS_DENIED"
    assert counterfactual_rows(cli_env) == []


@pytest.mark.parametrize(
    ("parse", "raw", "message"),
    [
        (parse_job_list, b"", "jobs.txt names no job: expected one job id a line"),
        (parse_job_list, b"sum\n\nbad id!\n", "jobs.txt line 3: "),
        (parse_job_list, b"sum\nsum\n", "jobs.txt line 2: job 'sum' is named twice"),
        (parse_job_list, b"\xff", "jobs.txt is not UTF-8 text"),
        (
            parse_expectations,
            b'{"job_id": "a"}\n',
            'jobs.txt line 1: expected {"job_id": ID, "field": FIELD}',
        ),
        (parse_expectations, b'[{"job_id": "a", "field": 3}]', "jobs.txt entry 0: expected"),
        (
            parse_expectations,
            b'{"job_id": "a", "field": "f"}\nnot json\n',
            "jobs.txt line 2: not JSON",
        ),
        (
            parse_expectations,
            b'{"job_id": "a", "field": "f", "extra": 1}',
            "jobs.txt line 1: expected",
        ),
        (parse_expectations, b'[{"job_id": "a b", "field": "f"}]', "jobs.txt entry 0: "),
    ],
)
def test_a_bad_job_list_or_expectation_file_is_one_line(
    parse: Callable[[str, bytes], object], raw: bytes, message: str
) -> None:
    with pytest.raises(InvalidInput) as bad:
        parse("jobs.txt", raw)
    assert str(bad.value).startswith(message)
    assert "\n" not in str(bad.value)


def test_expectations_read_as_json_lines_or_a_list() -> None:
    lines = b'{"job_id": "a", "field": "router_decision"}\n\n{"job_id": "b", "field": "x"}\n'
    listed = b'[{"job_id": "b", "field": "x"}, {"job_id": "a", "field": "router_decision"}]'
    expected = {ExpectedChange("a", "router_decision"), ExpectedChange("b", "x")}
    assert parse_expectations("e", lines) == parse_expectations("e", listed) == expected


@pytest.mark.parametrize(
    ("selection", "message"),
    [
        ({"since": 5, "until": 5}, "--until 5 must be after --since 5"),
        ({"jobs": ("a",), "since": 3}, "--jobs names the jobs itself"),
        ({"since": -1}, "--since must be at least 0"),
    ],
)
def test_a_bad_selection_is_one_line(selection: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput) as bad:
        BatchSelection(**selection)
    assert str(bad.value).startswith(message)


def test_each_snapshot_is_read_and_judged_once_for_the_whole_batch(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    record_jobs(cli_env, JOBS)
    router = addition_only_router(cli_env)
    reads: Counter[str] = Counter()
    read = LedgerReplaySource._snapshot

    def counted(source: LedgerReplaySource, snapshot_id: str) -> Snapshot:
        reads[snapshot_id] += 1
        return read(source, snapshot_id)

    monkeypatch.setattr(LedgerReplaySource, "_snapshot", counted)
    assert batch(cli_env, router).report["totals"]["jobs"] == len(JOBS)
    declared = {s.snapshot_id for s in default_snapshots().values()}
    # Three jobs, two replays each, the same declared snapshots and one named change: each read
    # once for the batch (three times each, once a job, when each job read its own).
    assert reads == Counter(declared | {router})


def test_two_workers_give_the_report_one_gives(cli_env: Settings) -> None:
    """The jobs split among two processes by stream id (`AuditWorkers`): the same rows in the
    same order, the same totals, each first change exact, a tampered job failing alone."""
    record_jobs(cli_env, {f"{name}-{n}": text for n in range(4) for name, text in JOBS.items()})
    record_jobs(cli_env, JOBS, tenant="acme")
    raw = RawTable(cli_env)
    stream = Job.id_for("hello-2")
    state = raw.state(stream, 2)
    raw.set_column(stream, 2, "state", state[:-2] + bytes([state[-2] ^ 1]) + state[-1:])
    router = addition_only_router(cli_env)
    changes = changes_of([("router", router)])
    reports = {}
    told: list[tuple[int, int]] = []
    for count in (1, 2):
        told.clear()
        with AuditWorkers(cli_env, count) as workers, Ledger.open(cli_env) as ledger:
            reports[count] = ledger.whatif_batches.report(
                BatchSelection(),
                changes,
                ANA,
                progress=lambda done, total: told.append((done, total)),
                workers=workers,
            )
        assert told[-1] == (15, 15)
    one, two = reports[1], reports[2]
    assert two == one
    assert one["totals"] == {
        "jobs": 15,
        "unchanged": 9,
        "changed": 5,
        "unexpected": 5,
        "failed": 1,
        "open": 0,
    }
    failed = [row for row in two["jobs"] if row["verdict"] == "failed"]
    assert [(row["job_id"], row["error"]["code"]) for row in failed] == [
        ("hello-2", "INTEGRITY_FAILURE")
    ]
    changed = {
        (r["tenant"], r["job_id"]): r["first_change"] for r in two["jobs"] if r["first_change"]
    }
    assert set(changed) == {("default", f"product-{n}") for n in range(4)} | {("acme", "product")}
    assert all(first == {**PRODUCT_FIRST_CHANGE, "expected": False} for first in changed.values())
