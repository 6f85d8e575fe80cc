"""The one retry policy for store writes: backoff with jitter, within attempts and seconds.

A write that lost a race used to be made again at once (five times, then STORE_BUSY; later
without end). Each loss now pauses a random fraction of a cap that doubles up to a ceiling, and a
write that keeps losing past the budget is STORE_BUSY in one line naming what it contended for.
No test here waits: the pauses are recorded, the clock is given.
"""

from __future__ import annotations

import pytest

from domain.errors import StoreBusyError
from infrastructure.application.errors import failure_of
from infrastructure.storage.write_retries import WRITE_RETRIES, Retries, RetryPolicy

POLICY = RetryPolicy(attempts=20, seconds=30.0, first_pause=0.002, longest_pause=0.1)


def _retries(
    policy: RetryPolicy, pauses: list[float], *, jitter: float = 1.0, elapsed: float = 0.0
) -> Retries:
    return Retries(
        policy,
        "SEM write to a/b/c/d",
        sleep=pauses.append,
        elapsed=lambda: elapsed,
        jitter=lambda: jitter,
    )


@pytest.mark.parametrize("jitter", [1.0, 0.25, 0.0])
def test_each_pause_is_a_random_fraction_of_a_cap_that_doubles_up_to_its_ceiling(
    jitter: float,
) -> None:
    pauses: list[float] = []
    retries = _retries(POLICY, pauses, jitter=jitter)
    for _ in range(9):
        retries.lost()
    caps = [0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.1, 0.1, 0.1]
    assert pauses == pytest.approx([cap * jitter for cap in caps])


def test_the_last_attempt_the_budget_allows_that_loses_is_store_busy_naming_what() -> None:
    pauses: list[float] = []
    retries = _retries(RetryPolicy(attempts=3, seconds=30.0), pauses, elapsed=0.04)
    retries.lost()
    retries.lost()
    with pytest.raises(StoreBusyError) as raised:
        retries.lost()
    assert len(pauses) == 2  # two pauses between three attempts; none after the last
    message = (
        "SEM write to a/b/c/d: other writers kept it contended for 3 attempts in 0.0 s; try again"
    )
    failure = failure_of(raised.value)
    assert failure is not None
    assert (failure.code, failure.message, failure.status, failure.exit_code) == (
        "STORE_BUSY",
        message,
        503,
        1,
    )


def test_a_pause_that_would_end_past_the_time_budget_is_not_taken() -> None:
    pauses: list[float] = []
    retries = _retries(POLICY, pauses, elapsed=29.99)  # 0.01 s left: the first pause fits
    retries.lost()
    retries.lost()  # 0.004 s
    retries.lost()  # 0.008 s: still inside
    with pytest.raises(StoreBusyError, match=r"contended for 4 attempts in 30\.0 s; try again$"):
        retries.lost()  # 0.016 s would end past 30 s
    assert pauses == pytest.approx([0.002, 0.004, 0.008])


def test_the_ledger_policy_outlasts_eight_writers_on_one_record() -> None:
    # Each loss follows another writer's success: eight writers of ten writes each make 80
    # successes in all, so no write can lose more often than that, far inside the budget.
    assert WRITE_RETRIES.attempts > 8 * 10
    # Even then its pauses (each at most the ceiling) leave most of the time budget for the work.
    assert WRITE_RETRIES.attempts * WRITE_RETRIES.longest_pause < WRITE_RETRIES.seconds
