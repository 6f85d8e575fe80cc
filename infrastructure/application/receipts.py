"""Use cases for retrieval receipts: emit (context, handoff), read, list, verify and replay.

Emission and replay share one path: `assemble_context` over a memory log, then `_record`; only
their inputs differ (the bundle in force or the frozen one, the memory log now or at the receipt's
position). A replay never writes to the original receipt or to the memories.

Reads for ``verify`` and ``replay`` take a receipt's stored record as it is: if the ledger's MAC
over the record fails (the row was edited in the database), its body is still decoded, untrusted,
so the caller learns *why* it cannot be trusted (``record_mac_mismatch``, ``invalid_snapshot``)
instead of a bare integrity failure. Nothing from such a body is ever replayed.

What a reader is shown of a receipt (an emission's answer, a read, a replay's diff) goes through
one rule, `projections.redaction.shown_receipt`: personal data the memories held when the receipt
was emitted (a store written before memory writes refused it) in full to an admin only, to anyone
else ``[REDACTED:pii]``, as a tenant's memories are shown. A receipt is stored, signed, verified
and replayed as it was emitted; only the answer is redacted.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any, Final

import orjson
from eventsourcing.persistence import PersistenceError

from domain.canonical import digest
from domain.context_assembly import (
    AssembledContext,
    ContextCaller,
    ContextRequest,
    assemble_context,
)
from domain.errors import IntegrityFailure, InvalidInput, RefusedWrite, StoreBusyError
from domain.governance import Actor, require_any
from domain.job import DEFAULT_TENANT, validate_tenant
from domain.memories import TENANT_PRIVACY, MemoryLog
from domain.policy import PolicyBundle, parse_bundle
from domain.receipt import (
    RECEIPT_ID_PATTERN,
    RECEIPT_REPLAYERS,
    MemoryView,
    Receipt,
    ReceiptKind,
    ReceiptMode,
    frozen_bundle,
    policy_snapshot,
    receipt_body,
    receipt_id_for,
)
from infrastructure.application.memories import MemoryService
from infrastructure.application.policy import PolicyService
from infrastructure.application.read_model_sync import ReadModels
from infrastructure.application.tenancy import StandIn, require_holder
from infrastructure.storage.checkpoints.removed_keys import AlteredUnderUnknownKey
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.keys.receipt_signing import (
    Verdict,
    VerifyReason,
    sign_receipt,
    verify_receipt,
)
from infrastructure.storage.ops_clock import recorded_at
from infrastructure.storage.records.integrity import verify_stream
from infrastructure.storage.records.signed_record import UnknownSigningKey, unverified_body
from infrastructure.storage.store import LedgerStore
from projections.receipts import receipt_diff
from projections.redaction import shown_receipt

log = logging.getLogger(__name__)

LIST_LIMIT: Final = 500
NOT_WRITTEN: Final = (
    "the receipt was not written (the store refused it): this answer has no receipt id"
    " and no signature"
)


@lru_cache(maxsize=64)
def _loaded(bundle_yaml: str) -> PolicyBundle:
    return parse_bundle(bundle_yaml)


@dataclass(frozen=True, slots=True)
class StoredReceipt:
    """A receipt as stored; ``failure`` says why its record did not verify (None: it did)."""

    body: dict[str, Any]
    signature: str | None
    failure: IntegrityFailure | None = None

    @property
    def intact(self) -> bool:
        return self.failure is None

    @property
    def alteration(self) -> VerifyReason | None:
        """Why its record is known to be edited in the database: its MAC failed under a key this
        keyring holds, or the newest checkpoint holds other bytes where it stands under a key id
        the keyring lacks. None when it verified, or nothing can tell (`UnknownSigningKey`)."""
        if self.failure is None or isinstance(self.failure, UnknownSigningKey):
            return None
        if isinstance(self.failure, AlteredUnderUnknownKey):
            return VerifyReason.RECORD_ALTERED
        return VerifyReason.RECORD_MAC_MISMATCH


@dataclass(frozen=True, slots=True)
class Assembly:
    """What one assembly is made of; a replay changes the bundle, memories and lineage."""

    kind: ReceiptKind
    tenant: str
    caller: ContextCaller
    request: ContextRequest
    handoff: dict[str, Any] | None


class ReceiptService:
    def __init__(
        self,
        store: LedgerStore,
        memories: MemoryService,
        policy: PolicyService,
        read_models: ReadModels,
    ) -> None:
        self.store = store
        self.memories = memories
        self.policy = policy
        self.read_models = read_models
        self._stand_in = StandIn(store, partial(_stand_in_receipt, store.keyring))

    # Emission

    def emit(self, assembly: Assembly) -> dict[str, Any]:
        """Assemble a context under the bundle in force now and record its signed receipt.

        The answer is the receipt as `get` answers it to the assembly's caller (to whom the
        context is handed): ``{"receipt": body, "signature": hex, "redacted": bool}``, or, when
        the receipt cannot be written, the unsigned body with a ``warning`` (see `_record`).
        """
        validate_tenant(assembly.tenant)
        book = self.policy.bundle_in_force(assembly.tenant)
        captured_at = recorded_at()
        if book is None or book.bundle_yaml is None:
            snapshot = policy_snapshot(None, None, captured_at)
            bundle = None
        else:
            snapshot = policy_snapshot(book.bundle_yaml, book.bundle_hash, captured_at)
            bundle = _loaded(book.bundle_yaml)
        memory_log = self.memories.log(assembly.tenant)
        context = _assembled(memory_log, assembly, bundle)
        emitted = self._record(
            assembly, context, _position(memory_log), MemoryView.CURRENT, snapshot, None, None
        )
        caller = Actor(assembly.caller.caller_id, assembly.caller.roles)
        return _shown(caller, emitted, emitted["receipt"])

    def _record(
        self,
        assembly: Assembly,
        context: AssembledContext,
        memory_position: int,
        memory_view: MemoryView,
        snapshot: dict[str, Any] | None,
        parent: str | None,
        replayed_by: Actor | None,
    ) -> dict[str, Any]:
        """Name, sign and store one receipt: its stream is the only one the write touches.

        Its id is seed 004 D3 over the body it has before it has one (`receipt_id_for`); only the
        same answer emitted twice in one second makes the same id, and the second write then
        counts on, re-signs and tries again.

        Fail-open (seed 001: serving is never blocked by the audit write): if the store refuses
        the write, the assembly is answered all the same, logged in one line, as
        ``{"receipt": body, "signature": None, "warning": NOT_WRITTEN}`` with the body's
        ``receipt_id`` and ``signature`` null. Only the write: the reads the assembly needed are
        done before, and fail closed.
        """
        body_of = partial(
            receipt_body,
            kind=assembly.kind,
            tenant=assembly.tenant,
            mode=ReceiptMode.LIVE if parent is None else ReceiptMode.AS_OF_REPLAY,
            parent_receipt_id=parent,
            caller=assembly.caller,
            request=assembly.request,
            handoff=assembly.handoff,
            memory_position=memory_position,
            memory_view=memory_view,
            context=context,
            snapshot=snapshot,
            replayed_by=None
            if replayed_by is None
            else ContextCaller(replayed_by.actor_id, replayed_by.roles),
        )

        def attempt() -> dict[str, Any]:
            signed_by = partial(
                body_of, emitted_at=recorded_at(), key_id=self.store.keyring.active_key_id
            )
            content = digest(signed_by(receipt_id=None))
            count = 0
            while self.store.stream_exists(
                Receipt.id_for(receipt_id := receipt_id_for(assembly.tenant, content, count))
            ):
                count += 1
            body = signed_by(receipt_id=receipt_id)
            signature = sign_receipt(self.store.keyring, body)
            self.store.save(Receipt.emit(body, signature))
            return {"receipt": body, "signature": signature}

        try:
            return self.store.racing(attempt, f"receipt for tenant {assembly.tenant}")
        except (PersistenceError, StoreBusyError, RefusedWrite) as exc:
            what = (
                f"{assembly.kind.value} for tenant {assembly.tenant}: the receipt"
                if parent is None
                else f"replay of receipt {parent}: the replay receipt"
            )
            log.warning("%s was not written (%s); answering without it", what, exc)
        unsigned = body_of(receipt_id=None, emitted_at=recorded_at(), key_id=None)
        return {"receipt": unsigned, "signature": None, "warning": NOT_WRITTEN}

    # Reading

    def stored(self, receipt_id: str, tenant: str) -> StoredReceipt:
        """The receipt as stored, verified if it can be; NotFoundError if absent or foreign."""
        what = f"receipt {receipt_id}"
        receipt = self._read(receipt_id) if RECEIPT_ID_PATTERN.fullmatch(receipt_id) else None
        require_holder(tenant, None if receipt is None else receipt.body.get("tenant"), what)
        assert receipt is not None
        return receipt

    def _read(self, receipt_id: str) -> StoredReceipt | None:
        stream = Receipt.id_for(receipt_id)
        records = self.store.recorder.select_events(stream)
        # Another tenant's receipt is checked and decoded to read its tenant: a free id's
        # lookup takes the same steps over a stand-in, which costs the same (`tenancy.StandIn`).
        checked = self._stand_in.records(records)
        try:
            verified = verify_stream(self.store.keyring, checked[0].originator_id, checked)
        except IntegrityFailure as failure:  # never the stand-in's: this process signed it
            return _untrusted(records[0].state, failure)
        event = self.store.verifying_store.signed_mapper.decode(verified[0])
        assert isinstance(event, Receipt.Emitted)
        return StoredReceipt(event.body, event.signature) if records else None

    def get(self, receipt_id: str, tenant: str, reader: Actor | None) -> dict[str, Any]:
        """The receipt and its signature as ``reader`` (None: anonymous) may see it (`_shown`);
        IntegrityFailure if its record does not verify."""
        receipt = self.stored(receipt_id, tenant)
        failure = receipt.failure
        if failure is not None:
            raise IntegrityFailure(failure.stream, 1, f"receipt {receipt_id}: {failure.reason}")
        return _shown(
            reader, {"receipt": receipt.body, "signature": receipt.signature}, receipt.body
        )

    def verify(self, receipt_id: str, tenant: str) -> Verdict:
        return self._verdict(self.stored(receipt_id, tenant))

    def _verdict(self, receipt: StoredReceipt) -> Verdict:
        return verify_receipt(
            self.store.keyring,
            receipt.body,
            receipt.signature,
            altered=receipt.alteration,
        )

    def listing(
        self, tenant: str, parent: str | None = None, after: int = -1, limit: int = 100
    ) -> list[dict[str, Any]]:
        """A tenant's receipts in emission order, numbered; ``parent`` keeps its replays only."""
        if not 1 <= limit <= LIST_LIMIT:
            msg = f"limit: expected 1 to {LIST_LIMIT}, got {limit}"
            raise InvalidInput(msg)
        rows: list[dict[str, Any]] = []
        while len(rows) < limit:
            page = self.read_models.receipt_entries(validate_tenant(tenant), after, LIST_LIMIT)
            for entry in page:
                after = entry["number"]
                if parent is None or entry["parent_receipt_id"] == parent:
                    rows.append(self._row(entry))
                    if len(rows) == limit:
                        break
            if len(page) < LIST_LIMIT:
                break
        return rows

    def _row(self, entry: dict[str, Any]) -> dict[str, Any]:
        receipt_id = entry["receipt_id"]
        receipt = self._read(receipt_id)
        if receipt is None:  # the index names it, so the store lost it: not a row to skip quietly
            raise IntegrityFailure(Receipt.id_for(receipt_id), 1, "receipt is missing")
        body = receipt.body
        return {
            "number": entry["number"],
            "receipt_id": receipt_id,
            "parent_receipt_id": entry["parent_receipt_id"],
            "kind": body.get("kind"),
            "mode": body.get("mode"),
            "emitted_at": body.get("emitted_at"),
            "context_hash": body.get("context_hash"),
            "intact": receipt.intact,
        }

    # Replay

    def replay(
        self, receipt_id: str, tenant: str, replayed_by: Actor, memory_view: MemoryView
    ) -> dict[str, Any]:
        """Re-run the receipt's assembly under its frozen bundle; the diff envelope, as
        ``replayed_by`` may see it (`_shown`: the diff is made from the stored receipts).

        Unreplayable (with its seed 001 code) when the receipt cannot be replayed. If the replay
        receipt cannot be written, the envelope is still answered (fail-open, seed 001) with a
        null ``replay_receipt_id``: serving is never blocked by the audit write.
        AccessDenied, before anything is read or written, unless ``replayed_by`` holds one of
        `RECEIPT_REPLAYERS`.
        """
        require_any(replayed_by, RECEIPT_REPLAYERS)
        stored = self.stored(receipt_id, tenant)
        verdict = self._verdict(stored)
        bundle = frozen_bundle(stored.body, verdict.reason.value)
        original = stored.body
        assembly = Assembly(
            kind=ReceiptKind(original["kind"]),
            tenant=tenant,
            caller=ContextCaller(original["caller"]["id"], tuple(original["caller"]["roles"])),
            request=ContextRequest(**original["request"]),
            handoff=original["handoff"],
        )

        position = original["memory"]["log_position"]
        memory_log = self.memories.log(
            tenant, position if memory_view is MemoryView.AS_EMITTED else None
        )
        context = _assembled(memory_log, assembly, bundle)
        replay = self._record(
            assembly,
            context,
            _position(memory_log),
            memory_view,
            original["policy_snapshot"],
            receipt_id,
            replayed_by,
        )["receipt"]
        written = replay["receipt_id"] is not None
        envelope = {
            "original_receipt_id": receipt_id,
            "replay_receipt_id": replay["receipt_id"],
            # Not written: every original entry is listed as removed (seed 001).
            "diff": receipt_diff(original, replay if written else None),
        }
        return _shown(replayed_by, envelope, original, replay)


