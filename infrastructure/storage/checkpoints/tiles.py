"""A checkpoint's tree as tlog-tiles (`domain.merkle_tiles`), made from the log's stored nodes.

Tiles hold the nodes of every eighth Merkle level, which the checkpoint writer stores as they
complete (`mace_log_nodes`). Those rows anyone with database access can edit, so the tiles are
checked against the checkpoint's signed root, every hash of every tile bound to it, before anyone
is handed them: an edited or missing node is an `IntegrityFailure`, never a published tile.
"""

from __future__ import annotations

from domain.checkpoint import CHECKPOINT_STREAM, Checkpoint
from domain.errors import IntegrityFailure
from domain.merkle_tiles import TILE_HEIGHT, Tile, tile_data, tiles_of, tiles_problem
from infrastructure.storage.checkpoints.tables import CheckpointTables


def checkpoint_tiles(tables: CheckpointTables, checkpoint: Checkpoint) -> dict[Tile, bytes]:
    """Every tile of ``checkpoint``'s tree, full and partial, checked against its root."""
    size, number = checkpoint.tree_size, checkpoint.number
    nodes: dict[tuple[int, int], bytes] = {}
    level = 0
    # Tile level l holds the nodes of Merkle level 8l under size // 256**l.
    while hashes := size >> (TILE_HEIGHT * level):
        stored = tables.log_level(TILE_HEIGHT * level, hashes)
        if len(stored) != hashes:
            missing = min(set(range(hashes)) - set(stored))
            reason = (
                f"checkpoint {number}: log node ({TILE_HEIGHT * level}, {missing}) of its"
                " tiles is not stored"
            )
            raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
        nodes.update(((TILE_HEIGHT * level, index), node) for index, node in stored.items())
        level += 1
    tiles = {tile: tile_data(tile, lambda lv, ix: nodes[lv, ix]) for tile in tiles_of(size)}
    try:
        problem = tiles_problem(size, bytes.fromhex(checkpoint.root), tiles.__getitem__)
    except ValueError as exc:  # a stored hash edited to another length
        problem = str(exc)
    if problem is not None:
        reason = f"checkpoint {number}: the stored log nodes do not make its tree: {problem}"
        raise IntegrityFailure(CHECKPOINT_STREAM, number, reason)
    return tiles
