"""``mace proof verify``'s reading: one tlog-proof file, or the proofs of a bundle, checked
against the ledger's verifier key with no store and no secret.

A tlog-proof file (`domain.tlog_proof`) must carry its entry in its extra line, as ``mace
export`` writes them: the entry is the stored record (stream, version, topic, stored bytes), so
a proof that holds says the log held exactly that record at that index when the key signed the
checkpoint. A bundle's proofs are checked against its own records (`checked_proofs`); its
manifest signature and the records' MACs need the ledger's HMAC keys and are not checked here
(``mace replay --bundle`` checks them), and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from domain.checkpoint import LeafRecord, parse_leaf_data
from domain.checkpoint_note import SignedNote, VerifierKey, parse_note
from domain.errors import InvalidInput
from domain.tlog_proof import parse_tlog_proof
from infrastructure.application.checkpoints import CheckpointBody
from infrastructure.bundles.format import FIRST_FORMAT, checked_proofs, read_shape
from infrastructure.bundles.inclusion import Inclusion
from infrastructure.bundles.tlog_proofs import proven_entry, verified_checkpoint


@dataclass(frozen=True)
class ProvenRecord:
    """What a verified tlog-proof file proves: its record is entry ``index`` of the checkpoint
    the verifier key signed. ``other_signatures``: the note's lines by other keys (witnesses'
    cosignatures), which no policy checked."""

    record: LeafRecord
    index: int
    checkpoint: CheckpointBody
    other_signatures: int


def verified_proof_file(path: Path, vkey: VerifierKey) -> ProvenRecord | Inclusion:
    """What the file proves, once every proof in it holds under ``vkey``; its form decides how
    it is read: a JSON object is a bundle, anything else a tlog-proof."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if data.lstrip()[:1] == b"{":
        return _bundle_proofs(data, str(path), vkey)
    return _proven_record(data, f"tlog-proof {path}", vkey)


def _proven_record(data: bytes, source: str, vkey: VerifierKey) -> ProvenRecord:
    try:
        proof = parse_tlog_proof(data)
        if proof.extra is None:
            raise InvalidInput(
                "it has no extra line, so the entry it proves is not in it: mace checks the"
                " proofs mace export writes, whose extra line is the record"
            )
        record = parse_leaf_data(proof.extra)
        note = parse_note(proof.note)
    except InvalidInput as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    body = verified_checkpoint(note, vkey, source)
    proven_entry(proof, body, source)
    return ProvenRecord(record, proof.index, body, _other_signatures(note, vkey))


def _other_signatures(note: SignedNote, vkey: VerifierKey) -> int:
    return sum(not signature.by(vkey) for signature in note.signatures)


def _bundle_proofs(data: bytes, name: str, vkey: VerifierKey) -> Inclusion:
    read = read_shape(data, name)
    if read.form == FIRST_FORMAT:
        raise InvalidInput(f"bundle {name} is a {FIRST_FORMAT} file: it holds no proofs")
    return checked_proofs(name, read.member, read.records(name), vkey)
