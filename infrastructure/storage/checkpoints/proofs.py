"""Consistency between two checkpoints, proved from the log's stored nodes (RFC 9162 2.1.4).

The proof is built from `mace_log_nodes`, rows anyone with database access can edit, and then
verified against both checkpoints' signed roots: an edited node makes the proof fail, never
pass. A store that no longer extends a checkpoint an outside witness kept (restored from an
older backup, truncated, rewritten) is caught here, which the chain alone cannot do: a rolled-back
store holds a shorter chain that is itself intact.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint, LedgerCheckpoints, SignedCheckpoint
from domain.errors import IntegrityFailure
from domain.merkle import consistency_proof_from_nodes, verify_consistency
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.checkpoints.tables import CheckpointTables


@dataclass(frozen=True)
class Consistency:
    """A consistency proof from ``old`` to ``new`` and whether it holds for their roots."""

    old: Checkpoint
    new: Checkpoint
    proof: tuple[bytes, ...]
    holds: bool


def consistency(tables: CheckpointTables, old: Checkpoint, new: Checkpoint) -> Consistency:
    """The proof that ``new``'s tree extends ``old``'s (sizes in that order), checked.

    A node the proof needs that the store does not hold is an `IntegrityFailure`: the writer
    stores every complete subtree, so a missing one was removed.
    """
    proof = proof_from_size(tables, old.tree_size, new, f"checkpoint {old.number}")
    holds = verify_consistency(
        old.tree_size, new.tree_size, bytes.fromhex(old.root), bytes.fromhex(new.root), proof
    )
    return Consistency(old, new, proof, holds)


def proof_from_size(
    tables: CheckpointTables, old_size: int, new: Checkpoint, old: str
) -> tuple[bytes, ...]:
    """The consistency proof from the tree's first ``old_size`` leaves (``old`` names them) to
    ``new``'s tree, from the stored nodes, unchecked: whoever holds the old root checks it (a
    witness holds the root of the size it cosigned, which need not be one of the checkpoints)."""

    def node(level: int, index: int) -> bytes:
        return tables.log_nodes([(level, index)])[(level, index)]

    try:
        return tuple(consistency_proof_from_nodes(old_size, new.tree_size, node))
    except KeyError as missing:
        reason = (
            f"the log node {missing.args[0]} that proves checkpoint {new.number} extends"
            f" {old} is not stored"
        )
        raise IntegrityFailure(CHECKPOINT_STREAM, new.number, reason) from None


def check_extends(checkpoints: Checkpoints, witness: SignedCheckpoint, source: str) -> Consistency:
    """That the store extends ``witness`` (a checkpoint kept outside it, verified already): it
    holds the same checkpoint under the same number, and its newest tree extends that one's.

    Else an `IntegrityFailure` saying the store was rolled back, truncated or rewritten
    relative to ``source`` (the witness's file).
    """
    kept = witness.checkpoint
    newest = checkpoints.newest()
    prefix = f"the store does not extend checkpoint {kept.number} of {source}: "
    if newest is None or newest.checkpoint.number < kept.number:
        held = 0 if newest is None else newest.checkpoint.number
        reason = f"{prefix}rolled back (its newest checkpoint is {held})"
        raise IntegrityFailure(CHECKPOINT_STREAM, kept.number, reason)
    stored = _stored(checkpoints, kept.number)
    if stored.checkpoint.digest() != kept.digest():
        reason = f"{prefix}rewritten (its checkpoint {kept.number} is another)"
        raise IntegrityFailure(CHECKPOINT_STREAM, kept.number, reason)
    proved = consistency(checkpoints.tables, kept, newest.checkpoint)
    if not proved.holds:
        reason = (
            f"{prefix}truncated or rewritten (no consistency from tree size {kept.tree_size}"
            f" to its newest checkpoint {newest.checkpoint.number}, tree size"
            f" {newest.checkpoint.tree_size})"
        )
        raise IntegrityFailure(CHECKPOINT_STREAM, kept.number, reason)
    return proved


def _stored(checkpoints: Checkpoints, number: int) -> SignedCheckpoint:
    """The store's checkpoint ``number`` (it has one: its newest is at least that), checked."""
    store = checkpoints.store
    (event,) = store.verifying_store.get(CHECKPOINT_STREAM, gt=number - 1, lte=number)
    assert isinstance(event, LedgerCheckpoints.Signed)
    return checkpoints.checked(event)
