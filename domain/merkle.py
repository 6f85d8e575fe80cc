"""The RFC 9162 Merkle tree over SHA-256: roots, inclusion and consistency proofs (section 2.1).

This is the tree of Certificate Transparency and Sigstore Rekor, so that a checkpoint of the
ledger can be checked with any RFC 9162 verifier. Leaves and nodes are hashed under different
prefixes (0x00, 0x01) so that no node can pass for a leaf. Every function here takes leaf hashes,
not leaf data: what a leaf binds is the caller's choice, the tree's shape is not.

Proof generation follows the recursive definitions (MTH, PATH, SUBPROOF); verification follows
the RFC's iterative algorithms, which cost O(log n) and need no leaves. `MerkleBuilder` computes
the same roots over a stream of leaves in O(log n) memory, and reports every complete subtree
("node") as it completes, so that a writer can store them.

Roots and proofs come in two forms with one algorithm behind them: from the leaf hashes, which
costs O(n) hashes for a tree of n leaves, or from stored nodes (`NodeLookup`), which costs
O(log n) lookups.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

NodeLookup = Callable[[int, int], bytes]
"""(level, index) -> the root of the complete subtree over leaves [index * 2**level,
(index + 1) * 2**level); level 0 is the leaf hashes. A lookup raises KeyError for a node it does
not hold; the functions here let that KeyError through unchanged, so the caller sees which node
was missing. After n leaves every complete subtree inside [0, n) exists, and that is all the
roots and proofs of the first n leaves ask for."""

MerkleNode = tuple[int, int, bytes]
"""(level, index, hash) of a complete subtree: what a `NodeLookup` is asked and answers."""

CompletedLevels = dict[int, list[bytes]]
"""Nodes completed by a run of leaves, by level, in index order (`MerkleBuilder.append_all`)."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def root(leaf_hashes: Sequence[bytes]) -> bytes:
    """MTH (section 2.1.1): the root of the tree over these leaf hashes, in order."""
    _check_hashes(leaf_hashes, "leaf hash")
    return root_from_nodes(len(leaf_hashes), _nodes_hashed_from(leaf_hashes))


def root_from_nodes(size: int, node: NodeLookup) -> bytes:
    """MTH of the first `size` leaves, from the stored nodes."""
    if size < 0:
        raise ValueError(f"tree size {size} is negative")
    if size == 0:
        return EMPTY_ROOT
    return range_root(0, size, node)


def range_root(start: int, end: int, node: NodeLookup) -> bytes:
    """MTH of leaves [start, end), from the complete nodes inside that range.

    A range that is a complete node is one lookup; any other splits as MTH does, so its ragged
    right edge folds like a builder's peaks. A range whose start is a multiple of a power of two
    at least its length (every range a proof uses) costs at most one lookup per bit of its length.
    """
    if not 0 <= start < end:
        raise ValueError(f"leaf range [{start}, {end}) holds no leaves (expected 0 <= start < end)")
    width = end - start
    if width & (width - 1) == 0 and start % width == 0:
        level = width.bit_length() - 1
        stored = node(level, start >> level)
        _check_hashes((stored,), "node hash")
        return stored
    middle = start + _split(width)
    return node_hash(range_root(start, middle, node), range_root(middle, end, node))


def inclusion_proof(leaf_hashes: Sequence[bytes], index: int) -> list[bytes]:
    """PATH (section 2.1.3.1): the sibling hashes from leaf `index` up to the root."""
    _check_hashes(leaf_hashes, "leaf hash")
    return inclusion_proof_from_nodes(index, len(leaf_hashes), _nodes_hashed_from(leaf_hashes))


