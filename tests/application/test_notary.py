"""The notary of `mace serve`, on SQLite and PostgreSQL: it checkpoints what was committed, off
the request path; a failure is one warning per round and never stops it; stopping writes a last
checkpoint; two notaries on one store never fork the chain.

Nothing here sleeps to wait: a round is driven directly (`Notary.tick`), or the notary's thread
reports each round on a queue the test blocks on.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from threading import Barrier, Event, Thread

import pytest
from support.ledger_fixtures import RawTable, store_of
from support.witness_server import SpecWitness, serving

from domain.checkpoint import CHECKPOINT_STREAM, LedgerCheckpoints
from domain.sem import SemEntry
from infrastructure.application.ledger import Ledger
from infrastructure.application.notary import MAX_PAUSE, Notary, backoff
from infrastructure.application.witnesses import policy_witnessing
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.settings import Settings
from infrastructure.storage.store import LedgerStore

WAIT = 60.0
"""How long a test waits for a round it expects (a bound on a broken test, never a pause)."""
NEVER = 3600.0
"""An interval no test lives to see: rounds happen only when the notary stops."""


def remember(ledger: Ledger, country: str) -> None:
    """One commit: a SEM fact of the default tenant."""
    ledger.sem.put(f"world/country/{country}/capital", country.title())


def checkpoints_of(store: LedgerStore) -> Checkpoints:
    assert store.checkpoints is not None
    return store.checkpoints


def leaves(store: LedgerStore) -> int:
    """How many stored events a checkpoint must cover: all but the checkpoints' own."""
    count, position = 0, 0
    while page := store.recorder.select_notifications(position, 1000, inclusive_of_start=False):
        count += sum(1 for n in page if str(n.originator_id) != str(CHECKPOINT_STREAM))
        position = page[-1].id
    return count


def covered(store: LedgerStore) -> int:
    newest = checkpoints_of(store).newest()
    return 0 if newest is None else newest.checkpoint.tree_size


def test_a_round_checkpoints_what_was_committed_and_the_next_finds_nothing(
    ledger: Ledger,
) -> None:
    notary = Notary(ledger.checkpoints, NEVER)
    remember(ledger, "france")
    assert covered(store_of(ledger)) == 0
    assert notary.tick() == 1
    assert covered(store_of(ledger)) == leaves(store_of(ledger))
    # The round after it sees the notary's own checkpoint moved the head: nothing to cover.
    assert [notary.tick(), notary.tick()] == [0, 0]
    remember(ledger, "spain")
    assert notary.tick() == 1
    assert covered(store_of(ledger)) == leaves(store_of(ledger))
    assert checkpoints_of(store_of(ledger)).newest().checkpoint.number == 2  # type: ignore[union-attr]


def test_an_empty_store_gets_no_checkpoint_until_something_is_committed(ledger: Ledger) -> None:
    notary = Notary(ledger.checkpoints, NEVER)
    assert notary.tick() == 0
    assert checkpoints_of(store_of(ledger)).newest() is None


def test_an_integrity_failure_is_logged_every_round_and_the_notary_goes_on(
    ledger: Ledger, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    notary = Notary(ledger.checkpoints, NEVER)
    remember(ledger, "france")
    table = RawTable(settings)
    stream = SemEntry.id_for("world/country/france/capital")
    state = table.state(stream, 1)
    table.set_column(stream, 1, "state", bytes([state[0] ^ 1]) + state[1:])
    caplog.set_level(logging.WARNING, logger="mace.checkpoints")

    assert [notary.tick(), notary.tick()] == [0, 0]

    lines = [r.getMessage() for r in caplog.records if r.name == "mace.checkpoints"]
    assert len(lines) == 2 and lines[0] == lines[1]
    assert lines[0].startswith(
        f"notary: no checkpoint written: INTEGRITY_FAILURE: stream {stream} version 1: "
    )
    assert "\n" not in lines[0]
    assert checkpoints_of(store_of(ledger)).newest() is None
    table.set_column(stream, 1, "state", state)  # repaired: the next round writes
    assert notary.tick() == 1


def test_failing_rounds_back_off_doubling_up_to_a_cap_with_jitter() -> None:
    pauses = [backoff(1.0, failures, 1.0) for failures in range(8)]
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, MAX_PAUSE, MAX_PAUSE, MAX_PAUSE]
    assert (backoff(1.0, 3, 0.9), backoff(1.0, 3, 1.1)) == pytest.approx((7.2, 8.8))
    # An interval above the cap is never shortened by failures; a success brings it back.
    assert backoff(60.0, 4, 1.0) == 60.0
    assert backoff(0.5, 0, 1.1) == 0.5


def test_the_notary_backs_off_while_rounds_fail_and_comes_back_after_one_succeeds(
    ledger: Ledger, settings: Settings
) -> None:
    notary = Notary(ledger.checkpoints, 1.0)
    remember(ledger, "france")
    table = RawTable(settings)
    stream = SemEntry.id_for("world/country/france/capital")
    state = table.state(stream, 1)
    table.set_column(stream, 1, "state", bytes([state[0] ^ 1]) + state[1:])
    for failures in (1, 2, 3):
        notary.tick()
        assert notary.failures == failures
        assert 0.9 * 2**failures <= notary.pause() <= 1.1 * 2**failures
    table.set_column(stream, 1, "state", state)
    assert notary.tick() == 1
    assert (notary.failures, notary.pause()) == (0, 1.0)


