"""Receipts: the immutable record of one retrieval decision and the policy frozen on it.

A receipt is emitted once and never changes; a replay of it is a new receipt pointing back through
``parent_receipt_id`` (seed 001). ``policy_snapshot`` is ``None`` only for a receipt that never
captured one; a captured "no bundle was active" is ``{"bundle_hash": None, "bundle_yaml": None,
"captured_at": ...}``.
"""

from __future__ import annotations

import re
from typing import Any

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_copy

RECEIPT_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
POLICY_SNAPSHOT_KEYS = frozenset({"bundle_hash", "bundle_yaml", "captured_at"})


class Receipt(MaceAggregate):
    NAME_PREFIX = "receipt"
    NAME_FIELD = "receipt_id"

    @classmethod
    def emit(
        cls,
        receipt_id: str,
        tenant: str,
        mode: str,
        body: dict[str, Any],
        policy_snapshot: dict[str, Any] | None,
        parent_receipt_id: str | None = None,
    ) -> Receipt:
        if not RECEIPT_ID_PATTERN.fullmatch(receipt_id):
            msg = f"invalid receipt id {receipt_id!r}"
            raise ValueError(msg)
        if policy_snapshot is not None and set(policy_snapshot) != POLICY_SNAPSHOT_KEYS:
            msg = f"policy_snapshot must have exactly the keys {sorted(POLICY_SNAPSHOT_KEYS)}"
            raise ValueError(msg)
        return cls(
            receipt_id=receipt_id,
            tenant=tenant,
            mode=mode,
            body=canonical_copy(body),
            policy_snapshot=None if policy_snapshot is None else canonical_copy(policy_snapshot),
            parent_receipt_id=parent_receipt_id,
        )

    @event("Emitted")
    def __init__(
        self,
        receipt_id: str,
        tenant: str,
        mode: str,
        body: dict[str, Any],
        policy_snapshot: dict[str, Any] | None,
        parent_receipt_id: str | None,
    ) -> None:
        self.receipt_id = receipt_id
        self.tenant = tenant
        self.mode = mode
        self.body = body
        self.policy_snapshot = policy_snapshot
        self.parent_receipt_id = parent_receipt_id
