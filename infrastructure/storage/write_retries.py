"""The one retry policy for store writes: exponential backoff with full jitter, within a budget.

A write that lost a race (another writer appended the version it tried, took the number it
wanted, applied the page it was applying) is made again from what the store now holds. Made again
at once, the losers meet the same winners in the same instant, and the race repeats for as long as
they keep arriving together: with five immediate retries, 10 to 18 of 80 writes by eight processes
to one SEM key or one tenant's memory log failed on PostgreSQL; retried at once without end,
nothing bounded how long a caller waited. So a loser pauses first: a random fraction of a cap
that doubles with every loss up to a ceiling ("full jitter"), which spreads the losers apart in
time. A budget of attempts and of seconds bounds the wait: past it the caller is answered
``STORE_BUSY``, naming what was contended.

Ops path only: the pause is drawn from an unseeded generator and timed by the monotonic ops
clock, and neither reaches a decision. What a retried write decides is decided again from what
the store holds, whatever the pause was, so stored bytes never depend on it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from domain.errors import StoreBusyError
from infrastructure.storage.ops_clock import stopwatch


@dataclass(frozen=True)
class RetryPolicy:
    """How long a contended write keeps trying, and how it spaces its attempts."""

    attempts: int
    """Attempts in all, the first included: the last loss within them is ``STORE_BUSY``."""
    seconds: float
    """Time the retries may take in all: a pause that would end past it is not taken."""
    first_pause: float = 0.002
    """The cap on the pause after the first loss, in seconds; it doubles after each loss."""
    longest_pause: float = 0.1
    """The cap it stops doubling at: about one busy commit's worth of other writers."""

    def start(self, what: str) -> Retries:
        """The retries of one write, ``what`` naming what it contends for (in the one-line
        ``STORE_BUSY`` message)."""
        return Retries(self, what)


WRITE_RETRIES: Final = RetryPolicy(attempts=200, seconds=30.0)
"""The ledger's policy. Each loss follows another writer's success, so a write loses at most as
often as others write its record meanwhile: of 80 writes by eight processes to one record, none
lost more than 17 times in the runs measured. 200 attempts and 30 s are far past that and still
answer a caller within an HTTP client's usual timeout."""


class Retries:
    """One write's attempts under a `RetryPolicy`: `lost` after each attempt that lost."""

    def __init__(
        self,
        policy: RetryPolicy,
        what: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        elapsed: Callable[[], float] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.policy = policy
        self.what = what
        self.losses = 0
        self._sleep = sleep
        self._elapsed = stopwatch() if elapsed is None else elapsed
        self._jitter = jitter

    def lost(self) -> None:
        """The attempt just made lost: pause before the next one, or raise `StoreBusyError`
        when the budget has no room for another."""
        self.losses += 1
        policy = self.policy
        cap = min(policy.longest_pause, policy.first_pause * 2 ** (self.losses - 1))
        pause = cap * self._jitter()
        spent = self._elapsed()
        if self.losses >= policy.attempts or spent + pause > policy.seconds:
            attempts = f"{self.losses} attempt{'' if self.losses == 1 else 's'}"
            raise StoreBusyError(
                f"{self.what}: other writers kept it contended for {attempts} in {spent:.1f} s;"
                " try again"
            )
        self._sleep(pause)
