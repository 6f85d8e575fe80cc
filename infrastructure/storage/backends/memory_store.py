"""Where a bundle's ledger lives: eventsourcing's plain-Python recorder, in this process only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryStore:
    """A store held in memory: no file, no server, nothing kept when the process ends."""

    # Nothing refuses its writes; it is thrown away with the ledger reading it.
    read_only: bool = False

    def eventsourcing_env(self) -> dict[str, str]:
        return {"PERSISTENCE_MODULE": "eventsourcing.popo"}

    def describe(self) -> str:
        return "bundle (in memory)"
