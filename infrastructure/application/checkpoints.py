"""Checkpoints, as a use case: write one, read the newest or any by number, export the newest for
an outside witness, check an exported one, prove that one extends another, and verify the whole
ledger, with or without a witness it must extend.

The command line, the HTTP service and the notary all come in here; the checkpoint chain itself
(signing, the Merkle tree, the head index) is storage's (`infrastructure.storage.checkpoints`).
A checkpoint file's format is the bundles' (`infrastructure.bundles.exported_checkpoints`): this
module takes what such a file holds, never a path.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from eventsourcing.persistence import StoredEvent

from domain.checkpoint import (
    ALGORITHM,
    CHECKPOINT_STREAM,
    Checkpoint,
    LedgerCheckpoints,
    SignedCheckpoint,
)
from domain.checkpoint_note import (
    ED25519,
    CheckpointBody,
    NoteSignature,
    SignedNote,
    VerifierKey,
    name_problem,
    parse_checkpoint_text,
    parse_note,
)
from domain.errors import ErrorCode, IntegrityFailure, InvalidInput, MaceError, NotFoundError
from domain.merkle_tiles import Tile
from infrastructure.application.read_model_sync import ReadModels
from infrastructure.storage.checkpoints.chain import Checkpoints, Written, signature_problem
from infrastructure.storage.checkpoints.inclusion_proofs import (
    InclusionProof,
    check_inclusion,
    event_key,
    inclusion_proofs,
)
from infrastructure.storage.checkpoints.proofs import (
    Consistency,
    check_extends,
    consistency,
    proof_from_size,
)
from infrastructure.storage.checkpoints.tiles import checkpoint_tiles
from infrastructure.storage.keys.checkpoint_key import PublicCheckpointKey, load_checkpoint_key
from infrastructure.storage.settings import Settings
from infrastructure.storage.store import LedgerStore
from infrastructure.storage.verification.ledger import LedgerVerification

__all__ = [
    "CheckpointBody",
    "CheckpointService",
    "Consistency",
    "InclusionProof",
    "LedgerAudit",
    "PublicCheckpointKey",
    "Written",
    "check_inclusion",
    "checked_note",
    "checked_signature",
    "checkpoint_public_key",
    "event_key",
    "public_key_from_pem",
    "signature_problem",
    "vkey_public_key",
]


@dataclass(frozen=True)
class LedgerAudit:
    """What verifying the whole ledger found, and the witness it extends (if one was given)."""

    verification: LedgerVerification
    newest: SignedCheckpoint | None
    extends: Checkpoint | None

    @property
    def checkpointed(self) -> int:
        """How many events the newest checkpoint covers."""
        return 0 if self.newest is None else self.newest.checkpoint.tree_size

    def counts(self) -> dict[str, Any]:
        """What was verified, as ``mace verify --all --json`` and the HTTP verify route say it."""
        summary, tree = self.verification, self.verification.tree
        assert tree is not None  # verify_ledger checks the checkpoints
        extends = self.extends
        return {
            "events": summary.events,
            "streams": summary.streams,
            "jobs": summary.jobs,
            "sealed_jobs": summary.sealed_jobs,
            "checkpoints": tree.checkpoints,
            "checkpointed": self.checkpointed,
            "not_yet_checkpointed": tree.not_yet_checkpointed,
            **({} if extends is None else {"extends": extends.summary()}),
        }


def checkpoint_public_key(settings: Settings) -> PublicCheckpointKey:
    """The public half of the key the settings name (made first in development, as every
    writer would), without opening the store."""
    return load_checkpoint_key(settings).public


def public_key_from_pem(pem: str) -> PublicCheckpointKey:
    """The Ed25519 public key in ``pem`` (as ``mace checkpoint public-key`` prints it)."""
    return PublicCheckpointKey.from_pem(pem)


def checked_signature(
    algorithm: str, signed: SignedCheckpoint, key: PublicCheckpointKey, source: str
) -> SignedCheckpoint:
    """``signed`` once its algorithm, key id and signature hold under ``key``; else an
    `IntegrityFailure` naming ``source`` (where it came from: a file, a request body)."""
    number = signed.checkpoint.number
    if algorithm != ALGORITHM:
        reason = f"{source} is signed with {algorithm!r}, not {ALGORITHM}"
        raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
    problem = signature_problem(signed, key)
    if problem is not None:
        raise IntegrityFailure(CHECKPOINT_STREAM, number, f"{source}: {problem}")
    return signed


ORIGIN_PREFIX: Final = "mace.example.org/ledger/"
"""The default log origin's prefix; the store's id follows it (`CheckpointService.log_origin`)."""


def checked_origin(origin: str, source: str) -> str:
    """``origin`` once it can be a checkpoint note's origin and key name; else `InvalidInput`
    naming ``source`` (where it was set)."""
    problem = name_problem(origin)
    if problem is not None:
        raise InvalidInput(
            f"{source} {origin!r} {problem}: expected a schema-less URL such as"
            " ledger.example.com/audit (no spaces, no '+')"
        )
    return origin


def checked_note(note: SignedNote, vkey: VerifierKey, source: str) -> CheckpointBody:
    """The checkpoint ``note`` states, once ``vkey``'s key signed it for ``vkey``'s origin.

    As the signed-note spec has it: lines by other keys are ignored, every line by ``vkey`` must
    verify, and at least one must be there. The ledger's key name is its origin, so a note whose
    origin line is another is not this log's. A failed check is ``INTEGRITY_FAILURE`` naming
    ``source``; a key that is no Ed25519 verifier key, or a signed text that is no checkpoint,
    is bad input.
    """
    key = vkey_public_key(vkey)
    named = f"{vkey.name}+{vkey.key_id.hex()}"
    mine = [signature for signature in note.signatures if signature.by(vkey)]
    if not mine:
        others = ", ".join(f"{s.name}+{s.key_id.hex()}" for s in note.signatures)
        raise _unverified(source, f"no signature by {named} (it is signed by {others})")
    text = note.text.encode("utf-8")
    for signature in mine:
        if not key.verify(text, signature.signature):
            raise _unverified(source, f"the signature by {named} does not verify")
    body = parse_checkpoint_text(note.text)
    if body.origin != vkey.name:
        reason = f"it is a checkpoint of origin {body.origin!r}, not of {vkey.name!r}"
        raise _unverified(source, reason)
    return body


def vkey_public_key(vkey: VerifierKey) -> PublicCheckpointKey:
    """The Ed25519 key ``vkey`` holds; a vkey of another signature type is `InvalidInput`."""
    if vkey.signature_type != ED25519:
        msg = (
            f"verifier key {vkey.name}+{vkey.key_id.hex()} is of signature type"
            f" 0x{vkey.signature_type:02x}, not Ed25519 (0x01)"
        )
        raise InvalidInput(msg)
    return PublicCheckpointKey.from_raw(vkey.public_key)


def _unverified(source: str, reason: str) -> MaceError:
    return MaceError(ErrorCode.INTEGRITY_FAILURE, f"{source}: {reason}", reason=reason)


class CheckpointService:
    def __init__(self, store: LedgerStore, read_models: ReadModels) -> None:
        """``read_models``: the views derived from the log, which verifying the ledger holds to
        it too."""
        self.store = store
        self.read_models = read_models

    @property
    def _chain(self) -> Checkpoints:
        checkpoints = self.store.checkpoints
        if checkpoints is None:
            # Only a bundle's ledger, held in memory, has no checkpoint key.
            raise InvalidInput("this ledger has no checkpoint key: it keeps no checkpoints")
        return checkpoints

    @property
    def public_key(self) -> PublicCheckpointKey:
        return self._chain.key.public

    def write(self) -> Written:
        """Checkpoint every event committed so far (none yet: an empty first checkpoint)."""
        return self._chain.write()

    def log_origin(self, configured: str | None) -> str:
        """The origin of this ledger's checkpoint notes, and the name of its note key.

        ``configured`` (``MACE_LOG_ORIGIN``) if set; else ``mace.example.org/ledger/`` and the
        store's id: the first 32 hex digits of the digest of its first checkpoint. That
        checkpoint never changes while the log lives (restored from a backup it is the same,
        and it names when it was written, so no two stores share it), and it needs no setting
        that could drift: a new origin would be a new log to every witness and verifier.
        """
        if configured:
            return checked_origin(configured, "MACE_LOG_ORIGIN")
        found = list(self.store.verifying_store.get(CHECKPOINT_STREAM, gt=0, lte=1))
        if not found:
            msg = (
                "the store has no checkpoint yet, and its log origin is made from its first:"
                " run 'mace checkpoint', or set MACE_LOG_ORIGIN"
            )
            raise InvalidInput(msg)
        (first,) = found
        assert isinstance(first, LedgerCheckpoints.Signed)
        return ORIGIN_PREFIX + first.checkpoint.digest()[:32]

    def verifier_key(self, origin: str) -> VerifierKey:
        """The verifier key of the notes this ledger signs under ``origin``."""
        return VerifierKey.ed25519(origin, self.public_key.raw)

    def note(self, signed: SignedCheckpoint, origin: str) -> SignedNote:
        """``signed`` as a tlog-checkpoint note for ``origin``, signed by the checkpoint key, with
        the witnesses' cosignatures kept for it: the one note that exports, the HTTP service,
        tiles and bundles hand out.

        Ed25519 (RFC 8032) is deterministic: the same checkpoint, origin and key make the same
        note bytes every time, so nothing of it is stored; a witness's cosignature of it stays
        valid for the note made again. The kept cosignature lines are as the witnesses sent them,
        unchecked: a verifier checks them against the witness keys it trusts (and ignores others).
        """
        body = signed.checkpoint
        root = bytes.fromhex(body.root)
        text = CheckpointBody(origin, body.tree_size, root).text()
        key = self._chain.key
        vkey = self.verifier_key(origin)
        line = NoteSignature(origin, vkey.key_id, key.sign(text.encode("utf-8")))
        kept = self._chain.tables.cosignatures(body.tree_size, root)
        cosignatures = parse_note(f"{text}\n{''.join(kept)}".encode()).signatures if kept else ()
        return SignedNote(text, (line, *cosignatures))

    def proof_from(self, old_size: int, signed: SignedCheckpoint) -> tuple[bytes, ...]:
        """The consistency proof from the log's first ``old_size`` events to ``signed``'s tree."""
        return proof_from_size(self._chain.tables, old_size, signed.checkpoint, f"size {old_size}")

    def keep_cosignatures(
        self, signed: SignedCheckpoint, witness: str, lines: Sequence[NoteSignature]
    ) -> None:
        """Keep ``witness``'s cosignature lines of ``signed``'s note beside the checkpoint."""
        body = signed.checkpoint
        encoded = [line.line() for line in lines]
        self._chain.tables.add_cosignatures(
            body.tree_size, bytes.fromhex(body.root), witness, encoded
        )

    def witnessed_size(self, witness: str) -> int:
        """The largest tree size ``witness`` is kept as having cosigned (0: none)."""
        return self._chain.tables.witnessed_size(witness)

    def tiles(self, signed: SignedCheckpoint) -> dict[Tile, bytes]:
        """Every tile of ``signed``'s tree (tlog-tiles), made from the store's log nodes and
        checked against its signed root: an edited node is an `IntegrityFailure`."""
        return checkpoint_tiles(self._chain.tables, signed.checkpoint)

    def export(self) -> Written:
        """Checkpoint every event first, so that what is handed out covers the whole store."""
        return self.write()

    def newest(self) -> SignedCheckpoint | None:
        """The newest checkpoint, its MAC and signature checked; None before the first."""
        return self._chain.newest()

    def get(self, number: int) -> SignedCheckpoint:
        """Checkpoint ``number``, its MAC, place in the chain and signature checked."""
        chain = self._chain
        if number < 1:
            raise InvalidInput(f"checkpoint number {number}: checkpoints are numbered from 1")
        found = list(self.store.verifying_store.get(CHECKPOINT_STREAM, gt=number - 1, lte=number))
        if not found:
            raise NotFoundError(f"no checkpoint {number}")
        (event,) = found
        assert isinstance(event, LedgerCheckpoints.Signed)
        return chain.checked(event)

    def of_size(self, tree_size: int) -> SignedCheckpoint | None:
        """The store's checkpoint of ``tree_size`` (checked as `get` checks one), None when no
        checkpoint of the chain has that size: found by bisection, sizes grow along the chain."""
        newest = self.newest()
        low, high = 1, 0 if newest is None else newest.checkpoint.number
        while low <= high:
            middle = (low + high) // 2
            found = self.get(middle)
            if found.checkpoint.tree_size == tree_size:
                return found
            if found.checkpoint.tree_size < tree_size:
                low = middle + 1
            else:
                high = middle - 1
        return None

    def rebuild_log_tables(self) -> int:
        """Make the log's stored Merkle nodes and leaf index again from the log, up to the
        newest checkpoint (its signed root checked); the number of leaves."""
        return self._chain.rebuild_log_tables()

    def head(self) -> int:
        """The log's head: the highest notification id committed (0: none)."""
        return self.store.recorder.max_notification_id() or 0

    def verified(self, algorithm: str, signed: SignedCheckpoint, source: str) -> SignedCheckpoint:
        """An exported checkpoint once it is signed by this ledger's checkpoint key, or by a
        retired one it names (`MACE_CHECKPOINT_RETIRED_KEYS`): a witness's export made before a
        rotation still holds the store to what it signed."""
        key = self._chain.key.verifier(signed.key_id) or self.public_key
        return checked_signature(algorithm, signed, key, source)

    def prove(self, old: Checkpoint, new: Checkpoint) -> Consistency:
        """The consistency proof from ``old`` to ``new`` (both this ledger's, the older first),
        built from the store's log nodes and checked against both signed roots."""
        if old.tree_size > new.tree_size or old.number > new.number:
            msg = (
                f"checkpoint {old.number} is newer than checkpoint {new.number}: name the older"
                " one first"
            )
            raise InvalidInput(msg)
        return consistency(self._chain.tables, old, new)

    def prove_numbers(self, old: int, new: int) -> Consistency:
        """`prove` between the store's own checkpoints ``old`` and ``new``."""
        return self.prove(self.get(old).checkpoint, self.get(new).checkpoint)

    def proofs_of(
        self, records: Sequence[StoredEvent]
    ) -> tuple[SignedCheckpoint, list[InclusionProof]]:
        """A checkpoint that covers ``records`` (the newest, or one written now if it does not)
        and each record's inclusion proof in its tree, in order."""
        chain = self._chain
        newest = chain.newest()
        proofs = (
            None if newest is None else inclusion_proofs(chain.tables, newest.checkpoint, records)
        )
        if newest is None or proofs is None:
            newest = chain.write().newest
            proofs = inclusion_proofs(chain.tables, newest.checkpoint, records)
        if proofs is None:
            number = newest.checkpoint.number
            reason = (
                f"checkpoint {number} covers every committed event, yet the log's leaf index"
                " places not every record of the bundle below its size"
            )
            raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
        return newest, proofs

    def verify_events(self, *, tree: bool) -> int:
        """The events `verify_ledger` checks, verified again; ``tree=False`` leaves the checkpoint
        pass out: what verifying cost before checkpoints, ``mace bench``'s baseline."""
        return self.store.verify_all(tree=tree).events

    def verify_ledger(
        self, witness: SignedCheckpoint | None = None, source: str = "the witness"
    ) -> LedgerAudit:
        """Check every checkpoint against the log it signed, then every stored event's MAC,
        every stream's versions, seal and witness, the stored Merkle nodes and the read models
        derived from the log; then that the store extends ``witness`` (a
        checkpoint kept outside it, its signature checked already), if one is given.

        Without a witness a store restored from an older copy verifies: its shorter chain is
        intact. With one, a store rolled back, truncated or rewritten relative to it is an
        `IntegrityFailure` naming ``source``.
        """
        verification = self.store.verify_all()
        self.read_models.verify()  # the log holds: what is derived from it must be its own
        tree = verification.tree
        assert tree is not None  # verify_all checks the checkpoints unless told not to
        extends = None
        if witness is not None:
            extends = check_extends(self._chain, witness, source).old
        return LedgerAudit(verification, tree.newest, extends)