class StuckNotary(Notary):
    """A notary whose round waits, as one waiting for a store that is gone does, until let go."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger.checkpoints, 0.001)
        self.waiting = Event()
        self.let_go = Event()

    def tick(self) -> int:
        self.waiting.set()
        self.let_go.wait(WAIT)
        return 0


def test_stopping_does_not_wait_for_a_round_stuck_on_the_store(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mace.checkpoints")
    notary = StuckNotary(ledger)
    notary.start()
    thread = notary._thread
    assert thread is not None and notary.waiting.wait(WAIT)
    notary.stop()  # returns, though the round still waits
    assert thread.is_alive() and thread.daemon
    lines = [r.getMessage() for r in caplog.records if r.name == "mace.checkpoints"]
    assert lines and lines[-1].startswith("notary: stopped without a last checkpoint: ")
    notary.let_go.set()
    thread.join(WAIT)


class ReportingNotary(Notary):
    """A notary whose thread reports how many checkpoints each round wrote."""

    def __init__(self, ledger: Ledger, interval: float) -> None:
        super().__init__(ledger.checkpoints, interval)
        self.store = store_of(ledger)
        self.rounds: queue.Queue[int] = queue.Queue()

    def tick(self) -> int:
        written = super().tick()
        self.rounds.put(written)
        return written

    def until_all_covered(self) -> None:
        """Block until a round has checkpointed every stored event (it may take a few: a
        commit can land while a round writes)."""
        while covered(self.store) != leaves(self.store):
            self.rounds.get(timeout=WAIT)


def test_the_thread_checkpoints_a_commit_within_its_interval_while_running(
    ledger: Ledger,
) -> None:
    with ReportingNotary(ledger, 0.01).running() as notary:
        remember(ledger, "france")
        notary.until_all_covered()
        first = covered(store_of(ledger))
        remember(ledger, "spain")
        notary.until_all_covered()
        assert covered(store_of(ledger)) > first > 0


def test_stopping_writes_a_last_checkpoint_without_waiting_for_the_interval(
    ledger: Ledger,
) -> None:
    with ReportingNotary(ledger, NEVER).running() as notary:
        remember(ledger, "france")
    assert notary.rounds.get_nowait() == 1  # the last round, the only one
    assert covered(store_of(ledger)) == leaves(store_of(ledger))


@pytest.fixture
def second_ledger(settings: Settings, ledger: Ledger) -> Iterator[Ledger]:
    """Another ledger on the same store: its own connections, as another service process has."""
    with Ledger.open(settings, checkpoint_on_close=False) as other:
        yield other


def test_two_notaries_writing_concurrently_never_fork_the_chain(
    ledger: Ledger, second_ledger: Ledger
) -> None:
    ledger.sem.put("world/country/start/capital", "Start")  # the default snapshots, stored once
    writers = [(ledger, "a"), (second_ledger, "b")]
    start = Barrier(len(writers))

    def write(on: Ledger, prefix: str) -> None:
        start.wait(timeout=WAIT)
        for i in range(15):
            remember(on, f"{prefix}{i}")

    with (
        Notary(ledger.checkpoints, 0.001).running(),
        Notary(second_ledger.checkpoints, 0.001).running(),
    ):
        threads = [Thread(target=write, args=writer) for writer in writers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    chain = [
        checkpoints_of(store_of(ledger)).checked(event)
        for event in store_of(ledger).verifying_store.get(CHECKPOINT_STREAM)
        if isinstance(event, LedgerCheckpoints.Signed)
    ]
    assert len(chain) >= 2
    bodies = [signed.checkpoint for signed in chain]
    assert [body.number for body in bodies] == list(range(1, len(bodies) + 1))
    assert bodies[0].previous is None
    for before, after in pairwise(bodies):
        assert after.previous == before.digest()
        assert after.tree_size > before.tree_size
    assert bodies[-1].tree_size == leaves(store_of(ledger))


def test_with_a_witness_policy_each_new_checkpoint_is_witnessed_and_a_refusal_is_retried(
    ledger: Ledger,
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    checkpoints = ledger.checkpoints
    checkpoints.write()
    origin = checkpoints.log_origin(None)
    w = SpecWitness("witness.example/w1")
    w.trust(checkpoints.verifier_key(origin))
    with serving(w) as url:
        policy = tmp_path / "witnesses.policy"
        policy.write_text(
            f"log {checkpoints.verifier_key(origin).encoded()}\n"
            f"witness w1 {w.vkey.encoded()} {url}\nquorum 1\n"
        )
        with_policy = settings.model_copy(update={"witness_policy": policy})
        notary = Notary(checkpoints, NEVER, policy_witnessing(with_policy, checkpoints))
        remember(ledger, "france")
        assert notary.tick() == 1
        assert w.latest[origin][0] == covered(store_of(ledger))

        trusted = dict(w.logs)
        w.logs.clear()  # the witness forgets the log: it refuses (404) until told again
        remember(ledger, "spain")
        with caplog.at_level(logging.WARNING, logger="mace.checkpoints"):
            assert notary.tick() == 1
        assert caplog.messages == [
            f"notary: checkpoint not witnessed: WITNESS_FAILED: witness {url} refused the"
            " checkpoint: it does not know the log's origin (404): add the origin and vkey to it"
        ]
        assert notary.failures == 1
        w.logs.update(trusted)
        assert notary.tick() == 0  # nothing new to checkpoint: the witnessing is retried
        assert (notary.failures, w.latest[origin][0]) == (0, covered(store_of(ledger)))
        note = checkpoints.note(checkpoints.newest() or pytest.fail("no checkpoint"), origin)
        assert [line.name for line in note.signatures] == [origin, w.name]
