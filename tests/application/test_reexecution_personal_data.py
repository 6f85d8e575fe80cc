"""Re-executing a job hands its recorded content (model responses, tool results, retrieval hits)
to the agent's code, unredacted: the code needs the real answers to ask what it asked. So a job
holding personal data (a store written before the rules refused it) is re-executed by an admin
only, whose read is first logged in the tenant's personal data access log, as an admin's read of
its events is; any other role is refused (``ACCESS_DENIED``, recorded, quoting no personal data)
before any of it is handed over, in process and over HTTP. Both stores."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from support.api_support import Api, assert_error, checked_client
from support.canaries import CANARIES, found, run_lines

from domain.errors import MaceError
from domain.governance import Actor
from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger
from infrastructure.application.replay_harness import replay_harness
from infrastructure.storage.settings import Settings

pytestmark = pytest.mark.storage


def before_the_rules(ledger: Ledger, tenant: str) -> str:
    """A run holding personal data in every field kind, as a store written before the rules
    holds it (the use case the ways in share, below their checks); its job id."""
    parsed = parse_run(orjson.dumps(line) for line in run_lines())
    job_id = ledger.runs.record(parsed.started, parsed.events, parsed.completed, tenant).job_id
    ledger.checkpoints.write()  # as every CLI write and the service's notary leave the store
    return job_id


def governance_results(ledger: Ledger, job_id: str, tenant: str) -> list[dict[str, object]]:
    log = ledger.governance.log(job_id, tenant=tenant)
    return [entry for entry in log if entry["event"] == "REPLAY_RESULT"]


def test_a_non_admin_is_refused_before_any_personal_data_is_handed_over(ledger: Ledger) -> None:
    job_id = before_the_rules(ledger, "default")
    for roles in (["operator"], ["auditor"], ["operator", "auditor"]):
        actor = Actor.of("olga", roles)
        with pytest.raises(MaceError) as refused, replay_harness(ledger.recordings, job_id, actor):
            pytest.fail("the code ran")
        assert refused.value.code == "ACCESS_DENIED"
        assert "personal data" in refused.value.message and "admin" in refused.value.message
        assert found(str(refused.value)) == {}
    results = governance_results(ledger, job_id, "default")
    assert [r["error_code"] for r in results] == ["ACCESS_DENIED"] * 3
    assert found(orjson.dumps(results)) == {}
    assert ledger.personal_data.accesses("default") == []


def test_an_admin_re_executes_it_and_the_read_is_logged_first(ledger: Ledger) -> None:
    job_id = before_the_rules(ledger, "default")
    with replay_harness(ledger.recordings, job_id, Actor.of("ana", ["admin"])) as h:
        # Logged before the code is given anything.
        [access] = ledger.personal_data.accesses("default")
        assert (access["actor"]["actor_id"], access["job_id"], access["channel"]) == (
            "ana",
            job_id,
            "reexecution",
        )
        assert set(found(orjson.dumps([e.payload() for _, e in h.recording.events]))) == set(
            CANARIES
        )


@pytest.fixture
def served(settings: Settings, ledger: Ledger) -> Iterator[Api]:
    with checked_client(settings, ledger, lambda: 1_000_000.0) as client:
        yield Api(client, ledger)


def test_over_http_a_non_admin_token_is_refused_and_sees_no_personal_data(served: Api) -> None:
    job_id = before_the_rules(served.ledger, "acme")
    answer = served.post("/v1/reexecutions", {"job_id": job_id}, "operator")
    assert_error(answer, 403, "ACCESS_DENIED")
    assert found(answer.content) == {}
    assert found(orjson.dumps(served.governance(job_id))) == {}
    opened = served.post("/v1/reexecutions", {"job_id": job_id}, "admin_auditor")
    assert opened.status_code == 201, opened.content
    [access] = served.ledger.personal_data.accesses("acme")
    assert access["channel"] == "reexecution"
