"""A write that loses a race backs off and tries again, within a budget, on SQLite and PostgreSQL.

Between a use case's read and its save, a rival ledger (its own connections, as another process
has) writes the same record, so the save conflicts: a real lost race, not a simulated one. The
loser pauses (the store's retry policy: a cap doubling from its first pause, a random fraction of
it; the fraction is fixed to 1 here so the pauses can be named) and reads and decides again. Past
its budget it is STORE_BUSY naming the record, having written nothing of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support.ledger_fixtures import store_of

from domain.errors import StoreBusyError
from domain.governance import Actor
from domain.memories import MemoryLog
from domain.sem import SemEntry
from infrastructure.application.errors import failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from infrastructure.storage.write_retries import WRITE_RETRIES, Retries, RetryPolicy

KEY = "world/country/france/capital"
TENANT = "acme"
ACTOR = Actor.of("bot", ("operator",))


@dataclass(frozen=True)
class RecordedPauses(RetryPolicy):
    """A retry policy whose pauses are recorded instead of slept, each its whole cap."""

    pauses: list[float] = field(default_factory=list)

    def start(self, what: str) -> Retries:
        return Retries(self, what, sleep=self.pauses.append, jitter=lambda: 1.0)


@pytest.fixture
def rival(settings: Settings, ledger: Ledger) -> Iterator[Ledger]:
    with Ledger.open(settings) as opened:
        yield opened


def write(ledger: Ledger, what: str, value: str) -> None:
    """One write to the record: the SEM key, or a fact in the tenant's memory log."""
    if what == "sem":
        ledger.sem.put(KEY, value)
    else:
        ledger.memories.remember_fact(TENANT, KEY, value, [], ACTOR, None)


def losing(ledger: Ledger, rival: Ledger, what: str, races: int) -> list[str]:
    """Make each of ``ledger``'s next ``races`` reads of the record be followed by a rival's
    write to it; the values the rival wrote, in the order written."""
    won: list[str] = []
    service: Any = ledger.sem if what == "sem" else ledger.memories
    name = "entry" if what == "sem" else "log"
    read = getattr(service, name)

    def read_then_lose(*args: Any, **kwargs: Any) -> Any:
        held = read(*args, **kwargs)
        if len(won) < races:
            won.append(f"rival-{len(won)}")
            write(rival, what, won[-1])
        return held

    setattr(service, name, read_then_lose)
    return won


def written(ledger: Ledger, what: str) -> list[Any]:
    """Every value written to the record, in log order."""
    if what == "sem":
        writes = ledger.sem.sem_events("default", KEY)
        return [e.value for e in writes if isinstance(e, SemEntry.Stored | SemEntry.Overwritten)]
    log = ledger.memories.log(TENANT)
    assert log is not None
    events = store_of(ledger).verifying_store.get(log.id)
    return [event.content for event in events if isinstance(event, MemoryLog.Remembered)]


@pytest.mark.parametrize("what", ["sem", "memories"])
def test_a_write_that_lost_three_races_pauses_longer_each_time_then_is_written_last(
    ledger: Ledger, rival: Ledger, what: str
) -> None:
    policy = RecordedPauses(WRITE_RETRIES.attempts, WRITE_RETRIES.seconds)
    store_of(ledger).retries = policy
    won = losing(ledger, rival, what, races=3)
    write(ledger, what, "mine")
    assert written(rival, what) == [*won, "mine"]
    assert policy.pauses == [0.002, 0.004, 0.008]  # never at once: the cap doubles per loss
    if what == "sem":
        assert rival.sem.get(KEY)[1].value == "mine"


@pytest.mark.parametrize("what", ["sem", "memories"])
def test_a_write_that_keeps_losing_past_its_budget_is_store_busy_and_writes_nothing(
    ledger: Ledger, rival: Ledger, what: str
) -> None:
    policy = RecordedPauses(attempts=4, seconds=30.0)
    store_of(ledger).retries = policy
    # Two races more than the budget allows: a policy without one would be written at the 7th.
    won = losing(ledger, rival, what, races=6)
    with pytest.raises(StoreBusyError) as raised:
        write(ledger, what, "mine")
    failure = failure_of(raised.value)
    assert failure is not None and failure.code == "STORE_BUSY"
    contended = f"SEM write to {KEY}" if what == "sem" else f"memory write for tenant {TENANT}"
    assert re.fullmatch(
        rf"{contended}: other writers kept it contended for 4 attempts in [0-9.]+ s; try again",
        failure.message,
    )
    assert written(rival, what) == won[:4]  # the rival's four wins, none of the loser's
    assert len(policy.pauses) == 3