def inclusion_proof_from_nodes(index: int, size: int, node: NodeLookup) -> list[bytes]:
    """PATH for leaf `index` of the tree of the first `size` leaves, from the stored nodes."""
    _check_index(index, size)
    siblings: list[bytes] = []
    start, end = 0, size
    while end - start > 1:
        middle = start + _split(end - start)
        if index < middle:
            siblings.append(range_root(middle, end, node))
            end = middle
        else:
            siblings.append(range_root(start, middle, node))
            start = middle
    # Collected from the root down; the proof lists them from the leaf up.
    return siblings[::-1]


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Section 2.1.3.2: whether `proof` puts `leaf_hash` at `index` of the tree (`size`, `root`)."""
    _check_index(index, size)
    # fn walks the leaf's position up the tree, sn the last leaf's; they meet at the root.
    fn, sn = index, size - 1
    computed = leaf_hash
    for sibling in proof:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            computed = node_hash(sibling, computed)
            fn, sn = _skip_levels_without_right_sibling(fn, sn)
        else:
            computed = node_hash(computed, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and computed == root


def consistency_proof(leaf_hashes: Sequence[bytes], old_size: int) -> list[bytes]:
    """PROOF (section 2.1.4.1): the hashes that show these leaves extend their first `old_size`."""
    _check_hashes(leaf_hashes, "leaf hash")
    return consistency_proof_from_nodes(old_size, len(leaf_hashes), _nodes_hashed_from(leaf_hashes))


def consistency_proof_from_nodes(old_size: int, new_size: int, node: NodeLookup) -> list[bytes]:
    """PROOF that the first `new_size` leaves extend the first `old_size`, from stored nodes."""
    _check_sizes(old_size, new_size)
    if old_size in (0, new_size):
        # PROOF is defined for 0 < m < n: nothing is needed to extend the empty tree or oneself.
        return []
    hashes: list[bytes] = []
    start, end, old_end = 0, new_size, old_size
    # SUBPROOF's flag b: whether the old tree's part still in view is the whole old tree, whose
    # root the verifier already holds and which therefore need not be sent.
    whole_old_tree = True
    while old_end != end:
        middle = start + _split(end - start)
        if old_end <= middle:
            hashes.append(range_root(middle, end, node))
            end = middle
        else:
            hashes.append(range_root(start, middle, node))
            start = middle
            whole_old_tree = False
    if not whole_old_tree:
        hashes.append(range_root(start, end, node))
    # Collected from the root down; the proof lists them from the bottom up.
    return hashes[::-1]


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Section 2.1.4.2: whether `proof` shows the tree `new_root` extends the tree `old_root`."""
    _check_sizes(old_size, new_size)
    if old_size == 0:
        # Every tree extends the empty one, whose root is fixed (section 2.1.1); an empty new tree
        # must have that root too, a larger one's root cannot be checked without its leaves.
        return not proof and old_root == EMPTY_ROOT and (new_size > 0 or new_root == EMPTY_ROOT)
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    # A complete old tree is a node of the new one: the verifier's own old root starts the path.
    path = [old_root, *proof] if old_size & (old_size - 1) == 0 else list(proof)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    old_computed = new_computed = path[0]
    for hash_ in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_computed = node_hash(hash_, old_computed)
            new_computed = node_hash(hash_, new_computed)
            fn, sn = _skip_levels_without_right_sibling(fn, sn)
        else:
            new_computed = node_hash(new_computed, hash_)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and old_computed == old_root and new_computed == new_root


