"""Another tenant's job or receipt costs the store what a free id costs, on SQLite and PostgreSQL.

Response time must not say whether an id is held by another tenant. Timings are not asserted
(they belong in a measurement, not a pass/fail test); what the store is asked is: the lookup of
an id another tenant holds sends the same statements, of the same kinds, as the lookup of an id
nobody holds. The store is checkpointed first, as every CLI write leaves it, so the reads are
held against proven heads as users' reads are.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import pytest
from support.recorder_calls import recorder_calls

from domain.context_assembly import ContextCaller, ContextRequest
from domain.errors import NotFoundError
from domain.receipt import ReceiptKind
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly

Statement = tuple[str, tuple[tuple[str, Any], ...]]


def statements(ledger: Ledger) -> AbstractContextManager[list[Statement]]:
    """Every read of a stream the events table is sent while the block runs: method and options
    (the newest checkpoint's reads, which are not the lookup's, left out)."""
    names = ("select_events", "select_streams")
    return recorder_calls(
        ledger, names, lambda name, _, kwargs: (name, tuple(sorted(kwargs.items())))
    )


def refused_reads(ledger: Ledger, look_up: Callable[[], object]) -> list[Statement]:
    with statements(ledger) as sent, pytest.raises(NotFoundError):
        look_up()
    return sent


CHECKPOINTED = pytest.mark.parametrize("checkpointed", [True, False], ids=["checkpointed", "not"])


@CHECKPOINTED
def test_another_tenants_job_id_reads_what_a_free_one_reads(
    ledger: Ledger, checkpointed: bool
) -> None:
    ledger.jobs.run("2 + 3", "s1", job_id="held-by-default")
    ledger.jobs.run("2 + 3", "s1", job_id="held-by-beta", tenant="beta")
    if checkpointed:
        ledger.checkpoints.write()
    free = refused_reads(ledger, lambda: ledger.jobs.owned_name("free-id", "acme"))
    assert free  # the lookup does read the store
    for held in ("held-by-default", "held-by-beta"):
        assert refused_reads(ledger, partial(ledger.jobs.owned_name, held, "acme")) == free
        assert refused_reads(ledger, partial(ledger.jobs.get, held, tenant="acme")) == free


@CHECKPOINTED
def test_another_tenants_receipt_id_reads_what_a_free_one_reads(
    ledger: Ledger, checkpointed: bool
) -> None:
    caller = ContextCaller("support-bot", ("operator",))
    ask = Assembly(ReceiptKind.CONTEXT, "beta", caller, ContextRequest("alice", 10), None)
    emitted = ledger.receipts.emit(ask)
    receipt_id = emitted["receipt"]["receipt_id"]
    if checkpointed:
        ledger.checkpoints.write()
    free = refused_reads(ledger, lambda: ledger.receipts.get("rct-" + "0" * 32, "acme"))
    assert free
    assert refused_reads(ledger, lambda: ledger.receipts.get(receipt_id, "acme")) == free
    assert refused_reads(ledger, lambda: ledger.receipts.verify(receipt_id, "acme")) == free
