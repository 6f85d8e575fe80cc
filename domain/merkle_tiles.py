"""The log's Merkle tree as tiles (``c2sp.org/tlog-tiles``): which tiles a tree has, their paths,
and the tree's nodes read back from them.

A tile is a run of at most 256 consecutive hashes at one tile level: level 0 holds leaf hashes,
level ``l`` the roots of the complete subtrees of ``256**l`` leaves, so a tile is the bottom of a
subtree of height 8 and the nodes between two tile levels are hashed again from the tile below.
A full tile holds 256 hashes and never changes; the rightmost tile of each level is partial
(1 to 255 hashes) and grows with the tree. Everything here is pure: tiles come in as bytes from a
reader the caller gives (files, a store), so a monitor far from the ledger runs the same maths.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from domain.merkle import HASH_SIZE, NodeLookup, root, root_from_nodes

TILE_HEIGHT: Final = 8
TILE_WIDTH: Final = 1 << TILE_HEIGHT
"""Hashes in a full tile (8,192 bytes)."""


@dataclass(frozen=True, order=True)
class Tile:
    """The tile ``index`` of tile level ``level``, ``width`` hashes wide (256: full)."""

    level: int
    index: int
    width: int

    @property
    def full(self) -> bool:
        return self.width == TILE_WIDTH

    @property
    def path(self) -> str:
        """Its path under the log's prefix: ``tile/<L>/<N>[.p/<W>]``."""
        partial = "" if self.full else f".p/{self.width}"
        return f"tile/{self.level}/{index_path(self.index)}{partial}"

    def positions(self) -> list[tuple[int, int]]:
        """The (Merkle level, index) of each node it holds, in order."""
        first = self.index * TILE_WIDTH
        return [(self.level * TILE_HEIGHT, first + i) for i in range(self.width)]


def index_path(index: int) -> str:
    """``index`` as zero-padded 3-digit path elements, all but the last prefixed with ``x``
    (1234067: ``x001/x234/067``), so that no file is also a directory."""
    if index < 0:
        raise ValueError(f"tile index {index} is negative")
    elements = [f"{index % 1000:03d}"]
    while index >= 1000:
        index //= 1000
        elements.append(f"x{index % 1000:03d}")
    return "/".join(reversed(elements))


def tiles_of(size: int) -> list[Tile]:
    """Every tile of a tree of ``size`` leaves, level by level, full ones before the partial one.

    Tile level ``l`` holds ``size // 256**l`` hashes: its full tiles, then a partial tile of the
    rest if any (an empty tile is no tile). A tree of 256 leaves is one full level-0 tile and a
    level-1 tile one hash wide.
    """
    if size < 0:
        raise ValueError(f"tree size {size} is negative")
    tiles: list[Tile] = []
    level = 0
    while hashes := size >> (TILE_HEIGHT * level):
        full, rest = divmod(hashes, TILE_WIDTH)
        tiles.extend(Tile(level, index, TILE_WIDTH) for index in range(full))
        if rest:
            tiles.append(Tile(level, full, rest))
        level += 1
    return tiles


def tile_at(size: int, level: int, index: int) -> Tile | None:
    """The tile ``index`` of tile level ``level`` in a tree of ``size`` leaves, if it has one."""
    full, rest = divmod(size >> (TILE_HEIGHT * level), TILE_WIDTH)
    if index < full:
        return Tile(level, index, TILE_WIDTH)
    if index == full and rest:
        return Tile(level, index, rest)
    return None


def tile_data(tile: Tile, node: NodeLookup) -> bytes:
    """The tile's bytes: its hashes, concatenated, from the tree's nodes."""
    return b"".join(node(level, index) for level, index in tile.positions())


def tile_hashes(tile: Tile, data: bytes) -> list[bytes]:
    """The hashes ``data`` holds as ``tile``; a `ValueError` naming it if the length is not its
    width's."""
    if len(data) != tile.width * HASH_SIZE:
        raise ValueError(
            f"{tile.path} is {len(data)} bytes, not {tile.width * HASH_SIZE} ({tile.width} hashes)"
        )
    return [data[start : start + HASH_SIZE] for start in range(0, len(data), HASH_SIZE)]


TileReader = Callable[[Tile], bytes]
"""A tile's bytes, wherever they are kept (a file under the tile's path, say)."""


def tile_nodes(size: int, read: TileReader) -> NodeLookup:
    """The nodes of the tree of ``size`` leaves, read from its tiles (each tile read once).

    A node at Merkle level ``8l + h`` is the root of ``2**h`` consecutive hashes of one tile of
    level ``l``; a node the tiles of this size do not hold is a `KeyError`, as `NodeLookup` asks.
    """
    held: dict[Tile, list[bytes]] = {}

    def node(level: int, index: int) -> bytes:
        tile_level, height = divmod(level, TILE_HEIGHT)
        first = index << height
        tile = tile_at(size, tile_level, first // TILE_WIDTH)
        offset = first % TILE_WIDTH
        if tile is None or offset + (1 << height) > tile.width:
            raise KeyError((level, index))
        if tile not in held:
            held[tile] = tile_hashes(tile, read(tile))
        return root(held[tile][offset : offset + (1 << height)])

    return node


def tiles_problem(size: int, root_hash: bytes, read: TileReader) -> str | None:
    """Why the tiles are not those of the tree (``size``, ``root_hash``); None: they are.

    Each full tile must hash to its entry in the tile above and the tiles must make the root, so
    every hash of every tile is bound to the root (a full tile's hashes are not on the root's
    own path: only its parent entry is).
    """
    read_once: dict[Tile, bytes] = {}

    def cached(tile: Tile) -> bytes:
        if tile not in read_once:
            read_once[tile] = read(tile)
        return read_once[tile]

    node = tile_nodes(size, cached)
    for tile in tiles_of(size):
        if tile.full:
            above = node((tile.level + 1) * TILE_HEIGHT, tile.index)
            if root(tile_hashes(tile, cached(tile))) != above:
                return f"{tile.path} does not hash to its entry in the tile above"
    if root_from_nodes(size, node) != root_hash:
        return f"the tiles make another root than {root_hash.hex()} for tree size {size}"
    return None
