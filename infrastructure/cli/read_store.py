"""What a command that read ``MACE_READ_STORE`` says of it: which database answered, up to where.

A read store is a replica or copy that may lag its primary; a verdict on it is a verdict on the
ledger as that database holds it, up to its head. So the command names it, and its head, before
anything else it prints (``--json``: a ``read_store`` field); on ``MACE_STORE`` nothing changes.
"""

from __future__ import annotations

from typing import Any

from infrastructure.application.ledger import Ledger


def read_store_note(ledger: Ledger) -> dict[str, Any]:
    """``{"read_store": {"store", "head"}}`` for a ledger opened on a read store, else ``{}``."""
    status = ledger.status
    if not status.read_only:
        return {}
    return {"read_store": {"store": status.where, "head": status.head()}}


def print_read_store(note: dict[str, Any]) -> None:
    if note:
        read = note["read_store"]
        store, head = read["store"], read["head"]
        print(f"read store (MACE_READ_STORE): {store}, its head at notification {head}")
