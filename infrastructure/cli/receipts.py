"""``mace receipts list|show|verify|replay``: a tenant's retrieval receipts, checked and replayed.

An unknown receipt and another tenant's receipt are the same bad input (exit 2, ``no receipt ID``).
``replay`` acts as ``MACE_ACTOR``/``MACE_ROLES`` and is refused ``ACCESS_DENIED`` (exit 1,
nothing recorded) unless they hold a role the receipt use case lets replay, as over HTTP.
A receipt whose stored row was edited fails like any integrity failure (exit 1, ``show``), never
verifies (exit 1, ``verify``) and cannot be replayed (exit 1, ``unreplayable.invalid_snapshot``).
If a replay's own receipt cannot be written, the diff is printed anyway and the command succeeds
(fail-open, seed 001); the ledger logs a warning line on standard error. ``show`` (as
``MACE_ACTOR``/``MACE_ROLES``, anonymous when unset) and ``replay`` show personal data in full
only to an admin, as ``mace memories list`` does.
"""

from __future__ import annotations

import argparse

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.arguments.receipts import MEMORY_VIEWS
from infrastructure.cli.common import acting_actor, emit_json, reading_actor
from projections.receipt_text import diff_lines, receipt_lines


def list_receipts(args: argparse.Namespace, settings: Settings) -> int:
    if args.after < -1:
        raise InvalidInput(f"--after: expected a receipt number (0 or more), got {args.after}")
    with Ledger.open(settings, create=False) as ledger:
        rows = ledger.receipts.listing(args.tenant, args.parent, args.after, args.limit)
    if args.json:
        emit_json({"receipts": rows})
        return EXIT_OK
    if not rows:
        print(f"no receipts for tenant {args.tenant}")
    for row in rows:
        parent = "" if row["parent_receipt_id"] is None else f" of {row['parent_receipt_id']}"
        altered = "" if row["intact"] else " ALTERED"
        print(
            f"{row['number']} {row['receipt_id']} {row['kind']} {row['mode']}{parent}"
            f" {row['context_hash']} {row['emitted_at']}{altered}"
        )
    return EXIT_OK


def show_receipt(args: argparse.Namespace, settings: Settings) -> int:
    reader = reading_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        emitted = ledger.receipts.get(args.receipt_id, args.tenant, reader)
    if args.json:
        emit_json(emitted)
    else:
        print("\n".join(receipt_lines(emitted)))
    return EXIT_OK


def verify_receipt(args: argparse.Namespace, settings: Settings) -> int:
    with Ledger.open(settings, create=False) as ledger:
        verdict = ledger.receipts.verify(args.receipt_id, args.tenant)
    if args.json:
        emit_json(verdict.as_json())
    else:
        valid = {True: "valid", False: "INVALID", None: "cannot be checked"}[verdict.valid]
        print(
            f"receipt {args.receipt_id}: {valid} ({verdict.reason.value}),"
            f" key {verdict.key_id or '-'}, {verdict.algorithm or '-'}"
        )
    return EXIT_OK if verdict.valid is True else EXIT_FAILED


def replay_receipt(args: argparse.Namespace, settings: Settings) -> int:
    actor = acting_actor(settings)
    with Ledger.open(settings, create=False) as ledger:
        answer = ledger.receipts.replay(
            args.receipt_id, args.tenant, actor, MEMORY_VIEWS[args.memory]
        )
    if args.json:
        emit_json(answer)
    else:
        print("\n".join(diff_lines(answer)))
    return EXIT_OK
