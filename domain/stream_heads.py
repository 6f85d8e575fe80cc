"""The per-stream head index: a fixed-shape Merkle tree whose root a checkpoint signs.

A tail deleted from a stream can only be caught by something outside the stream that remembers
its head. The checkpoint remembers every head at once, in `heads_root`: streams are spread over
2**bits buckets by the first bits of their UUID; a bucket's leaf binds its entries
``[[str(stream), head_version], ...]`` as canonical JSON sorted by stream; the tree is RFC 9162's
MTH over the bucket leaves in bucket order (`domain.merkle`). With a power-of-two count of leaves
the tree is complete, so one stream's head is proven by its bucket's entries plus `bits` sibling
nodes, whatever the ledger's size: a use case checks a stream in O(bits) hashes and one read.

Every node of a subtree over empty buckets is a per-level default (`default_node`), so storage
keeps only the nodes that differ from their default and a missing row reads as the default. The
stored set is then a function of the heads alone, not of the order they were recorded in, and a
rebuild from the log yields the same rows. Deleting a row, rolling a bucket back, or editing a
node changes the root recomputed from any path through it: the check fails closed. Because the
leaf binds the bucket's whole entry list, a stream absent from its bucket is proven absent too.

Nodes are addressed ``(level, index)``: level 0 are the bucket leaves, level `bits` the root.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Final
from uuid import UUID

from domain.canonical import canonical_json
from domain.merkle import HASH_SIZE, leaf_hash, node_hash

BUCKET_BITS: Final = 16
"""Bits of a stream's UUID that name its bucket: 65536 buckets, a 16-node path per proof."""

_UUID_BITS: Final = 128

HeadEntry = tuple[str, int]
"""One stream of a bucket: its UUID as ``str(uuid)`` and the version of its newest event."""

Position = tuple[int, int]
"""A node of the tree: (level, index), level 0 being the bucket leaves."""

NodeLookup = Callable[[int, int], bytes | None]
"""The stored node at (level, index), or None where none is stored (the node is the default)."""


def bucket_of(stream: UUID, bits: int = BUCKET_BITS) -> int:
    """The bucket of `stream`: the first `bits` bits of its UUID, big-endian."""
    _check_bits(bits)
    return stream.int >> (_UUID_BITS - bits)


def bucket_leaf(entries: Sequence[HeadEntry]) -> bytes:
    """The leaf hash of a bucket holding these entries (sorted by stream, each stream once)."""
    _check_entries(entries)
    return leaf_hash(canonical_json([[stream, version] for stream, version in entries]))


@cache
def default_node(level: int) -> bytes:
    """The node at `level` of a subtree whose buckets are all empty (level 0: an empty bucket)."""
    if level < 0:
        raise ValueError(f"tree level {level} is negative")
    if level == 0:
        return leaf_hash(canonical_json([]))
    below = default_node(level - 1)
    return node_hash(below, below)


def path_positions(bucket: int, bits: int = BUCKET_BITS) -> list[Position]:
    """The siblings of the nodes from `bucket`'s leaf up to the root, leaf level first."""
    _check_bucket(bucket, bits)
    return [(level, (bucket >> level) ^ 1) for level in range(bits)]


def root_from_path(
    bucket: int, leaf: bytes, siblings: Sequence[bytes], bits: int = BUCKET_BITS
) -> bytes:
    """The root that `bucket`'s leaf and its siblings (as `path_positions` orders them) give."""
    _check_bucket(bucket, bits)
    if len(siblings) != bits:
        raise ValueError(
            f"a path in a tree of {bits} levels has {bits} siblings, got {len(siblings)}"
        )
    _check_hash(leaf, "bucket leaf")
    node = leaf
    for level, sibling in enumerate(siblings):
        _check_hash(sibling, f"sibling at level {level}")
        node = node_hash(sibling, node) if (bucket >> level) & 1 else node_hash(node, sibling)
    return node


@dataclass(frozen=True)
class HeadsTreeUpdate:
    """What an update changes in storage, and the root a checkpoint then signs.

    The root itself is not among the nodes: it is never a sibling on any path, so only the
    checkpoint needs it.
    """

    stored: dict[Position, bytes]
    """Nodes to write (insert or overwrite): those on a changed path that differ from default."""
    cleared: frozenset[Position]
    """Nodes on a changed path that are now the default: to delete (if stored at all), so that
    a missing row stays the one way a default is stored."""
    root: bytes


