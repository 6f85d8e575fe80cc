"""Re-execute an agent's code against its recording in a MACE Ledger, over HTTP (`harness`)."""

from mace_harness.harness import (
    NO_MOCK,
    Divergence,
    Harness,
    HarnessError,
    Outcome,
    RemoteClock,
    RemoteRNG,
    ReplayDiverged,
    ReplayResult,
    replay_harness,
)

__all__ = [
    "NO_MOCK",
    "Divergence",
    "Harness",
    "HarnessError",
    "Outcome",
    "RemoteClock",
    "RemoteRNG",
    "ReplayDiverged",
    "ReplayResult",
    "replay_harness",
]
