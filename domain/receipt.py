"""Receipts: the immutable record of one context assembly and the policy frozen on it (seed 001).

A receipt is emitted once and never changes; a replay of it is a new receipt pointing back through
``parent_receipt_id``. Everything a receipt says is in its ``body``, which is signed whole: the
signature's algorithm and key id are fields of the body, so neither can be swapped unnoticed.

``policy_snapshot`` is ``None`` only for a receipt that never captured one (seed 001: not
replayable); a captured "no bundle was active" is ``{"bundle_hash": None, "bundle_yaml": None,
"captured_at": ...}``. ``memory.log_position`` is the tenant's memory log version the assembly
saw, so a replay can load the memories exactly as they stood.

A receipt id is ``rct-`` and 32 hex digits of ``derive_id(tenant, "receipt", content, count)``
(seed 004 D3, `receipt_id_for`): ``content`` is the digest of the body before it has an id, so
emitting one writes no stream but its own. Each tenant's receipts in emission order are a read
model (the receipt index); stores written before kept them in a `ReceiptBook`. Like every MACE
id it is not a secret; reads are tenant-scoped, so knowing another tenant's receipt id shows
nothing (404, as for no receipt).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, Final

from eventsourcing.domain import event

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_copy
from domain.context_assembly import AssembledContext, ContextCaller, ContextRequest
from domain.determinism import derive_id
from domain.errors import InvalidInput
from domain.governance import Role
from domain.policy import PolicyBundle, PolicyError, parse_bundle

SIGNATURE_ALGORITHM: Final = "HMAC-SHA256"
RECEIPT_ID_PATTERN: Final = re.compile(r"^rct-[0-9a-f]{32}$")
POLICY_SNAPSHOT_KEYS: Final = frozenset({"bundle_hash", "bundle_yaml", "captured_at"})
BODY_KEYS: Final = frozenset(
    {
        "receipt_id",
        "kind",
        "tenant",
        "mode",
        "parent_receipt_id",
        "caller",
        "request",
        "handoff",
        "memory",
        "entries",
        "filters_applied",
        "context_hash",
        "policy_snapshot",
        "emitted_at",
        "replayed_by",
        "signature",
    }
)


RECEIPT_REPLAYERS: Final = (Role.AUDITOR, Role.ADMIN, Role.COUNCIL)
"""Who may replay a receipt, on every interface: a replay records a receipt of the tenant."""


class ReceiptKind(StrEnum):
    CONTEXT = "context"
    HANDOFF = "handoff"


class ReceiptMode(StrEnum):
    LIVE = "live"
    AS_OF_REPLAY = "as_of_replay"


class MemoryView(StrEnum):
    """Which memories a replay assembles over: today's (the seed's default) or the emitted ones."""

    CURRENT = "current"
    AS_EMITTED = "as_emitted"


def receipt_id_for(tenant: str, content: str, count: int) -> str:
    """Seed 004 D3 for a receipt: ``content`` is the digest of its body before it has an id,
    ``count`` how many receipts of the tenant with that digest came before (one per second at
    most, unless the same request is answered twice in one second)."""
    return "rct-" + derive_id(tenant, "receipt", content, count)[:32]


def policy_snapshot(
    bundle_yaml: str | None, bundle_hash: str | None, captured_at: str
) -> dict[str, Any]:
    """The frozen bundle; both halves null when no bundle was active."""
    if (bundle_yaml is None) != (bundle_hash is None):
        msg = "a policy snapshot has both the YAML and its hash, or neither"
        raise InvalidInput(msg)
    return {"bundle_hash": bundle_hash, "bundle_yaml": bundle_yaml, "captured_at": captured_at}


def receipt_body(
    *,
    receipt_id: str | None,
    kind: ReceiptKind,
    tenant: str,
    mode: ReceiptMode,
    parent_receipt_id: str | None,
    caller: ContextCaller,
    request: ContextRequest,
    handoff: dict[str, Any] | None,
    memory_position: int,
    memory_view: MemoryView,
    context: AssembledContext,
    snapshot: dict[str, Any] | None,
    emitted_at: str,
    replayed_by: ContextCaller | None,
    key_id: str | None,
) -> dict[str, Any]:
    """The whole body a receipt signs, in canonical form.

    ``receipt_id`` and ``key_id`` None: the body of an assembly whose receipt could not be stored,
    served with no id and unsigned (``signature`` null).
    """
    if snapshot is not None and set(snapshot) != POLICY_SNAPSHOT_KEYS:
        msg = f"policy_snapshot must have exactly the keys {sorted(POLICY_SNAPSHOT_KEYS)}"
        raise InvalidInput(msg)
    body = {
        "receipt_id": receipt_id,
        "kind": kind.value,
        "tenant": tenant,
        "mode": mode.value,
        "parent_receipt_id": parent_receipt_id,
        "caller": caller.as_json(),
        "request": request.as_json(),
        "handoff": handoff,
        "memory": {"log_position": memory_position, "view": memory_view.value},
        "entries": context.entries,
        "filters_applied": context.filters_applied,
        "context_hash": context.context_hash,
        "policy_snapshot": snapshot,
        "emitted_at": emitted_at,
        "replayed_by": None if replayed_by is None else replayed_by.as_json(),
        "signature": None
        if key_id is None
        else {"algorithm": SIGNATURE_ALGORITHM, "key_id": key_id},
    }
    return dict(canonical_copy(body))


class Receipt(MaceAggregate):
    NAME_PREFIX = "receipt"
    NAME_FIELD = "receipt_id"

    class Emitted(MaceAggregate.Created):
        receipt_id: str
        body: dict[str, Any]
        signature: str | None

    @classmethod
    def emit(cls, body: dict[str, Any], signature: str | None) -> Receipt:
        if set(body) != BODY_KEYS:
            msg = f"a receipt body has exactly the keys {sorted(BODY_KEYS)}"
            raise InvalidInput(msg)
        return cls(receipt_id=body["receipt_id"], body=canonical_copy(body), signature=signature)

    @event(Emitted)
    def __init__(self, receipt_id: str, body: dict[str, Any], signature: str | None) -> None:
        self.receipt_id = receipt_id
        self.body = body
        self.signature = signature


class ReceiptBook(MaceAggregate):
    """A tenant's receipts in emission order, as stores written before the receipt index was a
    read model keep them: every receipt entered, numbered, in the receipt's own transaction.

    Never written now (every receipt of a tenant raced for the book's next version); its events
    stay readable, and are verified with every other event, in the stores that have them.
    """

    class Opened(MaceAggregate.Created):
        tenant: str

    class Entered(MaceAggregate.Event):
        receipt_id: str
        parent_receipt_id: str | None
        number: int

    NAME_PREFIX = "receipt-book"
    NAME_FIELD = "tenant"

    @event(Opened)
    def __init__(self, tenant: str) -> None:
        self.tenant = tenant


class UnreplayableCode(StrEnum):
    """Why a receipt cannot be replayed (seed 001), checked in this order."""

    MISSING_POLICY_SNAPSHOT = "unreplayable.missing_policy_snapshot"
    NESTED_REPLAY = "unreplayable.nested_replay"
    INVALID_SNAPSHOT = "unreplayable.invalid_snapshot"


class Unreplayable(ValueError):
    def __init__(self, code: UnreplayableCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _snapshot_captured(body: dict[str, Any]) -> dict[str, Any]:
    snapshot = body.get("policy_snapshot")
    if snapshot is None:
        raise Unreplayable(
            UnreplayableCode.MISSING_POLICY_SNAPSHOT,
            "the receipt captured no policy snapshot: which bundle applied cannot be known",
        )
    return snapshot  # type: ignore[no-any-return]


def _not_a_replay(body: dict[str, Any]) -> None:
    if body.get("parent_receipt_id") is not None or body.get("mode") != ReceiptMode.LIVE:
        raise Unreplayable(
            UnreplayableCode.NESTED_REPLAY,
            f"the receipt is itself a replay of {body.get('parent_receipt_id')}: replay that one",
        )


def _bundle_of(snapshot: Any, verification: str) -> PolicyBundle | None:
    def invalid(why: str) -> Unreplayable:
        return Unreplayable(UnreplayableCode.INVALID_SNAPSHOT, f"the policy snapshot {why}")

    if not isinstance(snapshot, dict) or set(snapshot) != POLICY_SNAPSHOT_KEYS:
        raise invalid(f"must have exactly the keys {sorted(POLICY_SNAPSHOT_KEYS)}")
    bundle_yaml, bundle_hash = snapshot["bundle_yaml"], snapshot["bundle_hash"]
    bundle = None
    if bundle_yaml is not None or bundle_hash is not None:
        if not isinstance(bundle_yaml, str):
            raise invalid("has a bundle hash but no YAML")
        try:
            bundle = parse_bundle(bundle_yaml)
        except PolicyError as exc:
            raise invalid(f"does not load: {exc}") from None
        if bundle.bundle_hash != bundle_hash:
            raise invalid(f"hash {bundle_hash!r} is not the hash of its YAML")
    if verification != "ok":
        raise invalid(f"is on a receipt whose signature does not verify ({verification})")
    return bundle


def frozen_bundle(body: dict[str, Any], verification: str) -> PolicyBundle | None:
    """The bundle a receipt replays under (None: none was active), or why it cannot be replayed.

    ``verification`` is the receipt's signature verdict. The checks run in seed 001's order; a
    receipt that does not verify is refused as an invalid snapshot, whatever its YAML says.
    """
    snapshot = _snapshot_captured(body)
    _not_a_replay(body)
    return _bundle_of(snapshot, verification)


AGENT_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,127}$")
MAX_NOTE_CHARS: Final = 500


def handoff_of(to_agent: str, from_agent: str | None, note: str | None) -> dict[str, Any]:
    """What a handoff receipt says about the handover, or ValueError naming the bad field."""
    for name, agent in (("to_agent", to_agent), ("from_agent", from_agent)):
        if agent is not None and not AGENT_PATTERN.fullmatch(agent):
            msg = f"{name}: {agent!r} is not an agent id (1-128 of letters, digits and . _ @ : -)"
            raise InvalidInput(msg)
    if note is not None and (len(note) > MAX_NOTE_CHARS or not note.isprintable()):
        msg = f"note: expected at most {MAX_NOTE_CHARS} printable characters on one line"
        raise InvalidInput(msg)
    return {"from_agent": from_agent, "to_agent": to_agent, "note": note}
