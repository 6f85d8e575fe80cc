"""What a bundle's checkpoint proves: its records are in the ledger's signed checkpoint tree.

A ``mace-bundle/2`` file carries a ``checkpoint`` member: the newest checkpoint when it was
exported, in the export form (`SignedCheckpoint.exported`), the checkpoint public key (PEM), and
for each record, in the order of ``records``, its leaf position and RFC 9162 inclusion proof
(``proofs``). A reader recomputes each record's leaf from the record's own bytes
(`domain.checkpoint.leaf_data`), so a proof that holds shows the ledger held exactly those bytes,
at that place in its log, when the checkpoint was signed. It needs no HMAC secret: an attacker
holding the ledger's HMAC keys can rewrite a record and re-sign the bundle, not forge the proof.

The key in a bundle vouches only for itself: whoever rewrote the bundle could have signed a
checkpoint of their own. A reader who pins the ledger's public key (``--public-key``) closes
that; without a pin the report says the key was the bundle's own, unpinned.

A redacted record has no proof (null): its stored bytes are not in the bundle, so its leaf cannot
be recomputed. A ``mace-bundle/1`` file has no checkpoint, and nothing in it is reported as
included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from eventsourcing.persistence import StoredEvent
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from domain.checkpoint import Checkpoint, SignedCheckpoint, decoded
from domain.errors import ErrorCode, IntegrityFailure, InvalidInput, MaceError
from infrastructure.application.checkpoints import (
    CheckpointService,
    InclusionProof,
    PublicCheckpointKey,
    check_inclusion,
    event_key,
    public_key_from_pem,
    signature_problem,
)

NO_CHECKPOINT = "not provable: no checkpoint"

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


# --- export --------------------------------------------------------------------------------------


def checkpoint_member(checkpoints: CheckpointService, records: Sequence[Record]) -> dict[str, Any]:
    """The member that proves ``records``, checkpointing first if the newest does not cover them."""
    provable = [record for record, redacted in records if not redacted]
    newest, proofs = checkpoints.proofs_of(provable)
    made = iter(proofs)
    return {
        "signed": newest.exported(),
        "public_key": checkpoints.public_key.pem,
        "proofs": [None if redacted else _entry(next(made)) for _, redacted in records],
    }


def _entry(proof: InclusionProof) -> dict[str, Any]:
    return {"leaf_index": proof.leaf_index, "hashes": [h.hex() for h in proof.hashes]}


# --- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Inclusion:
    """What a bundle's checkpoint was found to prove of its records."""

    checkpoint: Checkpoint | None
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
        text = (
            f"included in checkpoint {body.number} (size {body.tree_size}, root {body.root}):"
            f" {self.included} records"
        )
        if self.not_provable:
            text += f", {self.not_provable} redacted records not provable (bytes not in bundle)"
        if self.pinned:
            return f"{text}; checkpoint key {self.key_id} pinned"
        return f"{text}; checkpoint key {self.key_id} is the bundle's own, unpinned"


def checked_inclusion(
    name: str,
    member: CheckpointMember | None,
    records: Sequence[Record],
    pinned: PublicCheckpointKey | None,
) -> Inclusion:
    """Check the checkpoint's signature and every record's proof; INTEGRITY_FAILURE if any fails."""
    if member is None:
        return Inclusion(None, None, False, 0, len(records))
    try:
        key = public_key_from_pem(member.public_key)
    except InvalidInput as exc:
        raise integrity_failure(name, f"its checkpoint {exc}") from None
    if pinned is not None and key.pem != pinned.pem:
        reason = f"its checkpoint key {key.key_id} is not the pinned key {pinned.key_id}"
        raise integrity_failure(name, reason)
    body = member.signed.checkpoint
    signed = SignedCheckpoint(body, member.signed.key_id, decoded(member.signed.signature))
    problem = signature_problem(signed, key)
    if problem is not None:
        raise integrity_failure(name, problem)
    if len(member.proofs) != len(records):
        reason = f"holds {len(member.proofs)} inclusion proofs for {len(records)} records"
        raise integrity_failure(name, reason)
    for (record, redacted), entry in zip(records, member.proofs, strict=True):
        if redacted != (entry is None):
            stream, version = event_key(record)
            reason = "redacted, yet it has an inclusion proof" if redacted else "no inclusion proof"
            raise IntegrityFailure(stream, version, reason)
        if entry is not None:
            proof = InclusionProof(entry.leaf_index, tuple(bytes.fromhex(h) for h in entry.hashes))
            check_inclusion(body, record, proof)
    redacted_count = sum(redacted for _, redacted in records)
    return Inclusion(
        body, key.key_id, pinned is not None, len(records) - redacted_count, redacted_count
    )
