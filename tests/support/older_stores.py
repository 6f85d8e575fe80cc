"""Stores as a ledger wrote them before writes outside runs were held to the privacy rules.

`store_before_the_rules` writes SEM entries and memories holding the canaries (`support.canaries`)
through the aggregates themselves, below the use cases' checks, as such a ledger did: one key of
its own for each (``.../note0`` ... ``.../api_key4``), a fact memory and a SEM entry under each.
"""

from __future__ import annotations

from typing import Any, Final

from domain.memories import MemoryLog
from domain.policy import MemoryKind
from domain.sem import SemEntry
from infrastructure.application.ledger import Ledger
from support.canaries import API_KEY, CARD, PASSWORD, SSN
from support.ledger_fixtures import store_of

OLD_SECRET: Final = "opensesame"
"""A value no pattern knows, kept under a secret's name (``api_key``): its key gives it away."""
BEFORE_THE_RULES: Final[list[tuple[str, Any]]] = [
    ("user/person/alice/note0", {"password": PASSWORD}),
    ("user/person/alice/note1", SSN),
    ("user/person/alice/note2", {"cards": [CARD]}),
    ("user/person/alice/note3", f"my key is {API_KEY}"),
    ("user/person/alice/api_key4", OLD_SECRET),
]
"""A SEM key and a value today's writes refuse (a ``password`` field, an SSN, a card number, an
API key, a value under a secret's key)."""


def store_before_the_rules(ledger: Ledger, tenant: str) -> None:
    """Write `BEFORE_THE_RULES` as SEM entries and fact memories of ``tenant``, unchecked."""
    log = MemoryLog(tenant=tenant)
    provenance = {"actor": "olga", "recorded_at": "2026-01-01T00:00:00Z", "origin": None}
    for n, (key, value) in enumerate(BEFORE_THE_RULES):
        entry = SemEntry.first_write(tenant, key, value, "cli")
        log._remembered(  # the event a ledger before the rules wrote, unchecked
            memory_id=f"mem-{n:032x}",
            kind=MemoryKind.FACT,
            key=key,
            content=value,
            labels=[],
            provenance=provenance,
            supersedes=None,
        )
        store_of(ledger).save(entry)
    store_of(ledger).save(log)