@dataclass(frozen=True)
class HeadsTree:
    """The tree as storage holds it (`node`), updated one batch of changed buckets at a time."""

    node: NodeLookup
    bits: int = BUCKET_BITS

    def update(self, changed: Mapping[int, Sequence[HeadEntry]]) -> HeadsTreeUpdate:
        """Recompute the paths of the `changed` buckets (bucket -> its new entries) bottom-up.

        A parent that several changed paths share is computed once; every sibling off the
        changed paths is looked up once. With nothing changed the root is read from storage.
        """
        _check_bits(self.bits)
        leaves: dict[int, bytes] = {}
        for bucket, entries in changed.items():
            _check_bucket(bucket, self.bits)
            leaves[bucket] = bucket_leaf(entries)
            _check_membership(bucket, entries, self.bits)
        return self.update_leaves(leaves)

    def update_leaves(self, leaves: Mapping[int, bytes]) -> HeadsTreeUpdate:
        """`update` given the changed buckets' leaf hashes (bucket -> leaf) instead of entries.

        Over an empty store (`node` always None) and every bucket's leaf, this is the whole
        tree: what a stored index must be, node for node.
        """
        _check_bits(self.bits)
        level_nodes = dict(leaves)
        for bucket in level_nodes:
            _check_bucket(bucket, self.bits)
        if not level_nodes:
            top = self.bits - 1
            root = node_hash(self._stored_or_default(top, 0), self._stored_or_default(top, 1))
            return HeadsTreeUpdate({}, frozenset(), root)
        stored: dict[Position, bytes] = {}
        cleared: set[Position] = set()
        for level in range(self.bits):
            default = default_node(level)
            for index, value in level_nodes.items():
                if value == default:
                    cleared.add((level, index))
                else:
                    stored[(level, index)] = value
            level_nodes = self._parents(level, level_nodes)
        return HeadsTreeUpdate(stored, frozenset(cleared), level_nodes[0])

    def _parents(self, level: int, nodes: Mapping[int, bytes]) -> dict[int, bytes]:
        # One pass per level of the whole index when a verifier rebuilds it: kept to a dict
        # look-up and a hash a node.
        parents: dict[int, bytes] = {}
        for index, value in nodes.items():
            parent = index >> 1
            if parent in parents:
                continue
            sibling = nodes.get(index ^ 1)
            if sibling is None:
                sibling = self._stored_or_default(level, index ^ 1)
            parents[parent] = node_hash(sibling, value) if index & 1 else node_hash(value, sibling)
        return parents

    def _stored_or_default(self, level: int, index: int) -> bytes:
        value = self.node(level, index)
        if value is None:
            return default_node(level)
        _check_hash(value, f"stored node ({level}, {index})")
        return value


def merge_heads(entries: Sequence[HeadEntry], advances: Mapping[str, int]) -> list[HeadEntry]:
    """A bucket's entries with these streams' heads advanced (or added), sorted by stream."""
    _check_entries(entries)
    merged = dict(entries)
    for stream, version in advances.items():
        _check_entry(stream, version, f"advance of stream {stream!r}")
        current = merged.get(stream, 0)
        if version < current:
            raise ValueError(
                f"the head of stream {stream} would go down from version {current} to {version};"
                " a stream's head only advances"
            )
        merged[stream] = version
    return sorted(merged.items())


def head_in(entries: Iterable[HeadEntry], stream: UUID) -> int:
    """`stream`'s head version among a bucket's entries; 0 when absent (no event recorded)."""
    key = str(stream)
    return next((version for name, version in entries if name == key), 0)


def _check_entries(entries: Sequence[HeadEntry]) -> None:
    previous: str | None = None
    for position, entry in enumerate(entries):
        if not isinstance(entry, tuple | list) or len(entry) != 2:
            raise ValueError(f"heads entry {position} is not a [stream, head version] pair")
        stream, version = entry
        _check_entry(stream, version, f"heads entry {position}")
        if previous is not None and stream <= previous:
            raise ValueError(
                f"heads entry {position}: stream {stream} does not sort after {previous}"
                " (entries must be sorted by stream, each stream once)"
            )
        previous = stream


def _check_entry(stream: object, version: object, where: str) -> None:
    if not isinstance(stream, str) or not _is_canonical_uuid(stream):
        raise ValueError(
            f"{where}: stream {stream!r} is not a UUID in canonical form"
            " (lowercase, hyphenated, as str(uuid) writes it)"
        )
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"{where}: head version {version!r} is not an integer >= 1")


def _is_canonical_uuid(text: str) -> bool:
    try:
        return str(UUID(text)) == text
    except ValueError:
        return False


def _check_membership(bucket: int, entries: Sequence[HeadEntry], bits: int) -> None:
    """Entries already checked: a stream filed under another bucket would be looked for, and
    proven absent, in its own."""
    for stream, _version in entries:
        home = bucket_of(UUID(stream), bits)
        if home != bucket:
            raise ValueError(f"stream {stream} belongs in bucket {home}, not {bucket}")


def _check_bits(bits: int) -> None:
    # At least one level: with none the root would be the lone bucket's leaf, never stored.
    if not 1 <= bits <= _UUID_BITS:
        raise ValueError(f"bucket bits {bits} is outside 1..{_UUID_BITS} (bits of a UUID)")


def _check_bucket(bucket: int, bits: int) -> None:
    _check_bits(bits)
    if not 0 <= bucket < 1 << bits:
        raise ValueError(f"bucket {bucket} is outside a tree of {1 << bits} buckets")


def _check_hash(value: bytes, what: str) -> None:
    if len(value) != HASH_SIZE:
        raise ValueError(f"{what} must be {HASH_SIZE} bytes, got {len(value)}")
