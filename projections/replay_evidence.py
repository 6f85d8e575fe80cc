"""Replay evidence (seed 002): how often replays reproduce their job, and how fast.

Computed from the read models only, so ``/metrics`` and the dashboard say the same thing. A
success is a replay that reproduced its job (outcome ``ok``); one that ran to its end without
reproducing anything (``not_reproduced``) is finished and no success. The time to reproduce is
how long a successful replay ran (its REPLAY_RESULT's ``elapsed_ms``, ops metadata from a
monotonic clock), averaged over the replays that succeeded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from projections.read_model_rows import Row

REPRODUCTION_OUTCOMES = frozenset({"ok", "not_reproduced", "failed"})
"""Replays that ran to a verdict: not those without a result, nor those refused before they ran."""


@dataclass(frozen=True)
class ReplayEvidence:
    attempts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Replay attempts by ``(mode, outcome)``: ok, not_reproduced, failed or refused, and those
    without a result: pending (the read model's word), running or abandoned (as the ledger's
    leases tell)."""
    jobs: int = 0
    jobs_not_replayable: int = 0
    mean_seconds_to_reproduce: float | None = None

    @property
    def finished(self) -> int:
        return sum(
            n for (_, outcome), n in self.attempts.items() if outcome in REPRODUCTION_OUTCOMES
        )

    @property
    def successes(self) -> int:
        return sum(n for (_, outcome), n in self.attempts.items() if outcome == "ok")

    @property
    def success_rate(self) -> float | None:
        """Successes over finished attempts; None before any replay has finished."""
        return None if self.finished == 0 else self.successes / self.finished

    def as_json(self) -> dict[str, Any]:
        return {
            "attempts": [
                {"mode": mode, "outcome": outcome, "count": count}
                for (mode, outcome), count in sorted(self.attempts.items())
            ],
            "successes": self.successes,
            "finished": self.finished,
            "success_rate": self.success_rate,
            "mean_seconds_to_reproduce": self.mean_seconds_to_reproduce,
            "jobs": self.jobs,
            "jobs_not_replayable": self.jobs_not_replayable,
        }


def replay_evidence(job_rows: list[Row], replay_rows: list[Row]) -> ReplayEvidence:
    """The evidence over the given job-index and replay-outcome rows (already tenant-filtered)."""
    attempts = Counter((str(r["mode"]), str(r["outcome"])) for r in replay_rows)
    spans = [_seconds_to_reproduce(r) for r in replay_rows if r["outcome"] == "ok"]
    return ReplayEvidence(
        attempts=dict(attempts),
        jobs=len(job_rows),
        jobs_not_replayable=sum(1 for r in job_rows if r.get("replayable") is False),
        mean_seconds_to_reproduce=sum(spans) / len(spans) if spans else None,
    )


def _seconds_to_reproduce(row: Row) -> float:
    """The replay's own timing; replays recorded before it was kept: request to result."""
    if row.get("elapsed_ms") is not None:
        return int(row["elapsed_ms"]) / 1000
    start, end = (
        datetime.fromisoformat(row["requested_at"]),
        datetime.fromisoformat(row["finished_at"]),
    )
    return max(0.0, (end - start).total_seconds())
