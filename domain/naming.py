"""Aggregate ids are UUIDv5 of stable names, so recording the same thing twice collides.

Creating `job:<job_id>` a second time is then an integrity conflict in the event log rather than
a silent duplicate, and any process can compute where a job, snapshot or seal lives.
"""

from __future__ import annotations

from uuid import UUID, uuid5

# Fixed forever: changing it would move every aggregate of every existing ledger.
MACE_NAMESPACE = UUID("8f0e4c2a-6b1d-5e37-9a58-2d4c61f0b7e3")


def aggregate_id(stable_name: str) -> UUID:
    """The id of the aggregate with this stable name, e.g. ``job:42`` or ``snapshot:<sha256>``."""
    return uuid5(MACE_NAMESPACE, stable_name)
