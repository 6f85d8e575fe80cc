"""A value the privacy policy refuses is never stored in clear, and its job still replays.

"remember my password is hunter2" is refused (seed 004 F5). The job records the value only as a
refusal mark (its attribute and a digest keyed by the signing key) wherever it would appear, the
job input included; production replay reproduces the job, authoritatively. Each test runs on
SQLite and PostgreSQL; the raw events table is searched byte by byte.
"""

from __future__ import annotations

import pytest
from support.api_support import Api
from support.ledger_fixtures import RawTable, store_of

from domain.determinism import derive_id
from domain.governance import Actor
from domain.job import CaptureMode, Job
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
from domain.stage0.config import DEFAULT_ROUTER
from domain.stage0.refusals import MARK, RefusedValue
from domain.stage0.replies import F5_SEM_WRITE_FAILURE
from infrastructure.application.ledger import Ledger

SECRET = "hunter2"
ADMIN_AUDITOR = Actor.of("ana", ["admin", "auditor"])


def test_a_refused_value_is_stored_nowhere_only_its_mark(
    ledger: Ledger, raw_table: RawTable
) -> None:
    assert SECRET.encode() not in raw_table.every_byte()
    log = ledger.jobs.run(f"remember my password is {SECRET}", "s1")
    mark = ledger.jobs.refusal_mark(RefusedValue("password", SECRET))
    assert MARK.fullmatch(mark) and mark.startswith("[refused:password:hmac-sha256:k1:")

    stored = raw_table.every_byte()
    assert SECRET.encode() not in stored
    assert mark.encode() in stored
    assert log.job_input == f"remember my password is {mark}"
    # The derived id is of the input as recorded: HMAC(seed, input) would give the value away.
    assert log.job_id == derive_id("s1", "job", log.job_input, 0)
    assert log.completion is not None
    assert log.completion.final_output == F5_SEM_WRITE_FAILURE
    (write,) = log.as_json()["iteration_trace"][0]["sem_writes"]
    assert (write["status"], write["value"]) == ("failed", mark)
    assert "'password'" in write["reason"]
    assert SECRET not in str(ledger.jobs.stream(log.job_id))


def test_a_job_with_a_refused_value_replays_in_production_authoritatively(
    ledger: Ledger,
) -> None:
    text = f"Remember that my password is {SECRET}."
    job_id = ledger.jobs.run(text, "s1", user="alice", capture_mode=CaptureMode.FULL_IO).job_id
    result = ledger.replays.run(job_id, ReplayMode.PRODUCTION, ADMIN_AUDITOR)
    report = result.report
    assert (report["ok"], report["error_code"], report["authoritative"]) == (True, None, True)
    assert report["divergences"] == []


def test_the_same_refused_input_gives_the_same_job_bytes(
    ledger: Ledger, raw_table: RawTable
) -> None:
    first = ledger.jobs.run(f"remember my pin is {SECRET}", "s1", job_id="a")
    second = ledger.jobs.run(f"remember my pin is {SECRET}", "s1", job_id="b")
    assert first.job_input == second.job_input
    assert [e["payload"] for e in ledger.jobs.stream("a")][1:-2] == [
        e["payload"] for e in ledger.jobs.stream("b")
    ][1:-2]
    assert raw_table.rows(Job.id_for("a"))


def test_a_refusal_that_masking_would_change_is_refused_with_nothing_written(
    ledger: Ledger,
) -> None:
    """A router that routes on the mark itself: the masked job would not decide the same."""
    rules = [
        {"rule_id": "R0", "pattern": r"\[refused:", "agent": "generic_agent", "why": "mark"},
        *DEFAULT_ROUTER.model_dump()["rules"],
    ]
    router, _ = ledger.snapshots.put(Snapshot.declare("router", {"rules": rules}))
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ValueError, match=r"cannot be kept out of the record") as refused:
        ledger.jobs.run(
            f"remember my password is {SECRET}", "s1", snapshot_ids={"router": router.snapshot_id}
        )
    assert "['password']" in str(refused.value)
    assert SECRET not in str(refused.value)
    assert store_of(ledger).recorder.max_notification_id() == before


def test_over_http_the_refused_value_is_answered_as_its_mark_and_replays(
    api: Api, raw_table: RawTable
) -> None:
    body = {"input": f"remember my ssn is {SECRET}", "seed": 7, "capture_mode": "full_io"}
    response = api.post("/v1/jobs", body)
    assert response.status_code == 201, response.content
    assert SECRET.encode() not in response.content
    assert response.json()["input"].startswith("remember my ssn is [refused:ssn:hmac-sha256:k1:")
    assert SECRET.encode() not in raw_table.every_byte()
    replay = api.replay(response.json()["job_id"], "production", "admin_auditor").json()
    assert (replay["ok"], replay["authoritative"], replay["error"]) == (True, True, None)
