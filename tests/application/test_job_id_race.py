"""Jobs recorded without a job id by several writers at once, on SQLite and PostgreSQL.

A derived job id (seed 004 D3) counts the tenant's jobs of the same seed and input before it, so
writers recording the same job at once derive the same id: the hardest case, every writer racing
for every id. The one that commits second lost a race it could not see (testers once saw 12 of 80
409 answers from two `mace serve` processes). It counts on and retries, and only after every
retry lost does it answer STORE_BUSY. No client sees a conflict it did not cause, and every job
is stored once.

Each writer is a thread with its own `Ledger` (its own connections and its own in-process job
lock), as two service processes are: nothing but the store orders them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext

import pytest
from support.api_support import auth, checked_client
from support.ledger_fixtures import store_of
from support.sample_job import job_ids

from domain.errors import ConflictError, StoreBusyError
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

WRITERS = 4
JOBS_EACH = 5


Recorder = Callable[[int], str]
"""Records a writer's n-th job and answers its id."""


def _race(
    settings: Settings, writer_on: Callable[[Ledger], AbstractContextManager[Recorder]]
) -> list[str]:
    """Every writer records its jobs at once, each on its own ledger; the job ids, in no order.

    A writer told STORE_BUSY asks again, as a client would; a conflict fails the test. The
    ledgers are opened one after another first: only the recording is raced here.
    """
    start = threading.Barrier(WRITERS)
    recorded: list[str] = []
    failures: list[BaseException] = []
    guard = threading.Lock()

    def writer(record: Recorder) -> None:
        try:
            start.wait()
            for n in range(JOBS_EACH):
                while True:
                    try:
                        job_id = record(n)
                        break
                    except StoreBusyError:
                        continue
                with guard:
                    recorded.append(job_id)
        except BaseException as exc:  # reported below, in the test's thread
            start.abort()  # no writer waits for one that failed
            with guard:
                failures.append(exc)

    with ExitStack() as stack:
        recorders = [
            stack.enter_context(writer_on(stack.enter_context(Ledger.open(settings))))
            for _ in range(WRITERS)
        ]
        threads = [threading.Thread(target=writer, args=(r,)) for r in recorders]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    conflicts = [f for f in failures if isinstance(f, ConflictError)]
    assert not conflicts, f"{len(conflicts)} writer(s) saw a conflict: {conflicts[0]}"
    assert not failures, failures
    return recorded


def _stored_once(ledger: Ledger, recorded: list[str], tenant: str = "default") -> None:
    assert len(recorded) == WRITERS * JOBS_EACH
    assert len(set(recorded)) == len(recorded)
    assert sorted(job_ids(ledger, tenant)) == sorted(recorded)
    summary = store_of(ledger).verify_all()
    assert (summary.jobs, summary.sealed_jobs) == (len(recorded), len(recorded))


def test_stage0_jobs_without_an_id_from_several_writers_never_conflict(
    settings: Settings, ledger: Ledger
) -> None:
    # The same input and seed everywhere: every writer derives the same ids, in the same order.
    recorded = _race(
        settings, lambda writer: nullcontext(lambda _n: writer.jobs.run("2 + 3", "s1").job_id)
    )
    _stored_once(ledger, recorded)


def test_http_jobs_without_an_id_from_several_services_never_answer_409(
    settings: Settings, ledger: Ledger
) -> None:
    """`POST /v1/jobs` without ``job_id`` through the real app: one service per writer."""

    @contextmanager
    def service(writer: Ledger) -> Iterator[Recorder]:
        with checked_client(settings, writer) as client:

            def post(_n: int) -> str:
                answer = client.post(
                    "/v1/jobs", json={"input": "2 + 3", "seed": 1}, headers=auth("operator")
                )
                if answer.status_code == 503:
                    assert answer.json()["error"]["code"] == "STORE_BUSY"
                    raise StoreBusyError(answer.text)
                if answer.status_code == 409:
                    raise ConflictError(answer.text)
                assert answer.status_code == 201, answer.content
                job_id = answer.json()["job_id"]
                assert isinstance(job_id, str)
                return job_id

            yield post

    recorded = _race(settings, service)
    _stored_once(ledger, recorded, tenant="acme")


def test_a_named_id_that_exists_is_still_a_conflict(ledger: Ledger) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="named")
    before = store_of(ledger).recorder.max_notification_id()
    with pytest.raises(ConflictError, match="job named already exists"):
        ledger.jobs.run("2 + 3", "s1", job_id="named")
    assert store_of(ledger).recorder.max_notification_id() == before