def _shown(reader: Actor | None, answer: dict[str, Any], *bodies: dict[str, Any]) -> dict[str, Any]:
    """``answer``, made from the stored receipt ``bodies``, as ``reader`` may see it: memories
    are held to the tenant privacy rule (`domain.memories.TENANT_PRIVACY`), and so are the
    receipts of what they held."""
    return shown_receipt(reader, answer, bodies, TENANT_PRIVACY.deny_sem_attributes)


def _assembled(
    memory_log: MemoryLog | None, assembly: Assembly, bundle: PolicyBundle | None
) -> AssembledContext:
    """`assemble_context` over a memory log as loaded (None: the tenant has no memories)."""
    memories = [] if memory_log is None else memory_log.live()
    return assemble_context(memories, assembly.request, assembly.caller, bundle)


def _position(memory_log: MemoryLog | None) -> int:
    return 0 if memory_log is None else memory_log.version


def _stand_in_receipt(keyring: Keyring) -> Receipt:
    """A signed receipt of an assembly that found nothing, never stored: what the lookup of a
    free id checks and decodes in place of another tenant's receipt (`tenancy.StandIn`)."""
    body = receipt_body(
        receipt_id="rct-" + "0" * 32,
        kind=ReceiptKind.CONTEXT,
        tenant=DEFAULT_TENANT,
        mode=ReceiptMode.LIVE,
        parent_receipt_id=None,
        caller=ContextCaller("stand-in", ("operator",)),
        request=ContextRequest("stand in"),
        handoff=None,
        memory_position=0,
        memory_view=MemoryView.CURRENT,
        context=AssembledContext([], [], digest([])),
        snapshot=None,
        emitted_at="1970-01-01T00:00:00Z",
        replayed_by=None,
        key_id=keyring.active_key_id,
    )
    return Receipt.emit(body, sign_receipt(keyring, body))


def _untrusted(state: bytes, failure: IntegrityFailure) -> StoredReceipt:
    """The body of a record that failed verification, decoded to say what is wrong with it."""
    stream = failure.stream
    try:
        fields = orjson.loads(unverified_body(state))
    except orjson.JSONDecodeError:
        raise IntegrityFailure(stream, 1, "receipt record is not readable") from None
    body = fields.get("body") if isinstance(fields, dict) else None
    if not isinstance(body, dict):
        raise IntegrityFailure(stream, 1, "receipt record holds no body")
    signature = fields.get("signature")
    signed = signature if isinstance(signature, str) else None
    return StoredReceipt(body, signed, failure)
