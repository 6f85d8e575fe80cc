"""``mace context`` and ``mace handoff``: assemble a context from memories and emit its receipt.

The caller of the assembly is the acting identity (``MACE_ACTOR``, ``MACE_ROLES``): its id and
roles are what the policy bundle's ``caller*`` predicates see. Every assembly is recorded as a
signed receipt; ``--json`` prints it as ``{"receipt", "signature"}``. If the receipt cannot be
written, the context is printed all the same, unsigned and with no id (``--json`` adds
``warning``), a warning line goes to standard error and the command succeeds (fail-open).
"""

from __future__ import annotations

import argparse
from typing import Any

from domain.context_assembly import ContextCaller, ContextRequest
from domain.receipt import ReceiptKind, handoff_of
from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.application.settings import Settings
from infrastructure.cli.common import acting_actor, emit_json
from projections.receipt_text import receipt_lines


def emit_context(args: argparse.Namespace, settings: Settings) -> int:
    return _emit(args, settings, ReceiptKind.CONTEXT, None)


def emit_handoff(args: argparse.Namespace, settings: Settings) -> int:
    handoff = handoff_of(args.to_agent, args.from_agent, args.note)
    return _emit(args, settings, ReceiptKind.HANDOFF, handoff)


def _emit(
    args: argparse.Namespace,
    settings: Settings,
    kind: ReceiptKind,
    handoff: dict[str, Any] | None,
) -> int:
    actor = acting_actor(settings)
    request = ContextRequest(args.query, args.max_entries)
    caller = ContextCaller(actor.actor_id, actor.roles)
    with Ledger.open(settings, create=False) as ledger:
        emitted = ledger.receipts.emit(Assembly(kind, args.tenant, caller, request, handoff))
    if args.json:
        emit_json(emitted)
    else:
        print("\n".join(receipt_lines(emitted)))
    return EXIT_OK
