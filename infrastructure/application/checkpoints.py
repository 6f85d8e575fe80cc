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
from typing import Any

from eventsourcing.persistence import StoredEvent

from domain.checkpoint import (
    ALGORITHM,
    CHECKPOINT_STREAM,
    Checkpoint,
    LedgerCheckpoints,
    SignedCheckpoint,
)
from domain.errors import IntegrityFailure, InvalidInput, NotFoundError
from infrastructure.application.read_model_sync import ReadModels
from infrastructure.storage.checkpoints.chain import Checkpoints, Written, signature_problem
from infrastructure.storage.checkpoints.inclusion_proofs import (
    InclusionProof,
    check_inclusion,
    event_key,
    inclusion_proofs,
)
from infrastructure.storage.checkpoints.proofs import Consistency, check_extends, consistency
from infrastructure.storage.keys.checkpoint_key import PublicCheckpointKey, load_checkpoint_key
from infrastructure.storage.settings import Settings
from infrastructure.storage.store import LedgerStore
from infrastructure.storage.verification.ledger import LedgerVerification

__all__ = [
    "CheckpointService",
    "Consistency",
    "InclusionProof",
    "LedgerAudit",
    "PublicCheckpointKey",
    "Written",
    "check_inclusion",
    "checked_signature",
    "checkpoint_public_key",
    "event_key",
    "public_key_from_pem",
    "signature_problem",
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

    def rebuild_log_tables(self) -> int:
        """Make the log's stored Merkle nodes and leaf index again from the log, up to the
        newest checkpoint (its signed root checked); the number of leaves."""
        return self._chain.rebuild_log_tables()

    def head(self) -> int:
        """The log's head: the highest notification id committed (0: none)."""
        return self.store.recorder.max_notification_id() or 0

    def verified(self, algorithm: str, signed: SignedCheckpoint, source: str) -> SignedCheckpoint:
        """An exported checkpoint once it is signed by this ledger's checkpoint key."""
        return checked_signature(algorithm, signed, self.public_key, source)

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
