"""Receipt answers (seed 001): a signed receipt, the listing, a signature's verdict, a replay's
diff envelope."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, JsonValue

from domain.policy import Action, MemoryKind
from domain.receipt import MemoryView, ReceiptKind, ReceiptMode
from infrastructure.api.response_models import ResponseModel

VerdictReason = Literal[
    "ok",
    "record_mac_mismatch",
    "record_altered",
    "signature_mismatch",
    "key_unavailable",
    "no_signature",
    "unsupported_algorithm",
]
"""Why a receipt's signature verdict is what it is (the store's `VerifyReason`)."""


class ContextCallerShown(ResponseModel):
    """Who the context was assembled for (or who replayed it)."""

    id: str
    roles: list[str]


class ContextAsked(ResponseModel):
    query: str
    max_entries: int


class Handover(ResponseModel):
    from_agent: str | None
    to_agent: str
    note: str | None


class MemorySeen(ResponseModel):
    log_position: int = Field(description="the tenant's memory log position the assembly saw")
    view: MemoryView


class ContextEntry(ResponseModel):
    """One memory selected for the context, ranked; its content hidden when a rule redacts it."""

    memory_id: str
    kind: MemoryKind
    key: str | None
    content: JsonValue = Field(
        description="[REDACTED] when a rule redacted it; [REDACTED:pii] where it holds personal"
        " data and the caller is no admin"
    )
    labels: list[str]
    redacted: bool
    score: int
    rank: int
    position: int


class FilterApplied(ResponseModel):
    """A rule of the policy bundle that decided on a memory."""

    rule_id: str
    memory_id: str
    action: Action


class PolicySnapshot(ResponseModel):
    """The bundle frozen on the receipt; hash and YAML both null when none was in force."""

    bundle_hash: str | None
    bundle_yaml: str | None
    captured_at: str


class SignatureNamed(ResponseModel):
    algorithm: Literal["HMAC-SHA256"]
    key_id: str


class ReceiptBody(ResponseModel):
    """Everything a receipt says, signed whole."""

    receipt_id: str | None = Field(description="null: the receipt could not be written")
    kind: ReceiptKind
    tenant: str
    mode: ReceiptMode
    parent_receipt_id: str | None = Field(description="the receipt a replay receipt replays")
    caller: ContextCallerShown
    request: ContextAsked
    handoff: Handover | None = Field(description="a handoff receipt's handover; null otherwise")
    memory: MemorySeen
    entries: list[ContextEntry]
    filters_applied: list[FilterApplied]
    context_hash: str
    policy_snapshot: PolicySnapshot | None = Field(description="null: none was captured")
    emitted_at: str
    replayed_by: ContextCallerShown | None
    signature: SignatureNamed | None = Field(description="null: unsigned, not written")


REDACTED_FOR_READER = (
    "true: personal data was replaced by [REDACTED:pii] for this caller (not an admin); the"
    " signature is over the stored receipt, which /verify checks"
)


class SignedReceipt(ResponseModel):
    receipt: ReceiptBody
    signature: str | None = Field(description="hex HMAC-SHA256 of the body; null: not written")
    redacted: bool = Field(description=REDACTED_FOR_READER)


class AssembledReceipt(SignedReceipt):
    """A context (or handoff) and its signed receipt. Fail-open: when the receipt cannot be
    written, the body is unsigned, with no id, and ``warning`` says so."""

    warning: str | None = Field(
        default=None, description="present only when the receipt was not written"
    )


class ReceiptRow(ResponseModel):
    """One receipt of the listing, as its stored body says (``intact`` false: its record failed
    verification, and the other fields are what the altered body says)."""

    number: int
    receipt_id: str
    parent_receipt_id: str | None
    kind: str | None
    mode: str | None
    emitted_at: str | None
    context_hash: str | None
    intact: bool


class ReceiptListing(ResponseModel):
    receipts: list[ReceiptRow]


class ReceiptVerdict(ResponseModel):
    """Whether the receipt's signature holds: true, false, or null when it cannot be checked."""

    valid: bool | None
    key_id: str | None
    algorithm: str | None
    reason: VerdictReason


class HashChange(ResponseModel):
    original: str
    replay: str | None = Field(description="null: the replay receipt was not written")
    changed: bool


class EntryChanges(ResponseModel):
    added: list[ContextEntry]
    removed: list[ContextEntry]
    common: int


class FilterChanges(ResponseModel):
    added: list[FilterApplied]
    removed: list[FilterApplied]


class ReceiptDiff(ResponseModel):
    context_hash: HashChange
    selected_entries: EntryChanges
    filters_applied: FilterChanges


class ReceiptReplayed(ResponseModel):
    """The diff envelope from a receipt to its replay under the frozen bundle."""

    original_receipt_id: str
    replay_receipt_id: str | None = Field(description="null: the replay receipt was not written")
    diff: ReceiptDiff
    redacted: bool = Field(description=REDACTED_FOR_READER)
