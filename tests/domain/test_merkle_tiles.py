"""The tree as tlog-tiles (c2sp.org/tlog-tiles): the spec's own examples of paths and tile sets,
and the tree read back from tiles: roots, proofs, and a tile that lies."""

from __future__ import annotations

import hashlib

import pytest

from domain.merkle import (
    MerkleBuilder,
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    leaf_hash,
    root,
    verify_consistency,
    verify_inclusion,
)
from domain.merkle_tiles import (
    Tile,
    index_path,
    tile_data,
    tile_nodes,
    tiles_of,
    tiles_problem,
)


def tree(size: int) -> tuple[list[bytes], dict[tuple[int, int], bytes]]:
    """The leaf hashes of a tree of ``size`` leaves and every complete node, as a writer stores."""
    leaves = [leaf_hash(hashlib.sha256(str(n).encode()).digest()) for n in range(size)]
    nodes: dict[tuple[int, int], bytes] = {}
    builder = MerkleBuilder()
    for leaf in leaves:
        nodes.update(((level, index), node) for level, index, node in builder.append(leaf))
    return leaves, nodes


def tiles(size: int, nodes: dict[tuple[int, int], bytes]) -> dict[Tile, bytes]:
    return {tile: tile_data(tile, lambda lv, ix: nodes[lv, ix]) for tile in tiles_of(size)}


def test_index_paths_are_the_specs_three_digit_elements() -> None:
    assert index_path(1234067) == "x001/x234/067"
    assert [index_path(n) for n in (0, 7, 999, 1000, 1_000_000)] == [
        "000",
        "007",
        "999",
        "x001/000",
        "x001/x000/000",
    ]
    assert Tile(0, 1234067, 256).path == "tile/0/x001/x234/067"
    assert Tile(2, 3, 17).path == "tile/2/003.p/17"


def test_the_tiles_of_a_tree_are_the_specs_examples() -> None:
    assert tiles_of(0) == []
    assert tiles_of(256) == [Tile(0, 0, 256), Tile(1, 0, 1)]
    seventy_thousand = tiles_of(70_000)
    assert [t for t in seventy_thousand if t.level == 0 and t.full] == [
        Tile(0, n, 256) for n in range(273)
    ]
    assert [t for t in seventy_thousand if not (t.level == 0 and t.full)] == [
        Tile(0, 273, 112),
        Tile(1, 0, 256),
        Tile(1, 1, 17),
        Tile(2, 0, 1),
    ]


@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, 511, 513, 70_000])
def test_the_tiles_make_the_trees_root_and_its_proofs(size: int) -> None:
    leaves, nodes = tree(size)
    held = tiles(size, nodes)
    expected = root(leaves)
    assert tiles_problem(size, expected, held.__getitem__) is None
    node = tile_nodes(size, held.__getitem__)
    for index in {0, size // 3, size - 1}:
        proof = inclusion_proof_from_nodes(index, size, node)
        assert verify_inclusion(leaves[index], index, size, proof, expected)
    old = max(1, size // 2)
    proof = consistency_proof_from_nodes(old, size, node)
    assert verify_consistency(old, size, root(leaves[:old]), expected, proof)


def test_one_changed_hash_in_any_tile_is_found() -> None:
    size = 70_000
    leaves, nodes = tree(size)
    expected = root(leaves)
    for tile in (Tile(0, 5, 256), Tile(0, 273, 112), Tile(1, 0, 256), Tile(2, 0, 1)):
        held = tiles(size, nodes)
        data = bytearray(held[tile])
        data[-1] ^= 1
        held[tile] = bytes(data)
        assert tiles_problem(size, expected, held.__getitem__) is not None, tile


def test_a_tile_of_the_wrong_length_is_named() -> None:
    _, nodes = tree(300)
    held = tiles(300, nodes)
    held[Tile(0, 1, 44)] += b"\x00"
    with pytest.raises(ValueError, match=r"tile/0/001\.p/44 is 1409 bytes, not 1408"):
        tiles_problem(300, bytes(32), held.__getitem__)
