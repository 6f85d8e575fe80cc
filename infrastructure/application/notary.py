"""The notary: keeps the ledger checkpointed while a long-lived process (`mace serve`) writes.

A `mace` command checkpoints what it saved when it closes its ledger; the HTTP service never
closes its ledger between requests, so the notary does it instead, in a thread of its own. A
request commits and answers without waiting for it; the checkpoint that covers the commit
follows at most ``interval`` seconds later (plus the time to write it).

Commits are noticed by polling the log's head (the highest notification id, one indexed
``max()``) once per interval, not by the store's ``wrote`` flag: that flag sees this process's
saves only, while other service processes and ``mace`` commands write to the same store. The
poll works alike on SQLite, which has no LISTEN, and on PostgreSQL, where LISTEN/NOTIFY would
save one small query per second at the price of a connection held open and a poll all the same
for notifications missed while it reconnects.

Two notaries on one store (two service processes) both write: they race for the next checkpoint
number, and `CheckpointService.write` makes the loser go on from the winner's checkpoint, so the
chain never forks.

With a witness policy (``MACE_WITNESS_POLICY``), a round that wrote a checkpoint then sends it to
the policy's witnesses that have a URL (`Witnesses.witness`) and keeps their cosignatures; a
witness that refuses or does not answer is a warning, and later rounds try again until all cosign.

A round that fails (the store unreachable, a stored event that no longer verifies) logs one
warning line and a later round tries again: an integrity failure is said again until someone
repairs it, and the service goes on serving. After each failure in a row the pause before the next
round doubles, up to `MAX_PAUSE` seconds, with a random tenth more or less (`backoff`): a notary
that finds the store gone waits for it instead of taking a pooled connection's wait every
interval, and the notaries of several service processes do not knock on a returning server in
step. The first round that succeeds brings the interval back.

The notary never holds up a request (it runs in its own thread and takes one pooled connection at
a time, as a request does) nor a shutdown: `Notary.stop` waits at most `STOP_WAIT` seconds for the
last round, which a store that is gone would keep waiting for a connection; the thread is a daemon,
and what the service acknowledged is committed already (a checkpoint only covers it).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import Event, Thread
from typing import Final, Self

from infrastructure.application.checkpoints import CheckpointService
from infrastructure.application.errors import failure_of

logger = logging.getLogger("mace.checkpoints")

MAX_PAUSE: Final = 30.0
"""The longest pause between rounds while they keep failing (seconds)."""
STOP_WAIT: Final = 2.0
"""How long `Notary.stop` waits for the last round (seconds)."""


def backoff(interval: float, failures: int, draw: float) -> float:
    """The pause before the next round after ``failures`` failed rounds in a row: the interval,
    doubled for each failure, at most `MAX_PAUSE` (never less than the interval), times
    ``draw`` (a uniform draw in [0.9, 1.1] while failing: the jitter)."""
    if failures == 0:
        return interval
    return max(interval, min(MAX_PAUSE, interval * 2.0**failures)) * draw


class Notary:
    def __init__(
        self,
        checkpoints: CheckpointService,
        interval: float,
        witnessing: Callable[[], object] | None = None,
    ) -> None:
        """``witnessing``: sends the newest checkpoint to the witnesses (`Witnesses.witness`),
        after each round that wrote one, and again each round until it succeeds."""
        self.checkpoints = checkpoints
        self.interval = interval
        self.witnessing = witnessing
        # A checkpoint the witnesses have not cosigned yet (the first round checks the store's).
        self._witness_due = witnessing is not None
        # The log's head when a round last found every event checkpointed: until the head
        # moves past it, a round reads nothing else.
        self._covered = 0
        # Rounds failed in a row: each doubles the pause before the next (`backoff`).
        self.failures = 0
        self._stopping = Event()
        self._thread: Thread | None = None

    def tick(self) -> int:
        """One round: checkpoint whatever was committed since the last; the checkpoints written.

        Never raises: a failure is logged, and the next round starts over.
        """
        try:
            head = self.checkpoints.head()
            if head == self._covered:
                return self._witness(0)
            written = self.checkpoints.write().written
        except Exception as problem:
            self.failures += 1
            logger.warning("notary: no checkpoint written: %s", _one_line(problem))
            return 0
        self.failures = 0
        # Only the head read before writing is known to be covered: a commit after that read,
        # and this round's own checkpoint, move the head, and the next round looks again.
        self._covered = head
        self._witness_due = self._witness_due or (written > 0 and self.witnessing is not None)
        return self._witness(written)

    def _witness(self, written: int) -> int:
        """Witness the newest checkpoint if it is due; ``written`` is passed through. A failure
        is a warning, and the next round (after the backoff) tries again."""
        if not self._witness_due or self.witnessing is None:
            return written
        try:
            self.witnessing()
        except Exception as problem:
            self.failures += 1
            logger.warning("notary: checkpoint not witnessed: %s", _one_line(problem))
            return written
        self.failures = 0
        self._witness_due = False
        return written

    @contextmanager
    def running(self) -> Iterator[Self]:
        """The notary at work in its thread while the block runs; on the way out it writes a
        last checkpoint, so what was committed before shutdown does not wait for a restart."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    def start(self) -> None:
        self._stopping.clear()
        self._thread = Thread(target=self._rounds, name="mace-notary", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the last round: waits for it at most `STOP_WAIT` seconds."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(STOP_WAIT)
        if thread.is_alive():
            logger.warning(
                "notary: stopped without a last checkpoint: the store did not answer within"
                " %g s (what was committed is checkpointed by the next writer)",
                STOP_WAIT,
            )

    def pause(self) -> float:
        """How long to wait before the next round (`backoff`)."""
        return backoff(self.interval, self.failures, random.uniform(0.9, 1.1))  # noqa: S311

    def _rounds(self) -> None:
        while not self._stopping.wait(self.pause()):
            self.tick()
        if self.failures == 0:
            # A store that failed the last round is not waited for again as the service stops.
            self.tick()


def _one_line(problem: Exception) -> str:
    """The failure as the product names it (``CODE: message``), else its type and first line."""
    failure = failure_of(problem)
    if failure is not None:
        return f"{failure.code}: {failure.message}"
    text = str(problem).splitlines()
    return f"{type(problem).__name__}: {text[0]}" if text else type(problem).__name__
