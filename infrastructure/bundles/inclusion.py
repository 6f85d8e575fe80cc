"""What a bundle's checkpoint proves: its records are in the ledger's signed checkpoint tree.

A ``mace-bundle/3`` file carries, in its ``checkpoint`` member, a C2SP tlog-proof per record
(`infrastructure.bundles.tlog_proofs`). A ``mace-bundle/2`` file, read still, carries the newest
checkpoint when it was exported, in the export form (`SignedCheckpoint.exported`), the checkpoint
public key (PEM), and for each record, in the order of ``records``, its leaf position and RFC 9162
inclusion proof (``proofs``); this module checks those. Either way a reader recomputes each
record's leaf from the record's own bytes (`domain.checkpoint.leaf_data`), so a proof that holds
shows the ledger held exactly those bytes, at that place in its log, when the checkpoint was
signed. It needs no HMAC secret: an attacker holding the ledger's HMAC keys can rewrite a record
and re-sign the bundle, not forge the proof.

The key in a bundle vouches only for itself: whoever rewrote the bundle could have signed a
checkpoint of their own. A reader who pins the ledger's public key (``--public-key``) closes
that; without a pin the report says the key was the bundle's own, unpinned.

A redacted record has no proof (null): its stored bytes are not in the bundle, so its leaf cannot
be recomputed. A ``mace-bundle/1`` file has no checkpoint, and nothing in it is reported as
included.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from eventsourcing.persistence import StoredEvent
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from domain.checkpoint import Checkpoint, SignedCheckpoint, decoded
from domain.errors import ErrorCode, IntegrityFailure, InvalidInput, MaceError
from infrastructure.application.checkpoints import (
    InclusionProof,
    PublicCheckpointKey,
    check_inclusion,
    event_key,
    public_key_from_pem,
    signature_problem,
)

NO_CHECKPOINT = "not provable: no checkpoint"

Proof = TypeVar("Proof")

Record = tuple[StoredEvent, bool]
"""A bundle's record as stored (or as redacted), and whether it was redacted."""


def integrity_failure(name: str, reason: str) -> MaceError:
    return MaceError(ErrorCode.INTEGRITY_FAILURE, f"bundle {name}: {reason}", bundle=name)


# --- the member's shape --------------------------------------------------------------------------


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProofEntry(_Shape):
    leaf_index: StrictInt = Field(ge=0)
    hashes: list[Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]]


class ExportedCheckpoint(_Shape):
    algorithm: Literal["ed25519"]
    key_id: str
    checkpoint: Checkpoint
    signature: str


class CheckpointMember(_Shape):
    signed: ExportedCheckpoint
    public_key: str
    proofs: list[ProofEntry | None]


# --- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProvenIn:
    """The signed checkpoint a bundle's records were proven in: a ``mace-bundle/2``'s is named
    by its number, a tlog-proof's by its log's origin (the note signs no number)."""

    tree_size: int
    root: str
    number: int | None = None
    origin: str | None = None

    def named(self) -> str:
        which = f"{self.origin}'s checkpoint" if self.origin else f"checkpoint {self.number}"
        return f"{which} (size {self.tree_size}, root {self.root})"


@dataclass(frozen=True)
class Inclusion:
    """What a bundle's checkpoint was found to prove of its records."""

    checkpoint: ProvenIn | None
    key_id: str | None
    pinned: bool
    included: int
    not_provable: int

    def facts(self) -> dict[str, Any]:
        """The report's fields (``checkpoint`` in a bundle replay's or import's JSON)."""
        body = self.checkpoint
        return {
            "included": body is not None,
            "number": None if body is None else body.number,
            "origin": None if body is None else body.origin,
            "tree_size": None if body is None else body.tree_size,
            "root": None if body is None else body.root,
            "key_id": self.key_id,
            "key_pinned": self.pinned,
            "records_included": self.included,
            "records_not_provable": self.not_provable,
            "summary": self.summary(),
        }

    def summary(self) -> str:
        body = self.checkpoint
        if body is None:
            return NO_CHECKPOINT
        text = f"included in {body.named()}: {self.included} records"
        if self.not_provable:
            text += f", {self.not_provable} redacted records not provable (bytes not in bundle)"
        if self.pinned:
            return f"{text}; checkpoint key {self.key_id} pinned"
        return f"{text}; checkpoint key {self.key_id} is the bundle's own, unpinned"


def checked_pin(
    name: str, key: PublicCheckpointKey, pinned: PublicCheckpointKey | None
) -> PublicCheckpointKey:
    """``key``, the bundle's checkpoint key, once it is the pinned one (if one is pinned)."""
    if pinned is not None and key.pem != pinned.pem:
        reason = f"its checkpoint key {key.key_id} is not the pinned key {pinned.key_id}"
        raise integrity_failure(name, reason)
    return key


def proven_records(
    name: str, records: Sequence[Record], proofs: Sequence[Proof | None]
) -> Iterator[tuple[StoredEvent, Proof]]:
    """Each record that must carry a proof, with it: one proof per record, in order, none for
    (and only for) a redacted one; INTEGRITY_FAILURE otherwise."""
    if len(proofs) != len(records):
        reason = f"holds {len(proofs)} inclusion proofs for {len(records)} records"
        raise integrity_failure(name, reason)
    for (record, redacted), proof in zip(records, proofs, strict=True):
        if redacted != (proof is None):
            stream, version = event_key(record)
            reason = "redacted, yet it has an inclusion proof" if redacted else "no inclusion proof"
            raise IntegrityFailure(stream, version, reason)
        if proof is not None:
            yield record, proof


def inclusion_of(
    proven: ProvenIn, key: PublicCheckpointKey, pinned: bool, records: Sequence[Record]
) -> Inclusion:
    """What proving ``records`` in ``proven`` under ``key`` found."""
    redacted = sum(redacted for _, redacted in records)
    return Inclusion(proven, key.key_id, pinned, len(records) - redacted, redacted)


def checked_inclusion(
    name: str,
    member: CheckpointMember | None,
    records: Sequence[Record],
    pinned: PublicCheckpointKey | None,
) -> Inclusion:
    """A ``mace-bundle/2`` member: check the checkpoint's signature and every record's proof;
    INTEGRITY_FAILURE if any fails."""
    if member is None:
        return Inclusion(None, None, False, 0, len(records))
    try:
        key = public_key_from_pem(member.public_key)
    except InvalidInput as exc:
        raise integrity_failure(name, f"its checkpoint {exc}") from None
    checked_pin(name, key, pinned)
    body = member.signed.checkpoint
    signed = SignedCheckpoint(body, member.signed.key_id, decoded(member.signed.signature))
    problem = signature_problem(signed, key)
    if problem is not None:
        raise integrity_failure(name, problem)
    for record, entry in proven_records(name, records, member.proofs):
        proof = InclusionProof(entry.leaf_index, tuple(bytes.fromhex(h) for h in entry.hashes))
        check_inclusion(body, record, proof)
    proven = ProvenIn(body.tree_size, body.root, number=body.number)
    return inclusion_of(proven, key, pinned is not None, records)
