"""``mace bench``: how fast the ledger's own paths are on this machine, as printed figures.

Timings are never pass/fail in the test suite (DESIGN section 7); they are measured here, on the
store ``MACE_STORE`` names, which must be empty: the bench writes, and figures from a store
already holding other data would not compare. Each figure is the median of ``rounds`` rounds;
each round does the same work on fresh names, so every round writes as much as the first.

- ``write``: Stage-0 jobs recorded whole, one transaction each; every event stored counts (the
  job's, its seal's witness, its registry entry, its SEM writes).
- ``checkpoint``: a checkpoint written over the round's events (`mace checkpoint`).
- ``read``: every stored event read back in pages, its MAC verified (`mace verify --all` as it
  was before checkpoints: the baseline of the next figure).
- ``verify``: `mace verify --all` whole: that read, after every checkpoint is checked and the
  Merkle tree recomputed over the log. `tree_cost` is its time over the read's (at most 1.25).
- ``replay``: audit replays of the recorded jobs (load, verify, fold, re-decide, compare, record).
- ``memory``: memory writes to one tenant's log, which grows by ``memories`` each round.
- ``context`` and ``receipt replay``: receipts emitted over that log under a policy bundle, and
  replayed as emitted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from domain.context_assembly import ContextCaller, ContextRequest
from domain.governance import Actor
from domain.receipt import MemoryView, ReceiptKind
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly

ACTOR: Final = Actor.of("bench", ["operator", "admin", "auditor"])
TENANT: Final = "bench"
BUNDLE: Final = (
    "version: 1\nrules:\n"
    "- {id: hide-secret, when: {memory_label: secret}, action: deny}\n"
    "- {id: mask-pii, when: {memory_label: pii}, action: redact}\n"
)
WORDS: Final = ("alice", "bob", "plan", "invoice", "renewal", "refund", "trains", "email")


class BenchError(ValueError):
    """The bench cannot run here (a non-empty store, bad sizes)."""


@dataclass(frozen=True, slots=True)
class Figure:
    name: str
    unit: str
    per_second: float
    count: int
    seconds: float

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "unit": self.unit,
            "per_second": round(self.per_second, 1),
            "count": self.count,
            "seconds": round(self.seconds, 4),
        }


def _timed(work: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    count = work()
    return count, time.perf_counter() - started


def _median(name: str, unit: str, rounds: list[tuple[int, float]]) -> Figure:
    rates = [count / seconds for count, seconds in rounds if seconds > 0]
    count, seconds = rounds[len(rounds) // 2]
    return Figure(name, unit, statistics.median(rates), count, seconds)


class Bench:
    def __init__(self, ledger: Ledger, jobs: int, memories: int, contexts: int) -> None:
        for name, value in (("jobs", jobs), ("memories", memories), ("contexts", contexts)):
            if value < 1:
                raise BenchError(f"--{name} must be at least 1, got {value}")
        if ledger.store.recorder.max_notification_id():
            msg = "mace bench writes to the store: point MACE_STORE at an empty one"
            raise BenchError(msg)
        self.ledger = ledger
        self.jobs = jobs
        self.memories = memories
        self.contexts = contexts

    def run(self, rounds: int) -> tuple[list[Figure], float]:
        """The figures, and `tree_cost`: the median over rounds of how much longer
        `mace verify --all` took with the checkpoint pass than without it, both timed over the
        same store within the round (so the store's growth between rounds does not enter)."""
        if rounds < 1:
            raise BenchError(f"--rounds must be at least 1, got {rounds}")
        self.ledger.policy.set_bundle(TENANT, BUNDLE, ACTOR)
        samples: dict[str, list[tuple[int, float]]] = {}
        for round_number in range(rounds):
            for name, work in self._round(round_number):
                samples.setdefault(name, []).append(_timed(work))
        units = {
            "write": "events",
            "checkpoint": "events",
            "read": "events",
            "verify": "events",
            "replay": "replays",
            "memory": "writes",
            "context": "receipts",
            "receipt replay": "replays",
        }
        figures = [_median(name, units[name], rounds_) for name, rounds_ in samples.items()]
        costs = [
            with_tree / without
            for (_, with_tree), (_, without) in zip(samples["verify"], samples["read"], strict=True)
        ]
        return figures, statistics.median(costs)

    def _head(self) -> int:
        return self.ledger.store.recorder.max_notification_id() or 0

    def _round(self, number: int) -> list[tuple[str, Callable[[], int]]]:
        job_ids: list[str] = []
        receipt_ids: list[str] = []

        def write() -> int:
            before = self._head()
            for i in range(self.jobs):
                log = self.ledger.jobs.run(f"what is {number} + {i}?", f"bench-{number}-{i}")
                job_ids.append(log.job_id)
            return self._head() - before  # every event stored with the jobs, witnesses included

        def checkpoint() -> int:
            checkpoints = self.ledger.store.checkpoints
            assert checkpoints is not None  # a store opened from settings has its key
            before = checkpoints.newest()
            covered = checkpoints.write().newest.checkpoint.tree_size
            return covered - (0 if before is None else before.checkpoint.tree_size)

        def read() -> int:
            return self.ledger.store.verify_all(tree=False).events

        def verify() -> int:
            return self.ledger.store.verify_all().events

        def replay() -> int:
            for job_id in job_ids:
                self.ledger.replays.run(job_id, ReplayMode.AUDIT, ACTOR)
            return len(job_ids)

        def memory() -> int:
            for i in range(self.memories):
                words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(3))
                labels = ["pii"] if i % 7 == 0 else ["secret"] if i % 11 == 0 else []
                self.ledger.memories.remember_episode(TENANT, f"{words} {i}", labels, ACTOR, None)
            return self.memories

        def context() -> int:
            caller = ContextCaller(ACTOR.actor_id, ACTOR.roles)
            for i in range(self.contexts):
                request = ContextRequest(f"{WORDS[i % len(WORDS)]} {WORDS[(i + 3) % 8]}", 10)
                emitted = self.ledger.receipts.emit(
                    Assembly(ReceiptKind.CONTEXT, TENANT, caller, request, None)
                )
                receipt_ids.append(emitted["receipt"]["receipt_id"])
            return self.contexts

        def receipt_replay() -> int:
            for receipt_id in receipt_ids:
                self.ledger.receipts.replay(receipt_id, TENANT, ACTOR, MemoryView.AS_EMITTED)
            return len(receipt_ids)

        return [
            ("write", write),
            ("checkpoint", checkpoint),
            ("read", read),
            ("verify", verify),
            ("replay", replay),
            ("memory", memory),
            ("context", context),
            ("receipt replay", receipt_replay),
        ]
