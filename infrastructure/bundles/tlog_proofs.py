"""A ``mace-bundle/3``'s inclusion evidence: a C2SP tlog-proof per record (`domain.tlog_proof`).

The bundle's ``checkpoint`` member is ``{"vkey", "proofs"}``: the verifier key of the ledger's
checkpoint notes (``mace checkpoint public-key --vkey``), and for each record, in the order of
``records``, its tlog-proof as text (null for a redacted record, whose stored bytes the bundle
does not hold). Each proof's extra line is the record's leaf data, its index the record's place
in the log, its checkpoint the note ``mace checkpoint export --note`` writes (with whatever
cosignatures that carries), so each proof also checks on its own: ``mace proof verify``, or
Go's ``tlog.CheckRecord`` over ``tlog.RecordHash(extra)`` and ``note.Open``.

Checking a proof, in the spec's order: the note is signed by the verifier key for its origin
(`verified_checkpoint`: where a witness policy over its cosignatures belongs too); the inclusion
path leads from SHA-256(0x00 || extra) at the index to the note's root (`proven_entry`); in a
bundle, the extra is the record's own leaf data (`checked_tlog_proofs`). Each failure is
``INTEGRITY_FAILURE``; a proof or note that is not one is bad input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from domain.checkpoint import leaf_data
from domain.checkpoint_note import SignedNote, VerifierKey, parse_note, parse_vkey
from domain.errors import ErrorCode, IntegrityFailure, InvalidInput, MaceError
from domain.merkle import leaf_hash, verify_inclusion
from domain.tlog_proof import TlogProof, parse_tlog_proof
from infrastructure.application.checkpoints import (
    CheckpointBody,
    CheckpointService,
    PublicCheckpointKey,
    checked_note,
    event_key,
    vkey_public_key,
)
from infrastructure.bundles.inclusion import (
    Inclusion,
    ProvenIn,
    Record,
    checked_pin,
    inclusion_of,
    integrity_failure,
    proven_records,
)


class TlogProofMember(BaseModel):
    """A ``mace-bundle/3``'s ``checkpoint`` member."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vkey: str
    proofs: list[str | None]


# --- export --------------------------------------------------------------------------------------


def tlog_proof_member(
    checkpoints: CheckpointService, records: Sequence[Record], configured_origin: str | None
) -> dict[str, Any]:
    """The member that proves ``records``, checkpointing first if the newest does not cover
    them; ``configured_origin``: ``MACE_LOG_ORIGIN``, if set."""
    provable = [record for record, redacted in records if not redacted]
    newest, proofs = checkpoints.proofs_of(provable)
    origin = checkpoints.log_origin(configured_origin)
    note = checkpoints.note(newest, origin).encoded()
    made = iter(proofs)
    texts: list[str | None] = []
    for record, redacted in records:
        if redacted:
            texts.append(None)
            continue
        proof = next(made)
        stream, version = event_key(record)
        assert isinstance(record.topic, str)
        entry = leaf_data(stream, version, record.topic, record.state)
        texts.append(TlogProof(proof.leaf_index, proof.hashes, note, entry).encoded().decode())
    return {"vkey": checkpoints.verifier_key(origin).encoded(), "proofs": texts}


# --- checking ------------------------------------------------------------------------------------


def verified_checkpoint(note: SignedNote, vkey: VerifierKey, source: str) -> CheckpointBody:
    """The checkpoint a proof's note states, once ``vkey`` signed it for its origin."""
    try:
        return checked_note(note, vkey, source)
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: its checkpoint: {exc}") from None


def proven_entry(proof: TlogProof, body: CheckpointBody, source: str) -> bytes:
    """The entry (the extra data) ``proof`` puts at its index of ``body``'s tree, once its path
    leads there; ``INTEGRITY_FAILURE`` naming ``source`` if it does not."""
    assert proof.extra is not None
    size, index = body.tree_size, proof.index
    if 0 <= index < size and verify_inclusion(
        leaf_hash(proof.extra), index, size, proof.path, body.root
    ):
        return proof.extra
    reason = (
        f"entry {index} is not included in {body.origin}'s checkpoint (size {size}): its"
        " inclusion path does not lead to the checkpoint's root"
    )
    raise MaceError(ErrorCode.INTEGRITY_FAILURE, f"{source}: {reason}", reason=reason)


def checked_tlog_proofs(
    name: str,
    member: TlogProofMember,
    records: Sequence[Record],
    pinned: PublicCheckpointKey | VerifierKey | None,
) -> Inclusion:
    """Check every record's tlog-proof under the pinned key (a PEM key: the bundle's origin; a
    verifier key: its own), or the bundle's own unpinned; INTEGRITY_FAILURE if any fails."""
    vkey = _verifier_key(name, member.vkey, pinned)
    key = vkey_public_key(vkey)
    note = b""
    body: CheckpointBody | None = None
    for record, text in proven_records(name, records, member.proofs):
        stream, version = event_key(record)
        which = f"the tlog-proof of stream {stream} version {version}"
        source = f"bundle {name}: {which}"
        try:
            proof = parse_tlog_proof(text.encode("utf-8"))
            signed = parse_note(proof.note) if body is None else None
        except InvalidInput as exc:
            raise InvalidInput(f"{source}: {exc}") from None
        if signed is not None:
            # One checkpoint proves the whole bundle: its note is checked once.
            body, note = verified_checkpoint(signed, vkey, f"bundle {name}"), proof.note
        elif proof.note != note:
            raise integrity_failure(name, f"{which} holds another checkpoint than the others")
        assert body is not None
        if proof.extra is None:
            raise IntegrityFailure(stream, version, "its tlog-proof names no entry (no extra line)")
        proven = proven_entry(proof, body, source)
        assert isinstance(record.topic, str)
        if proven != leaf_data(stream, version, record.topic, record.state):
            reason = (
                f"its bytes are not the entry its tlog-proof proves (entry {proof.index} of"
                f" {body.origin}): the record was changed, or the proof is another record's"
            )
            raise IntegrityFailure(stream, version, reason)
    if body is None:  # every record redacted: no proof to name the checkpoint
        return Inclusion(None, key.key_id, pinned is not None, 0, len(records))
    proven_in = ProvenIn(body.tree_size, body.root.hex(), origin=body.origin)
    return inclusion_of(proven_in, key, pinned is not None, records)


def _verifier_key(
    name: str, carried: str, pinned: PublicCheckpointKey | VerifierKey | None
) -> VerifierKey:
    if isinstance(pinned, VerifierKey):
        return pinned
    try:
        vkey = parse_vkey(carried)
        key = vkey_public_key(vkey)
    except InvalidInput as exc:
        raise integrity_failure(name, f"its checkpoint {exc}") from None
    checked_pin(name, key, pinned)
    return vkey
