"""Inclusion proofs of stored events in a checkpoint's tree, made from the stored log nodes.

An event's leaf position comes from ``mace_log_leaves`` (one indexed look-up), its proof from
``mace_log_nodes`` (`domain.merkle.inclusion_proof_from_nodes`). Neither table is trusted: every
proof is checked against the checkpoint's signed root, over a leaf hash recomputed from the
event's own bytes (`check_inclusion`), before anyone is handed it. That check needs nothing but
the checkpoint and the event, so a reader far from any store runs the same one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint, leaf_data
from domain.errors import IntegrityFailure
from domain.merkle import HASH_SIZE, inclusion_proof_from_nodes, leaf_hash, verify_inclusion
from infrastructure.storage.checkpoints.tables import CheckpointTables, EventKey, Position

_PLACEHOLDER: Final = bytes(HASH_SIZE)


@dataclass(frozen=True)
class InclusionProof:
    """Where an event's leaf is in a checkpoint's tree, and the RFC 9162 path to its root."""

    leaf_index: int
    hashes: tuple[bytes, ...]


def event_key(record: StoredEvent) -> EventKey:
    stream = record.originator_id
    return (stream if isinstance(stream, UUID) else UUID(str(stream)), record.originator_version)


def inclusion_proofs(
    tables: CheckpointTables, checkpoint: Checkpoint, records: Sequence[StoredEvent]
) -> list[InclusionProof] | None:
    """Each record's checked proof in ``checkpoint``; None when it does not cover them all yet.

    The nodes every proof needs are read in one query: which nodes a proof asks for depends on
    the leaf's position and the tree's size only, so a first pass with placeholder hashes names
    them all.
    """
    keys = [event_key(record) for record in records]
    positions = tables.leaf_positions(keys)
    if any(positions.get(key, checkpoint.tree_size) >= checkpoint.tree_size for key in keys):
        return None
    wanted: set[Position] = set()

    def note(level: int, index: int) -> bytes:
        wanted.add((level, index))
        return _PLACEHOLDER

    for key in keys:
        inclusion_proof_from_nodes(positions[key], checkpoint.tree_size, note)
    stored = tables.log_nodes(wanted)
    proofs: list[InclusionProof] = []
    for key, record in zip(keys, records, strict=True):
        try:
            hashes = inclusion_proof_from_nodes(
                positions[key], checkpoint.tree_size, lambda level, index: stored[level, index]
            )
        except KeyError as missing:
            reason = f"checkpoint {checkpoint.number}: log node {missing} is not stored"
            raise IntegrityFailure(CHECKPOINT_STREAM, checkpoint.number, reason) from None
        proof = InclusionProof(positions[key], tuple(hashes))
        check_inclusion(checkpoint, record, proof)
        proofs.append(proof)
    return proofs


def check_inclusion(checkpoint: Checkpoint, record: StoredEvent, proof: InclusionProof) -> None:
    """Fail unless ``proof`` puts this record's own bytes at its leaf in ``checkpoint``'s tree."""
    stream, version = event_key(record)
    assert isinstance(record.topic, str)
    leaf = leaf_hash(leaf_data(stream, version, record.topic, record.state))
    size, index = checkpoint.tree_size, proof.leaf_index
    if not (
        0 <= index < size
        and verify_inclusion(leaf, index, size, proof.hashes, bytes.fromhex(checkpoint.root))
    ):
        reason = (
            f"not included in checkpoint {checkpoint.number} (size {size}): its inclusion"
            f" proof at leaf {index} does not lead to the checkpoint's root"
        )
        raise IntegrityFailure(stream, version, reason)
