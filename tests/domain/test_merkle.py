"""The RFC 9162 Merkle tree: known answers, then properties.

The known answers are the reference vectors of the transparency-dev/merkle Go module (the tree
code behind Certificate Transparency's Trillian and Sigstore's Rekor), over its eight standard
leaf inputs:
- leaf and node hashes of the 8-leaf tree, and the root at every size 0..8:
  ``testonly/constants.go`` (``LeafInputs``, ``NodeHashes``, ``RootHashes``);
- inclusion and consistency proofs as hex: ``proof/verify_test.go`` (``inclusionProofs``,
  ``consistencyProofs``; its leaf numbers are 1-based, here they are 0-based indexes);
- which nodes every other proof in trees of up to 8 leaves consists of: ``proof/proof_test.go``
  (``TestInclusion``, ``TestConsistency``; level 0 is the leaves, ``l`` = MTH(leaves 4..6)).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.merkle import (
    EMPTY_ROOT,
    CompletedLevels,
    MerkleBuilder,
    MerkleNode,
    NodeLookup,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    leaf_hash,
    node_hash,
    range_root,
    root,
    root_from_nodes,
    verify_consistency,
    verify_inclusion,
)

LEAF_INPUTS = [
    bytes.fromhex(text)
    for text in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
NODE_HASHES = [
    [
        bytes.fromhex(text)
        for text in (
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
            "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
        )
    ],
    [
        bytes.fromhex(text)
        for text in (
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        )
    ],
    [
        bytes.fromhex(text)
        for text in (
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
        )
    ],
    [bytes.fromhex("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328")],
]
ROOTS = [
    bytes.fromhex(text)
    for text in (
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
LEAF_HASHES = NODE_HASHES[0]
SOME_HASH = bytes.fromhex("abacaba000000000000000000000000000000000000000000060061e00123456")

HEX_INCLUSION_PROOFS = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}
HEX_CONSISTENCY_PROOFS = {
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (6, 7): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}

# Proofs named by their nodes, (level, index) in the 8-leaf tree; "l" is MTH(leaves 4..6), the
# root of an incomplete subtree, which is no node of the 8-leaf tree.
INCLUSION_NODES: dict[tuple[int, int], list[tuple[int, int] | str]] = {
    (0, 1): [],
    (0, 2): [(0, 1)],
    (1, 2): [(0, 0)],
    (1, 3): [(0, 0), (0, 2)],
    (0, 7): [(0, 1), (1, 1), "l"],
    (1, 7): [(0, 0), (1, 1), "l"],
    (2, 7): [(0, 3), (1, 0), "l"],
    (3, 7): [(0, 2), (1, 0), "l"],
    (4, 7): [(0, 5), (0, 6), (2, 0)],
    (5, 7): [(0, 4), (0, 6), (2, 0)],
    (6, 7): [(1, 2), (2, 0)],
    (2, 4): [(0, 3), (1, 0)],
    (3, 5): [(0, 2), (1, 0), (0, 4)],
    (3, 6): [(0, 2), (1, 0), (1, 2)],
    (4, 6): [(0, 5), (2, 0)],
}
CONSISTENCY_NODES: dict[tuple[int, int], list[tuple[int, int] | str]] = {
    (1, 2): [(0, 1)],
    (1, 4): [(0, 1), (1, 1)],
    (1, 6): [(0, 1), (1, 1), (1, 2)],
    (2, 3): [(0, 2)],
    (2, 8): [(1, 1), (2, 1)],
    (3, 7): [(0, 2), (0, 3), (1, 0), "l"],
    (4, 7): ["l"],
    (5, 7): [(0, 4), (0, 5), (0, 6), (2, 0)],
    (6, 7): [(1, 2), (0, 6), (2, 0)],
    (7, 8): [(0, 6), (0, 7), (1, 2), (2, 0)],
    (2, 4): [(1, 1)],
    (3, 5): [(0, 2), (0, 3), (1, 0), (0, 4)],
    (3, 6): [(0, 2), (0, 3), (1, 0), (1, 2)],
    (4, 6): [(1, 2)],
    (1, 7): [(0, 1), (1, 1), "l"],
    **{(size, size): [] for size in range(1, 9)},
}


def _nodes(names: list[tuple[int, int] | str]) -> list[bytes]:
    incomplete = node_hash(NODE_HASHES[1][2], NODE_HASHES[0][6])
    return [
        incomplete if isinstance(name, str) else NODE_HASHES[name[0]][name[1]] for name in names
    ]


def _reference_node(level: int, index: int) -> bytes:
    return NODE_HASHES[level][index]


def _lookup(stored: dict[tuple[int, int], bytes]) -> NodeLookup:
    """A node store as the checkpoint writer keeps one, keyed by (level, index)."""

    def node(level: int, index: int) -> bytes:
        return stored[level, index]

    return node


def _stored_nodes(leaf_hashes: list[bytes]) -> dict[tuple[int, int], bytes]:
    """What a writer stores: every node that MerkleBuilder.append reported."""
    builder = MerkleBuilder()
    return {
        (level, index): hash_
        for leaf in leaf_hashes
        for level, index, hash_ in builder.append(leaf)
    }


def _accepts(verify: Callable[..., bool], *claim: object) -> bool:
    """A claim with sizes that cannot be (ValueError) is as refused as one that does not verify."""
    try:
        return verify(*claim)
    except ValueError:
        return False


def _flipped(value: bytes, byte: int) -> bytes:
    altered = bytearray(value)
    altered[byte % len(altered)] ^= 0x01
    return bytes(altered)


def _flip(proof: list[bytes], position: int, byte: int) -> list[bytes]:
    return [*proof[:position], _flipped(proof[position], byte), *proof[position + 1 :]]


# --- Known answers --------------------------------------------------------------------------------


def test_leaf_and_node_hashes_match_the_reference_tree() -> None:
    assert [leaf_hash(data) for data in LEAF_INPUTS] == LEAF_HASHES
    for level in range(1, len(NODE_HASHES)):
        below = NODE_HASHES[level - 1]
        assert NODE_HASHES[level] == [
            node_hash(below[2 * index], below[2 * index + 1])
            for index in range(len(NODE_HASHES[level]))
        ]


def test_the_empty_tree_hashes_the_empty_string() -> None:
    assert root([]) == EMPTY_ROOT == hashlib.sha256(b"").digest() == ROOTS[0]
    assert MerkleBuilder().root() == EMPTY_ROOT


@pytest.mark.parametrize("size", range(9))
def test_root_at_every_size(size: int) -> None:
    assert root(LEAF_HASHES[:size]) == ROOTS[size]
    assert root_from_nodes(size, _reference_node) == ROOTS[size]


def test_builder_gives_the_reference_root_at_every_size() -> None:
    builder = MerkleBuilder()
    roots = [builder.root()]
    for leaf in LEAF_HASHES:
        builder.append(leaf)
        roots.append(builder.root())
    assert roots == ROOTS
    assert builder.size == 8


@pytest.mark.parametrize("split", range(9))
def test_append_all_gives_the_roots_and_nodes_append_gives_from_any_size(split: int) -> None:
    extended = MerkleBuilder()
    first: CompletedLevels = {}
    extended.append_all(LEAF_HASHES[:split], first)
    assert (extended.size, extended.root()) == (split, ROOTS[split])
    then: CompletedLevels = {}
    extended.append_all(iter(LEAF_HASHES[split:]), then)
    appended = MerkleBuilder()
    nodes = [node for leaf in LEAF_HASHES for node in appended.append(leaf)]
    assert (extended.size, extended.root(), extended.peaks) == (8, ROOTS[8], appended.peaks)
    # By level, in index order, from the size before them on: the nodes `append` lists.
    by_level = sorted(
        (level, (start >> level) + offset, hashed)
        for start, completed in ((0, first), (split, then))
        for level, hashes in completed.items()
        for offset, hashed in enumerate(hashes)
    )
    assert by_level == sorted(nodes)


def test_append_all_keeps_the_leaves_before_a_refused_one() -> None:
    builder = MerkleBuilder()
    with pytest.raises(ValueError, match="leaf hash must be 32 bytes, got 31"):
        builder.append_all([*LEAF_HASHES[:5], b"\x00" * 31, LEAF_HASHES[5]], {})
    assert (builder.size, builder.root()) == (5, ROOTS[5])
    builder.append_all(LEAF_HASHES[5:], {})
    assert builder.root() == ROOTS[8]


def test_builder_reports_the_reference_nodes_leaf_first() -> None:
    builder = MerkleBuilder()
    reported = [builder.append(leaf) for leaf in LEAF_HASHES]
    assert {(level, index): hash_ for nodes in reported for level, index, hash_ in nodes} == {
        (level, index): hash_
        for level, row in enumerate(NODE_HASHES)
        for index, hash_ in enumerate(row)
    }
    assert reported[7] == [
        (0, 7, NODE_HASHES[0][7]),
        (1, 3, NODE_HASHES[1][3]),
        (2, 1, NODE_HASHES[2][1]),
        (3, 0, NODE_HASHES[3][0]),
    ]


@pytest.mark.parametrize(("index", "size"), sorted(HEX_INCLUSION_PROOFS))
def test_inclusion_proofs_match_the_hex_vectors(index: int, size: int) -> None:
    proof = [bytes.fromhex(text) for text in HEX_INCLUSION_PROOFS[index, size]]
    assert inclusion_proof(LEAF_HASHES[:size], index) == proof
    assert inclusion_proof_from_nodes(index, size, _reference_node) == proof
    assert verify_inclusion(LEAF_HASHES[index], index, size, proof, ROOTS[size])


@pytest.mark.parametrize(("index", "size"), sorted(INCLUSION_NODES))
def test_inclusion_proofs_name_the_reference_nodes(index: int, size: int) -> None:
    proof = _nodes(INCLUSION_NODES[index, size])
    assert inclusion_proof(LEAF_HASHES[:size], index) == proof
    assert inclusion_proof_from_nodes(index, size, _reference_node) == proof
    assert verify_inclusion(LEAF_HASHES[index], index, size, proof, ROOTS[size])


@pytest.mark.parametrize(("old_size", "new_size"), sorted(HEX_CONSISTENCY_PROOFS))
def test_consistency_proofs_match_the_hex_vectors(old_size: int, new_size: int) -> None:
    proof = [bytes.fromhex(text) for text in HEX_CONSISTENCY_PROOFS[old_size, new_size]]
    assert consistency_proof(LEAF_HASHES[:new_size], old_size) == proof
    assert consistency_proof_from_nodes(old_size, new_size, _reference_node) == proof
    assert verify_consistency(old_size, new_size, ROOTS[old_size], ROOTS[new_size], proof)


@pytest.mark.parametrize(("old_size", "new_size"), sorted(CONSISTENCY_NODES))
def test_consistency_proofs_name_the_reference_nodes(old_size: int, new_size: int) -> None:
    proof = _nodes(CONSISTENCY_NODES[old_size, new_size])
    assert consistency_proof(LEAF_HASHES[:new_size], old_size) == proof
    assert consistency_proof_from_nodes(old_size, new_size, _reference_node) == proof
    assert verify_consistency(old_size, new_size, ROOTS[old_size], ROOTS[new_size], proof)


@pytest.mark.parametrize(("index", "size"), sorted(HEX_INCLUSION_PROOFS))
def test_no_corrupted_inclusion_claim_verifies(index: int, size: int) -> None:
    """verify_test.go's corruptInclusionProof probes, the root kept as it was."""
    proof = [bytes.fromhex(text) for text in HEX_INCLUSION_PROOFS[index, size]]
    leaf, tree_root = LEAF_HASHES[index], ROOTS[size]
    probes: dict[str, tuple[bytes, int, int, list[bytes], bytes]] = {
        "index - 1": (leaf, index - 1, size, proof, tree_root),
        "index + 1": (leaf, index + 1, size, proof, tree_root),
        "index ^ 2": (leaf, index ^ 2, size, proof, tree_root),
        "size * 2": (leaf, index, size * 2, proof, tree_root),
        "size // 2": (leaf, index, size // 2, proof, tree_root),
        "wrong leaf": (b"WrongLeaf", index, size, proof, tree_root),
        "empty root": (leaf, index, size, proof, EMPTY_ROOT),
        "random root": (leaf, index, size, proof, SOME_HASH),
        "trailing garbage": (leaf, index, size, [*proof, b""], tree_root),
        "trailing root": (leaf, index, size, [*proof, tree_root], tree_root),
        "preceding garbage": (leaf, index, size, [b"", *proof], tree_root),
        "preceding root": (leaf, index, size, [tree_root, *proof], tree_root),
        "removed component": (leaf, index, size, proof[:-1], tree_root),
        "inserted component": (leaf, index, size, [proof[0], SOME_HASH, *proof[1:]], tree_root),
        **{
            f"flipped proof[{position}]": (leaf, index, size, _flip(proof, position, 0), tree_root)
            for position in range(len(proof))
        },
    }
    accepted = [name for name, claim in probes.items() if _accepts(verify_inclusion, *claim)]
    assert accepted == []


@pytest.mark.parametrize(("old_size", "new_size"), sorted(HEX_CONSISTENCY_PROOFS))
def test_no_corrupted_consistency_claim_verifies(old_size: int, new_size: int) -> None:
    """verify_test.go's corruptConsistencyProof probes, the roots kept as they were."""
    proof = [bytes.fromhex(text) for text in HEX_CONSISTENCY_PROOFS[old_size, new_size]]
    old, new = ROOTS[old_size], ROOTS[new_size]
    probes: dict[str, tuple[int, int, bytes, bytes, list[bytes]]] = {
        "old size - 1": (old_size - 1, new_size, old, new, proof),
        "old size + 1": (old_size + 1, new_size, old, new, proof),
        "old size ^ 2": (old_size ^ 2, new_size, old, new, proof),
        "new size * 2": (old_size, new_size * 2, old, new, proof),
        "new size // 2": (old_size, new_size // 2, old, new, proof),
        "wrong old root": (old_size, new_size, b"WrongRoot", new, proof),
        "wrong new root": (old_size, new_size, old, b"WrongRoot", proof),
        "swapped roots": (old_size, new_size, new, old, proof),
        "empty proof": (old_size, new_size, old, new, []),
        "trailing garbage": (old_size, new_size, old, new, [*proof, b""]),
        "trailing old root": (old_size, new_size, old, new, [*proof, old]),
        "trailing new root": (old_size, new_size, old, new, [*proof, new]),
        "preceding garbage": (old_size, new_size, old, new, [b"", *proof]),
        "preceding old root": (old_size, new_size, old, new, [old, *proof]),
        "preceding new root": (old_size, new_size, old, new, [new, *proof]),
        "preceding proof[0]": (old_size, new_size, old, new, [proof[0], *proof]),
        "truncated proof": (old_size, new_size, old, new, proof[:-1]),
        **{
            f"flipped proof[{position}]": (old_size, new_size, old, new, _flip(proof, position, 0))
            for position in range(len(proof))
        },
    }
    accepted = [name for name, claim in probes.items() if _accepts(verify_consistency, *claim)]
    assert accepted == []


def test_every_tree_extends_the_empty_one_and_only_with_an_empty_proof() -> None:
    assert consistency_proof(LEAF_HASHES, 0) == []
    assert verify_consistency(0, 8, EMPTY_ROOT, ROOTS[8], [])
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert not verify_consistency(0, 8, ROOTS[1], ROOTS[8], [])
    assert not verify_consistency(0, 8, EMPTY_ROOT, ROOTS[8], [EMPTY_ROOT])
    assert not verify_consistency(0, 0, EMPTY_ROOT, ROOTS[1], [])


def test_equal_sizes_are_consistent_only_with_equal_roots_and_no_proof() -> None:
    assert verify_consistency(5, 5, ROOTS[5], ROOTS[5], [])
    assert not verify_consistency(5, 5, ROOTS[5], ROOTS[6], [])
    assert not verify_consistency(5, 5, ROOTS[5], ROOTS[5], [ROOTS[5]])


def test_a_proper_extension_needs_a_proof() -> None:
    assert not verify_consistency(1, 2, ROOTS[1], ROOTS[2], [])


# --- Bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [-1, 8, 9])
def test_an_index_outside_the_tree_is_refused(index: int) -> None:
    message = f"leaf index {index} is outside a tree of 8 leaves"
    with pytest.raises(ValueError, match=message):
        inclusion_proof(LEAF_HASHES, index)
    with pytest.raises(ValueError, match=message):
        inclusion_proof_from_nodes(index, 8, _reference_node)
    with pytest.raises(ValueError, match=message):
        verify_inclusion(LEAF_HASHES[0], index, 8, [], ROOTS[8])


def test_no_leaf_is_in_the_empty_tree() -> None:
    with pytest.raises(ValueError, match="leaf index 0 is outside a tree of 0 leaves"):
        inclusion_proof([], 0)


@pytest.mark.parametrize(("old_size", "new_size"), [(-1, 8), (9, 8), (1, 0)])
def test_an_old_size_outside_the_new_tree_is_refused(old_size: int, new_size: int) -> None:
    message = f"old tree size {old_size} is outside 0..{new_size}"
    with pytest.raises(ValueError, match=message):
        consistency_proof(LEAF_HASHES[:new_size], old_size)
    with pytest.raises(ValueError, match=message):
        consistency_proof_from_nodes(old_size, new_size, _reference_node)
    with pytest.raises(ValueError, match=message):
        verify_consistency(old_size, new_size, ROOTS[1], ROOTS[8], [])


@pytest.mark.parametrize("value", [b"", b"\x00" * 31, b"\x00" * 33])
def test_hashes_of_another_length_are_refused(value: bytes) -> None:
    message = f"leaf hash must be 32 bytes, got {len(value)}"
    with pytest.raises(ValueError, match=message):
        MerkleBuilder().append(value)
    with pytest.raises(ValueError, match=message):
        root([*LEAF_HASHES, value])
    with pytest.raises(ValueError, match=message):
        inclusion_proof([value, *LEAF_HASHES], 1)
    with pytest.raises(ValueError, match=message):
        consistency_proof([*LEAF_HASHES, value], 1)


@pytest.mark.parametrize(("start", "end"), [(3, 3), (5, 4), (-1, 2)])
def test_a_range_without_leaves_is_refused(start: int, end: int) -> None:
    with pytest.raises(ValueError, match=rf"leaf range \[{start}, {end}\) holds no leaves"):
        range_root(start, end, _reference_node)


def test_a_negative_tree_size_is_refused() -> None:
    with pytest.raises(ValueError, match="tree size -1 is negative"):
        root_from_nodes(-1, _reference_node)


@pytest.mark.parametrize("value", [b"", b"\x00" * 31, NODE_HASHES[0][0].hex().encode()])
def test_a_stored_node_of_another_length_is_refused(value: bytes) -> None:
    with pytest.raises(ValueError, match=f"node hash must be 32 bytes, got {len(value)}"):
        root_from_nodes(5, lambda level, index: value)


# --- Proofs from stored nodes ---------------------------------------------------------------------


def test_a_missing_node_is_a_key_error_naming_it() -> None:
    stored = _stored_nodes(LEAF_HASHES)
    del stored[1, 1]
    node = _lookup(stored)
    with pytest.raises(KeyError, match=r"^\(1, 1\)$"):
        inclusion_proof_from_nodes(0, 8, node)
    with pytest.raises(KeyError, match=r"^\(1, 1\)$"):
        consistency_proof_from_nodes(2, 8, node)
    with pytest.raises(KeyError, match=r"^\(1, 1\)$"):
        range_root(2, 4, node)
    # Nodes that the proof does not need may be missing.
    assert inclusion_proof_from_nodes(7, 8, node) == _nodes([(0, 6), (1, 2), (2, 0)])


def test_a_tree_larger_than_the_stored_one_is_a_missing_node() -> None:
    with pytest.raises(KeyError, match=r"^\(0, 8\)$"):
        root_from_nodes(9, _lookup(_stored_nodes(LEAF_HASHES)))


def test_append_reports_exactly_the_subtrees_each_leaf_completes() -> None:
    hashes = [leaf_hash(b"%d" % number) for number in range(70)]
    builder = MerkleBuilder()
    stored: dict[tuple[int, int], bytes] = {}
    for size, leaf in enumerate(hashes, start=1):
        completed = builder.append(leaf)
        assert completed[0] == (0, size - 1, leaf)
        assert [level for level, _, _ in completed] == list(range(len(completed)))
        assert not stored.keys() & {(level, index) for level, index, _ in completed}
        stored.update({(level, index): hash_ for level, index, hash_ in completed})
        assert stored == {
            (level, index): root(hashes[index << level : (index + 1) << level])
            for level in range(size.bit_length())
            for index in range(size >> level)
        }


def test_every_range_root_from_nodes_is_the_root_of_that_range() -> None:
    hashes = [leaf_hash(b"%d" % number) for number in range(40)]
    node = _lookup(_stored_nodes(hashes))
    for start in range(40):
        for end in range(start + 1, 41):
            assert range_root(start, end, node) == root(hashes[start:end]), (start, end)


def test_node_proofs_equal_leaf_proofs_at_every_size_up_to_70() -> None:
    """Each size asks only the nodes stored by then, as a writer that stores what append reports
    has them: every proof of the first n leaves is available after the n-th append."""
    hashes = [leaf_hash(b"%d" % number) for number in range(70)]
    builder = MerkleBuilder()
    stored: dict[tuple[int, int], bytes] = {}
    node = _lookup(stored)
    roots: list[bytes] = []
    for size in range(71):
        leaves = hashes[:size]
        roots.append(root(leaves))
        assert root_from_nodes(size, node) == roots[size]
        for index in range(size):
            proof = inclusion_proof_from_nodes(index, size, node)
            assert proof == inclusion_proof(leaves, index), (index, size)
            assert verify_inclusion(hashes[index], index, size, proof, roots[size])
        for old_size in range(size + 1):
            proof = consistency_proof_from_nodes(old_size, size, node)
            assert proof == consistency_proof(leaves, old_size), (old_size, size)
            assert verify_consistency(old_size, size, roots[old_size], roots[size], proof)
        if size < len(hashes):
            stored.update({(level, index): h for level, index, h in builder.append(hashes[size])})


def test_a_proof_from_nodes_costs_a_logarithmic_number_of_lookups() -> None:
    stored = _stored_nodes([leaf_hash(b"%d" % number) for number in range(100)])
    asked: list[tuple[int, int]] = []

    def node(level: int, index: int) -> bytes:
        asked.append((level, index))
        return stored[level, index]

    for size in range(1, 101):
        bound = 2 * size.bit_length()
        for index in range(size):
            asked.clear()
            inclusion_proof_from_nodes(index, size, node)
            assert len(asked) <= bound, (index, size, asked)
        for old_size in range(size + 1):
            asked.clear()
            consistency_proof_from_nodes(old_size, size, node)
            assert len(asked) <= bound, (old_size, size, asked)


# --- Resuming a builder from a checkpoint's peaks -------------------------------------------------


def test_a_resumed_builder_continues_the_same_tree() -> None:
    first = MerkleBuilder()
    for leaf in LEAF_HASHES[:5]:
        first.append(leaf)
    resumed = MerkleBuilder.resumed(first.size, first.peaks)
    for leaf in LEAF_HASHES[5:]:
        resumed.append(leaf)
    assert (resumed.size, resumed.root()) == (8, ROOTS[8])


@given(st.lists(st.binary(max_size=12), max_size=70), st.data())
def test_a_resumed_builder_reports_the_nodes_a_fresh_one_would(
    inputs: list[bytes], data: st.DataObject
) -> None:
    """A writer resuming from a checkpoint's peaks stores what one that never stopped would."""
    hashes = [leaf_hash(value) for value in inputs]
    cut = data.draw(st.integers(0, len(hashes)), label="resumed at")
    fresh = MerkleBuilder()
    reported = [fresh.append(leaf) for leaf in hashes]
    first = MerkleBuilder()
    for leaf in hashes[:cut]:
        first.append(leaf)
    resumed = MerkleBuilder.resumed(first.size, first.peaks)
    assert [resumed.append(leaf) for leaf in hashes[cut:]] == reported[cut:]


@pytest.mark.parametrize(
    ("size", "peaks", "message"),
    [
        (5, [NODE_HASHES[2][0]], "a tree of 5 leaves has 2 peaks, got 1"),
        (-1, [], "tree size -1 is negative"),
        (1, [b"\x00"], "peak hash must be 32 bytes, got 1"),
    ],
)
def test_peaks_that_cannot_be_a_tree_are_refused(
    size: int, peaks: list[bytes], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        MerkleBuilder.resumed(size, peaks)


# --- Properties -----------------------------------------------------------------------------------


def test_every_proof_of_every_tree_up_to_33_leaves_verifies() -> None:
    """Every tree shape up to one leaf past 32: no edge case of PATH or SUBPROOF left to chance."""
    hashes = [leaf_hash(b"%d" % number) for number in range(33)]
    roots = [root(hashes[:size]) for size in range(34)]
    for size in range(1, 34):
        for index in range(size):
            proof = inclusion_proof(hashes[:size], index)
            assert verify_inclusion(hashes[index], index, size, proof, roots[size])
        for old_size in range(size + 1):
            proof = consistency_proof(hashes[:size], old_size)
            assert verify_consistency(old_size, size, roots[old_size], roots[size], proof)


# Distinct leaves (at least two, so that there is a wrong index to claim): with two equal leaves a
# proof for one position honestly proves the other too.
LEAVES = st.lists(st.binary(max_size=12), min_size=2, max_size=70, unique=True).map(
    lambda inputs: [leaf_hash(data) for data in inputs]
)
EXTRA_LEAVES = [leaf_hash(b"extra %d" % number) for number in range(8)]


@given(st.lists(st.binary(max_size=12), max_size=70))
def test_the_builder_root_equals_the_tree_root_at_every_size(inputs: list[bytes]) -> None:
    hashes = [leaf_hash(data) for data in inputs]
    builder = MerkleBuilder()
    for size, leaf in enumerate(hashes, start=1):
        builder.append(leaf)
        assert (builder.size, builder.root()) == (size, root(hashes[:size]))
        assert len(builder.peaks) == size.bit_count()
        assert MerkleBuilder.resumed(size, builder.peaks).root() == builder.root()


@given(LEAVES, st.data())
def test_every_inclusion_proof_verifies_and_no_altered_claim_does(
    hashes: list[bytes], data: st.DataObject
) -> None:
    size = len(hashes)
    tree_root = root(hashes)
    index = data.draw(st.integers(0, size - 1), label="index")
    proof = inclusion_proof(hashes, index)
    assert verify_inclusion(hashes[index], index, size, proof, tree_root)

    other_index = data.draw(st.integers(0, size - 1).filter(lambda i: i != index), label="other")
    assert not verify_inclusion(hashes[index], other_index, size, proof, tree_root)
    assert not verify_inclusion(hashes[other_index], index, size, proof, tree_root)
    other_size = data.draw(
        st.integers(index + 1, size + 8).filter(lambda s: s != size), label="size"
    )
    other_root = root([*hashes, *EXTRA_LEAVES][:other_size])
    assert not verify_inclusion(hashes[index], index, other_size, proof, other_root)
    assert not verify_inclusion(hashes[index], index, size, [*proof, tree_root], tree_root)
    assert not verify_inclusion(hashes[index], index, size, [tree_root, *proof], tree_root)
    if proof:
        position = data.draw(st.integers(0, len(proof) - 1), label="position")
        byte = data.draw(st.integers(0, 31), label="byte")
        assert not verify_inclusion(
            hashes[index], index, size, _flip(proof, position, byte), tree_root
        )
        assert not verify_inclusion(hashes[index], index, size, proof[:-1], tree_root)
        assert not verify_inclusion(hashes[index], index, size, proof, _flipped(tree_root, byte))


@given(LEAVES, st.data())
def test_every_consistency_proof_verifies_and_no_altered_claim_does(
    hashes: list[bytes], data: st.DataObject
) -> None:
    new_size = len(hashes)
    new_root = root(hashes)
    old_size = data.draw(st.integers(0, new_size), label="old size")
    old_root = root(hashes[:old_size])
    proof = consistency_proof(hashes, old_size)
    assert verify_consistency(old_size, new_size, old_root, new_root, proof)
    if not 0 < old_size < new_size:
        return

    other_new = data.draw(
        st.integers(old_size + 1, new_size + 8).filter(lambda s: s != new_size), label="new size"
    )
    other_new_root = root([*hashes, *EXTRA_LEAVES][:other_new])
    assert not verify_consistency(old_size, other_new, old_root, other_new_root, proof)
    if new_size > 2:
        other_old = data.draw(
            st.integers(1, new_size - 1).filter(lambda s: s != old_size), label="old size'"
        )
        assert not verify_consistency(
            other_old, new_size, root(hashes[:other_old]), new_root, proof
        )
    assert not verify_consistency(old_size, new_size, new_root, old_root, proof)
    assert not verify_consistency(old_size, new_size, old_root, new_root, proof[:-1])
    assert not verify_consistency(old_size, new_size, old_root, new_root, [*proof, new_root])
    assert not verify_consistency(old_size, new_size, old_root, new_root, [proof[0], *proof])
    position = data.draw(st.integers(0, len(proof) - 1), label="position")
    byte = data.draw(st.integers(0, 31), label="byte")
    assert not verify_consistency(
        old_size, new_size, old_root, new_root, _flip(proof, position, byte)
    )


@given(LEAVES, st.data())
def test_a_log_rewritten_below_the_old_size_does_not_extend_it(
    hashes: list[bytes], data: st.DataObject
) -> None:
    """The rollback check: a log whose first events changed cannot prove it extends a checkpoint."""
    new_size = len(hashes)
    old_size = data.draw(st.integers(1, new_size), label="old size")
    old_root = root(hashes[:old_size])
    position = data.draw(st.integers(0, old_size - 1), label="rewritten")
    forged = data.draw(st.binary(max_size=12).map(leaf_hash).filter(lambda h: h not in hashes))
    rewritten = [*hashes[:position], forged, *hashes[position + 1 :]]
    assert not verify_consistency(
        old_size, new_size, old_root, root(rewritten), consistency_proof(rewritten, old_size)
    )


@pytest.mark.parametrize("cuts", [(1, 2, 3), (3, 5, 7), (6, 31, 33), (32, 33, 64), (13, 40, 66)])
def test_append_all_in_runs_of_any_length_makes_what_append_makes(cuts: tuple[int, ...]) -> None:
    # Runs that start and end at odd and even indices of every level, over a tree of 67 leaves:
    # where a level's first node is a right child, its left sibling is a peak made before.
    leaves = [leaf_hash(bytes([number])) for number in range(67)]
    appended = MerkleBuilder()
    nodes = sorted(node for leaf in leaves for node in appended.append(leaf))
    extended = MerkleBuilder()
    made: list[MerkleNode] = []
    for start, end in zip((0, *cuts), (*cuts, len(leaves)), strict=True):
        completed: CompletedLevels = {}
        extended.append_all(leaves[start:end], completed)
        made += [
            (level, (start >> level) + offset, hashed)
            for level, hashes in completed.items()
            for offset, hashed in enumerate(hashes)
        ]
        assert (extended.size, extended.root()) == (end, root(leaves[:end]))
    assert sorted(made) == nodes
    assert extended.peaks == appended.peaks
