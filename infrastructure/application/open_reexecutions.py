"""Re-executions held open between requests: the HTTP service's side of the harness.

An agent out of process (the ``mace-harness`` client, `clients/python`) re-executes its code over
HTTP. The service opens the very harness the in-process API opens (`open_harness` over
``ledger.recordings``: the signed REPLAY_REQUEST, roles, tenancy, governance and the replay lease
as in process), keeps it here under a random id between requests, answers each call the agent
sends through the same `ReplayHarness` methods (so the matching and canonical JSON stay in one
place, on the server), and closes it when the agent says it ended. Only the tenant and actor
that opened a re-execution reach it; to anyone else its id is a free one.

An agent that goes away leaves its re-execution open: one that sees no call for ``idle_seconds``
is closed by `sweep` as a divergence where the code stood (``abandoned``), and recorded. So is
every re-execution still open when the service stops. A service killed outright loses its open
re-executions: their requests stay without a result and their leases die with the process, so
readers see abandoned attempts (`GovernanceService.unanswered_replays`), never a match.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from threading import Event, Lock, Thread
from typing import Any, Final, TypeVar

from domain.errors import NotFoundError, StoreBusyError
from domain.governance import Actor
from domain.replay_access import ReplayMode
from infrastructure.application.errors import failure_of
from infrastructure.application.replay_harness import RecordingSource, ReplayHarness, open_harness
from infrastructure.application.replays import ReplayResult
from projections.reexecution import NO_ANSWER_KEPT

logger = logging.getLogger("mace.reexecutions")

T = TypeVar("T")
STOP_WAIT: Final = 2.0
"""How long stopping waits for the sweeper's last round (seconds)."""


@dataclass
class _Open:
    harness: ReplayHarness
    tenant: str
    actor_id: str
    touched: float
    lock: Lock = field(default_factory=Lock)


class OpenReexecutions:
    """The service's open re-executions; safe to use from the request threads.

    ``clock``: the wall clock idleness is told by (operations time: it decides when an
    abandoned re-execution is closed, never what any call answers)."""

    def __init__(
        self,
        source: RecordingSource,
        idle_seconds: float,
        clock: Callable[[], float],
        most: int,
    ) -> None:
        self._source = source
        self.idle_seconds = idle_seconds
        self._clock = clock
        self.most = most
        self._open: dict[str, _Open] = {}
        self._opening = 0
        self._lock = Lock()

    def open(self, job_id: str, mode: ReplayMode | str, actor: Actor, tenant: str) -> str:
        """Open a re-execution of the tenant's job (its request recorded); its id.

        `StoreBusyError`, nothing recorded, when ``most`` are open (or opening) already."""
        self.sweep()
        with self._lock:
            if len(self._open) + self._opening >= self.most:
                msg = (
                    f"{self.most} re-executions are open already (MACE_MAX_OPEN_REEXECUTIONS):"
                    " close one, or wait for an abandoned one's idle limit"
                )
                raise StoreBusyError(msg)
            self._opening += 1
        try:
            harness = open_harness(self._source, job_id, actor, mode=mode, tenant=tenant)
            reexecution_id = secrets.token_hex(16)  # an operations value, never a decision input
            with self._lock:
                self._open[reexecution_id] = _Open(harness, tenant, actor.actor_id, self._clock())
        finally:
            with self._lock:
                self._opening -= 1
        return reexecution_id

    def call(
        self, reexecution_id: str, actor: Actor, tenant: str, ask: Callable[[ReplayHarness], T]
    ) -> T:
        """``ask`` the caller's open re-execution, one call at a time: what the harness answers
        or raises (a divergence, a refusal) is the call's answer."""
        self.sweep()
        held = self._held(reexecution_id, actor, tenant)
        with held.lock:
            self._still_held(reexecution_id, held)
            held.touched = self._clock()
            return ask(held.harness)

    def close(
        self,
        reexecution_id: str,
        actor: Actor,
        tenant: str,
        final_output: Any = NO_ANSWER_KEPT,
        broke_off: str | None = None,
    ) -> ReplayResult:
        """End the caller's re-execution as the code ended (`ReplayHarness.close`) and record
        it; ``final_output``, when given, is compared with the recorded one."""
        self.sweep()
        held = self._held(reexecution_id, actor, tenant)
        with held.lock:
            self._still_held(reexecution_id, held)
            with self._lock:
                del self._open[reexecution_id]
            held.harness.final_output(final_output)
            return held.harness.close(broke_off)

    def sweep(self) -> None:
        """Close, as abandoned, every re-execution that saw no call for ``idle_seconds``."""
        now = self._clock()
        with self._lock:
            idle = [k for k, v in self._open.items() if now - v.touched > self.idle_seconds]
        why = f"abandoned: no call and no close for more than {self.idle_seconds:g} s"
        for reexecution_id in idle:
            self._abandon(reexecution_id, why)

    def close_all(self, why: str) -> None:
        """Close every open re-execution as abandoned (the service is stopping)."""
        with self._lock:
            ids = list(self._open)
        for reexecution_id in ids:
            self._abandon(reexecution_id, why)

    @contextmanager
    def running(self) -> Iterator[OpenReexecutions]:
        """Sweep in a thread of its own while the service runs (so an abandoned re-execution is
        closed even when no request comes), and close what is still open when it stops."""
        stop = Event()

        def rounds() -> None:
            while not stop.wait(self.idle_seconds / 2):
                self.sweep()

        sweeper = Thread(target=rounds, name="mace-reexecution-sweeper", daemon=True)
        sweeper.start()
        try:
            yield self
        finally:
            stop.set()
            sweeper.join(STOP_WAIT)
            self.close_all("abandoned: the service stopped with the re-execution open")

    def _held(self, reexecution_id: str, actor: Actor, tenant: str) -> _Open:
        with self._lock:
            held = self._open.get(reexecution_id)
        if held is None or (held.tenant, held.actor_id) != (tenant, actor.actor_id):
            msg = (
                f"no open re-execution {reexecution_id}: none was opened by this caller, or it"
                " ended (closed, or abandoned after its idle limit)"
            )
            raise NotFoundError(msg)
        return held

    def _still_held(self, reexecution_id: str, held: _Open) -> None:
        """Refuse a re-execution closed while this request waited for its lock."""
        with self._lock:
            current = self._open.get(reexecution_id)
        if current is not held:
            msg = f"no open re-execution {reexecution_id}: it ended while this call waited"
            raise NotFoundError(msg)

    def _abandon(self, reexecution_id: str, why: str) -> None:
        with self._lock:
            held = self._open.pop(reexecution_id, None)
        if held is None:
            return
        with held.lock:
            try:
                held.harness.close(why)
            except Exception as exc:
                # The store refused the result: the request stays without one and its lease is
                # given back, so it reads as abandoned all the same. Said, never raised: the
                # sweep runs for every caller's request and in its own thread.
                failure = failure_of(exc)
                if failure is None:
                    raise
                logger.warning(
                    "re-execution %s not recorded as abandoned: %s: %s",
                    reexecution_id,
                    failure.code,
                    failure.message,
                )
