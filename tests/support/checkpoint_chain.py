"""What the stored rows say about the ledger's checkpoints, recomputed as an outsider would."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from domain.checkpoint import (
    CHECKPOINT_STREAM,
    Checkpoint,
    LedgerCheckpoints,
    SignedCheckpoint,
    leaf_data,
)
from domain.merkle import leaf_hash, root
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.settings import Settings, SQLiteStore
from support.ledger_fixtures import RawTable, store_of


def stored_leaves(settings: Settings) -> list[tuple[int, bytes]]:
    """(notification id, leaf hash) of every stored event but the checkpoints, in log order."""
    raw = RawTable(settings)
    position = "rowid" if isinstance(raw.store, SQLiteStore) else "notification_id"
    rows = raw.execute(
        f"SELECT {position}, originator_id, originator_version, topic, state FROM {{table}}"
        f" ORDER BY {position}"
    )
    return [
        (int(n), leaf_hash(leaf_data(UUID(str(i)), int(v), str(t), bytes(s))))
        for n, i, v, t, s in rows
        if UUID(str(i)) != CHECKPOINT_STREAM
    ]


def chain(settings: Settings) -> list[SignedCheckpoint]:
    """Every stored checkpoint, oldest first, each one's MAC, number and signature checked."""
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        checkpoints = writer(ledger)
        events = store_of(ledger).verifying_store.get(CHECKPOINT_STREAM)
        return [checkpoints.checked(e) for e in events if isinstance(e, LedgerCheckpoints.Signed)]


def writer(ledger: Ledger) -> Checkpoints:
    checkpoints = store_of(ledger).checkpoints
    assert checkpoints is not None
    return checkpoints


def assert_chained(signed: list[SignedCheckpoint]) -> None:
    """Numbers 1..n with no gap, each ``previous`` the digest of the one before: no fork."""
    bodies = [s.checkpoint for s in signed]
    assert [b.number for b in bodies] == list(range(1, len(bodies) + 1))
    assert [b.previous for b in bodies] == [None, *(b.digest() for b in bodies[:-1])]


def assert_covers_every_event(settings: Settings) -> Checkpoint:
    """The newest checkpoint covers every stored event, its root recomputed from the raw rows."""
    signed = chain(settings)
    assert_chained(signed)
    newest = signed[-1].checkpoint
    leaves = stored_leaves(settings)
    assert newest.tree_size == len(leaves)
    # The writer reads past checkpoints stored after the last event (it skips them), so its
    # position can be a checkpoint's; no event but checkpoints lies beyond it.
    assert leaves[-1][0] <= newest.last_notification_id
    assert newest.root == root([leaf for _, leaf in leaves]).hex()
    return newest


def new_key_file(directory: Path) -> Path:
    """A new Ed25519 checkpoint key, PEM, mode 0600, at ``directory``/checkpoint.pem."""
    path = directory / "checkpoint.pem"
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    return path
