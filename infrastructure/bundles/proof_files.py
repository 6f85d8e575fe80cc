"""``mace proof verify``'s reading: one tlog-proof file, or the proofs of a bundle, checked
against the ledger's verifier key with no store and no secret.

A tlog-proof file (`domain.tlog_proof`) must carry its entry in its extra line, as ``mace
export`` writes them: the entry is the stored record (stream, version, topic, stored bytes), so
a proof that holds says the log held exactly that record at that index when the key signed the
checkpoint. A bundle's proofs are checked against its own records (`checked_proofs`); its
manifest signature and the records' MACs need the ledger's HMAC keys and are not checked here
(``mace replay --bundle`` checks them), and the answer says so.

With a witness policy, the checkpoint's note must also carry valid cosignatures of a quorum of the
policy's witnesses (`domain.witness_policy`), checked offline: a witness is not asked here, so the
note shows what it had cosigned when the proof was made.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from domain.checkpoint import LeafRecord, parse_leaf_data
from domain.checkpoint_note import SignedNote, VerifierKey, parse_note
from domain.errors import InvalidInput
from domain.tlog_proof import parse_tlog_proof
from domain.witness_policy import WitnessPolicy
from infrastructure.application.checkpoints import CheckpointBody
from infrastructure.application.witnesses import cosigned_quorum
from infrastructure.bundles.format import FIRST_FORMAT, Member, checked_proofs, read_shape
from infrastructure.bundles.inclusion import Inclusion
from infrastructure.bundles.tlog_proofs import TlogProofMember, proven_entry, verified_checkpoint


@dataclass(frozen=True)
class ProvenRecord:
    """What a verified tlog-proof file proves: its record is entry ``index`` of the checkpoint
    the verifier key signed. ``cosigners``: the policy's witnesses whose cosignatures of it hold
    (None: no policy checked any); ``other_signatures``: the note's lines by other keys than the
    log's and those cosigners' (witnesses' cosignatures no policy vouched for)."""

    record: LeafRecord
    index: int
    checkpoint: CheckpointBody
    other_signatures: int
    cosigners: tuple[str, ...] | None


@dataclass(frozen=True)
class ProvenBundle:
    """A bundle whose every proof holds; ``cosigners`` as `ProvenRecord` has them."""

    inclusion: Inclusion
    cosigners: tuple[str, ...] | None


def verified_proof_file(
    path: Path, vkey: VerifierKey, policy: WitnessPolicy | None = None
) -> ProvenRecord | ProvenBundle:
    """What the file proves, once every proof in it holds under ``vkey`` (and its note carries
    a quorum of ``policy``'s cosignatures); its form decides how it is read: a JSON object is a
    bundle, anything else a tlog-proof."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if data.lstrip()[:1] == b"{":
        return _bundle_proofs(data, str(path), vkey, policy)
    return _proven_record(data, f"tlog-proof {path}", vkey, policy)


def _witnessed(
    note: SignedNote | None, policy: WitnessPolicy | None, source: str
) -> tuple[str, ...] | None:
    """The policy's witnesses that validly cosigned ``note`` once they are its quorum (None: no
    policy); a bundle whose checkpoint is no note (``mace-bundle/2``) has no cosignature."""
    if policy is None:
        return None
    lines = () if note is None else note.signatures
    text = "" if note is None else note.text
    return tuple(cosigned_quorum(policy, text, lines, f"{source}'s checkpoint"))


def _proven_record(
    data: bytes, source: str, vkey: VerifierKey, policy: WitnessPolicy | None
) -> ProvenRecord:
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
    cosigners = _witnessed(note, policy, source)
    vouched = (
        [vkey, *(w.vkey for w in policy.witnesses if w.name in cosigners)]
        if policy and cosigners
        else [vkey]
    )
    others = sum(not any(line.by(key) for key in vouched) for line in note.signatures)
    return ProvenRecord(record, proof.index, body, others, cosigners)


def _bundle_proofs(
    data: bytes, name: str, vkey: VerifierKey, policy: WitnessPolicy | None
) -> ProvenBundle:
    read = read_shape(data, name)
    if read.form == FIRST_FORMAT:
        raise InvalidInput(f"bundle {name} is a {FIRST_FORMAT} file: it holds no proofs")
    inclusion = checked_proofs(name, read.member, read.records(name), vkey)
    return ProvenBundle(inclusion, _witnessed(_bundle_note(read.member), policy, f"bundle {name}"))


def _bundle_note(member: Member | None) -> SignedNote | None:
    """The note every proof of the bundle carries (`checked_proofs` held them to one), None for
    a bundle without tlog-proofs or whose every record was redacted."""
    if not isinstance(member, TlogProofMember):
        return None
    text = next((proof for proof in member.proofs if proof is not None), None)
    return None if text is None else parse_note(parse_tlog_proof(text.encode("utf-8")).note)