class MerkleBuilder:
    """MTH over leaf hashes given one at a time, with the root at the current size on demand.

    It keeps the roots ("peaks") of the complete subtrees that the binary form of the size
    names, largest first: at most one per bit, so memory is O(log n) however long the log. A
    writer can store a checkpoint's peaks and resume from them, paying only for new leaves.
    """

    def __init__(self) -> None:
        self._size = 0
        self._peaks: list[bytes] = []

    @classmethod
    def resumed(cls, size: int, peaks: Sequence[bytes]) -> MerkleBuilder:
        """A builder that continues the tree of `size` leaves whose peaks these are."""
        if size < 0:
            raise ValueError(f"tree size {size} is negative")
        if len(peaks) != size.bit_count():
            raise ValueError(
                f"a tree of {size} leaves has {size.bit_count()} peaks, got {len(peaks)}"
            )
        _check_hashes(peaks, "peak hash")
        builder = cls()
        builder._size = size
        builder._peaks = list(peaks)
        return builder

    @property
    def size(self) -> int:
        return self._size

    @property
    def peaks(self) -> tuple[bytes, ...]:
        return tuple(self._peaks)

    def append(self, leaf_hash: bytes) -> list[MerkleNode]:
        """Add a leaf; returns the nodes it completed, the leaf itself first, then upwards."""
        if len(leaf_hash) != HASH_SIZE:  # `_check_hashes`, inline: this runs once per event
            raise ValueError(f"leaf hash must be {HASH_SIZE} bytes, got {len(leaf_hash)}")
        completed: list[MerkleNode] = [(0, self._size, leaf_hash)]
        level, index, node = completed[0]
        # A node at an odd index is a right child: the newest peak, a complete subtree of its
        # height, is its left sibling, and together they complete their parent.
        while index & 1:
            level, index, node = level + 1, index >> 1, node_hash(self._peaks.pop(), node)
            completed.append((level, index, node))
        self._peaks.append(node)
        self._size += 1
        return completed

    def append_all(self, leaf_hashes: Iterable[bytes], completed: CompletedLevels) -> None:
        """`append` each leaf, the nodes they complete added to ``completed`` by level instead
        of listed one by one: a verifier holding a whole log's nodes to the stored ones pays
        only for the hashes, which it makes once per event. At each level the nodes come in
        index order, consecutive from ``size >> level`` (``size`` as it was before them)."""
        leaves = list(leaf_hashes)
        lengths = list(map(len, leaves))  # one C-level pass; the search below only on a refusal
        if lengths.count(HASH_SIZE) != len(lengths):
            refused = next(at for at, length in enumerate(lengths) if length != HASH_SIZE)
            self.append_all(leaves[:refused], completed)  # those before it are in, as with `append`
            raise ValueError(f"leaf hash must be {HASH_SIZE} bytes, got {lengths[refused]}")
        old_size, old_peaks = self._size, self._peaks
        size = old_size + len(leaves)
        # The old peaks by level: the one at an odd index's level is its left sibling.
        peak_at = {
            level: old_peaks[-1 - rank]
            for rank, level in enumerate(
                level for level in range(old_size.bit_length()) if old_size >> level & 1
            )
        }
        # A level at a time, each parent one hash over a pair of the level below: the loop is
        # over levels, not leaves, and the hashes are hashlib's, made in a comprehension.
        sha256, prefix = hashlib.sha256, _NODE_PREFIX
        new_peaks: dict[int, bytes] = {}
        level, nodes = 0, leaves
        while nodes:
            first = old_size >> level  # the index of ``nodes[0]`` at its level
            completed.setdefault(level, []).extend(nodes)
            if (first + len(nodes)) & 1:
                new_peaks[level] = nodes[-1]  # its right sibling is still to come
            if first & 1:
                nodes = [peak_at[level], *nodes]
            nodes = [
                sha256(prefix + left + right).digest()
                for left, right in zip(nodes[::2], nodes[1::2], strict=False)
            ]
            level += 1
        self._peaks = [
            new_peaks.get(level) or peak_at[level]
            for level in reversed(range(size.bit_length()))
            if size >> level & 1
        ]
        self._size = size

    def root(self) -> bytes:
        if not self._peaks:
            return EMPTY_ROOT
        # MTH splits at the largest power of two below the size, so the peaks join from the right.
        computed = self._peaks[-1]
        for peak in reversed(self._peaks[:-1]):
            computed = node_hash(peak, computed)
        return computed


def _split(size: int) -> int:
    """k of section 2.1.1: the largest power of two smaller than `size` (> 1)."""
    return 1 << ((size - 1).bit_length() - 1)


def _nodes_hashed_from(leaf_hashes: Sequence[bytes]) -> NodeLookup:
    """The nodes of these leaves, each hashed when asked for (2**level - 1 hashes): the leaf
    list's stand-in for stored nodes, so that both forms of every proof run the same code."""

    def node(level: int, index: int) -> bytes:
        if level == 0:
            return leaf_hashes[index]
        return node_hash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1))

    return node


def _skip_levels_without_right_sibling(fn: int, sn: int) -> tuple[int, int]:
    """Climb while fn is a left child on the tree's right edge: such a node has no sibling to
    hash with, it is carried up unchanged (step "right-shift until LSB(fn) is set or fn is 0")."""
    while fn and not fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return fn, sn


def _check_index(index: int, size: int) -> None:
    if not 0 <= index < size:
        raise ValueError(
            f"leaf index {index} is outside a tree of {size} leaves (expected 0 <= index < size)"
        )


def _check_sizes(old_size: int, new_size: int) -> None:
    if not 0 <= old_size <= new_size:
        raise ValueError(
            f"old tree size {old_size} is outside 0..{new_size} (the new tree's size);"
            " a tree can only extend a smaller one"
        )


def _check_hashes(hashes: Sequence[bytes], what: str) -> None:
    # Catches leaf data passed where leaf hashes belong, which would otherwise give a valid-looking
    # but different tree.
    for value in hashes:
        if len(value) != HASH_SIZE:
            raise ValueError(f"{what} must be {HASH_SIZE} bytes, got {len(value)}")
