"""The per-stream head index: its tree is RFC 9162's over the bucket leaves, and it tells.

Small trees (2..6 bits) are compared with `domain.merkle.root` over every bucket leaf after
random batches of head advances; every bucket's path must give that root; any edit a store
could suffer (a node, a bucket rolled back, an entry dropped or forged) must change it.
"""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.merkle import leaf_hash, node_hash, root
from domain.stream_heads import (
    BUCKET_BITS,
    HeadEntry,
    HeadsTree,
    HeadsTreeUpdate,
    Position,
    bucket_leaf,
    bucket_of,
    default_node,
    head_in,
    merge_heads,
    path_positions,
    root_from_path,
)

EMPTY_TREE_ROOT = "d1dde4488ee2d6a84097568bac1c890f742150e0ce9621ff0a5e09f69a0fb0c3"


class NodeTable:
    """A store of the tree's nodes as a table would hold them: non-default rows only."""

    def __init__(self) -> None:
        self.rows: dict[Position, bytes] = {}
        self.reads: list[Position] = []

    def node(self, level: int, index: int) -> bytes | None:
        self.reads.append((level, index))
        return self.rows.get((level, index))

    def apply(self, update: HeadsTreeUpdate) -> None:
        self.rows.update(update.stored)
        for position in update.cleared:
            del self.rows[position]

    def siblings(self, bucket: int, bits: int) -> list[bytes]:
        return [
            self.rows.get((level, index), default_node(level))
            for level, index in path_positions(bucket, bits)
        ]


class Ledger:
    """The heads of a ledger's streams, bucketed, with their tree kept in a `NodeTable`."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.buckets: dict[int, list[HeadEntry]] = {}
        self.table = NodeTable()
        self.root = default_node(bits)

    def advance(self, heads: Mapping[UUID, int]) -> None:
        advances: dict[int, dict[str, int]] = {}
        for stream, version in heads.items():
            advances.setdefault(bucket_of(stream, self.bits), {})[str(stream)] = version
        changed = {
            bucket: merge_heads(self.entries(bucket), streams)
            for bucket, streams in advances.items()
        }
        update = HeadsTree(self.table.node, self.bits).update(changed)
        self.table.apply(update)
        self.buckets.update(changed)
        self.root = update.root

    def entries(self, bucket: int) -> list[HeadEntry]:
        return self.buckets.get(bucket, [])

    def path_root(self, bucket: int, entries: list[HeadEntry] | None = None) -> bytes:
        leaf = bucket_leaf(self.entries(bucket) if entries is None else entries)
        return root_from_path(bucket, leaf, self.table.siblings(bucket, self.bits), self.bits)


def stream_in(bucket: int, number: int, bits: int) -> UUID:
    return UUID(int=bucket << (128 - bits) | number)


def full_tree_root(ledger: Ledger) -> bytes:
    return root([bucket_leaf(ledger.entries(bucket)) for bucket in range(1 << ledger.bits)])


def non_default_nodes(ledger: Ledger) -> dict[Position, bytes]:
    """Every node below the root computed from all buckets, keeping those a table stores."""
    level = [bucket_leaf(ledger.entries(bucket)) for bucket in range(1 << ledger.bits)]
    nodes: dict[Position, bytes] = {}
    for height in range(ledger.bits):
        nodes |= {
            (height, index): value
            for index, value in enumerate(level)
            if value != default_node(height)
        }
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return nodes


def populated(bits: int = 4) -> Ledger:
    ledger = Ledger(bits)
    ledger.advance({stream_in(bucket, 1, bits): 3 for bucket in (0, 5, 6, 7, 15)})
    ledger.advance({stream_in(5, 2, bits): 1, stream_in(6, 1, bits): 7})
    return ledger


@given(
    bits=st.integers(2, 6),
    batches=st.lists(
        st.dictionaries(st.uuids(), st.integers(1, 5), max_size=8), min_size=1, max_size=6
    ),
)
def test_random_advances_keep_the_rfc_9162_root_over_all_buckets(
    bits: int, batches: list[dict[UUID, int]]
) -> None:
    ledger = Ledger(bits)
    versions: dict[UUID, int] = {}
    for batch in batches:
        for stream, step in batch.items():
            versions[stream] = versions.get(stream, 0) + step
        ledger.advance({stream: versions[stream] for stream in batch})

        assert ledger.root == full_tree_root(ledger)
        assert ledger.table.rows == non_default_nodes(ledger)
        for bucket in range(1 << bits):
            assert ledger.path_root(bucket) == ledger.root
        for stream, version in versions.items():
            assert head_in(ledger.entries(bucket_of(stream, bits)), stream) == version


def test_the_empty_tree_is_the_default_at_every_level_and_pinned_at_16_bits() -> None:
    assert default_node(0) == leaf_hash(b"[]")
    assert default_node(3) == root([leaf_hash(b"[]")] * 8)
    assert default_node(BUCKET_BITS).hex() == EMPTY_TREE_ROOT
    assert HeadsTree(NodeTable().node).update({}).root.hex() == EMPTY_TREE_ROOT


def test_a_bucket_leaf_is_the_leaf_hash_of_its_canonical_entries() -> None:
    entries = [
        ("00000000-0000-0000-0000-000000000001", 3),
        ("0a000000-0000-0000-0000-00000000000b", 12),
    ]
    assert bucket_leaf(entries) == leaf_hash(
        b'[["00000000-0000-0000-0000-000000000001",3],["0a000000-0000-0000-0000-00000000000b",12]]'
    )


@given(st.uuids())
def test_a_stream_lives_in_the_bucket_of_its_first_bits(stream: UUID) -> None:
    assert bucket_of(stream) == int.from_bytes(stream.bytes[:2], "big")
    assert bucket_of(stream, 3) == stream.bytes[0] >> 5


def test_a_path_lists_the_siblings_from_the_leaf_up() -> None:
    assert path_positions(5, 3) == [(0, 4), (1, 3), (2, 0)]
    assert len(path_positions(0)) == BUCKET_BITS


def test_shared_parents_are_computed_once_and_each_sibling_off_the_paths_read_once() -> None:
    table = NodeTable()
    changed = {bucket: [(str(stream_in(bucket, 1, 3)), 1)] for bucket in (0, 1, 2)}
    update = HeadsTree(table.node, 3).update(changed)
    # Level 1's nodes 0 and 1 both sit on changed paths, so no read is needed there.
    assert table.reads == [(0, 3), (2, 1)]
    assert set(update.stored) == {(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0)}


def test_nothing_changed_reads_the_root_from_the_stored_top_nodes() -> None:
    ledger = populated()
    update = HeadsTree(ledger.table.node, ledger.bits).update({})
    assert update == HeadsTreeUpdate({}, frozenset(), ledger.root)


def test_a_bucket_emptied_again_clears_its_rows_back_to_the_empty_tree() -> None:
    ledger = Ledger(3)
    ledger.advance({stream_in(2, 1, 3): 4})
    update = HeadsTree(ledger.table.node, 3).update({2: []})
    assert update.stored == {}
    assert update.cleared == {(0, 2), (1, 1), (2, 0)}
    ledger.table.apply(update)
    assert ledger.table.rows == {}
    assert update.root == default_node(3)


def test_every_altered_or_deleted_sibling_changes_the_path_root() -> None:
    ledger = populated()
    siblings = ledger.table.siblings(6, ledger.bits)
    leaf = bucket_leaf(ledger.entries(6))
    for level in range(ledger.bits):
        altered = list(siblings)
        altered[level] = bytes([siblings[level][0] ^ 1]) + siblings[level][1:]
        assert root_from_path(6, leaf, altered, ledger.bits) != ledger.root
    # Bucket 6's path meets bucket 7's leaf and the nodes over buckets 4-5, 0-3 and 8-15, all
    # stored: a deleted row reads as the default.
    for position in path_positions(6, ledger.bits):
        stored = ledger.table.rows.pop(position)
        assert ledger.path_root(6) != ledger.root
        ledger.table.rows[position] = stored


def test_a_rolled_back_dropped_or_forged_entry_changes_the_root() -> None:
    ledger = populated()
    five_one, five_two = ledger.entries(5)
    assert ledger.path_root(5, [(five_one[0], 2), five_two]) != ledger.root
    assert ledger.path_root(5, [five_one]) != ledger.root
    assert ledger.path_root(5, []) != ledger.root
    forged = (str(stream_in(6, 9, ledger.bits)), 1)
    assert ledger.path_root(6, [*ledger.entries(6), forged]) != ledger.root


def test_a_stream_never_recorded_is_proven_absent_from_its_bucket() -> None:
    ledger = populated()
    stranger = stream_in(5, 9, ledger.bits)
    assert head_in(ledger.entries(5), stranger) == 0
    assert ledger.path_root(5) == ledger.root
    assert head_in(ledger.entries(5), stream_in(5, 2, ledger.bits)) == 1


def test_merging_advances_adds_and_raises_heads_in_stream_order() -> None:
    low, high = str(UUID(int=1)), str(UUID(int=2))
    assert merge_heads([(high, 2)], {low: 1}) == [(low, 1), (high, 2)]
    assert merge_heads([(low, 1), (high, 2)], {high: 5, low: 1}) == [(low, 1), (high, 5)]


def test_a_head_never_goes_down() -> None:
    stream = str(UUID(int=1))
    with pytest.raises(
        ValueError, match=f"head of stream {stream} would go down from version 4 to 3"
    ):
        merge_heads([(stream, 4)], {stream: 3})


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([(str(UUID(int=2)), 1), (str(UUID(int=1)), 1)], "entry 1: stream .* does not sort after"),
        ([(str(UUID(int=1)), 1), (str(UUID(int=1)), 2)], "entry 1: stream .* does not sort after"),
        ([(str(UUID(int=1)), 0)], r"entry 0: head version 0 is not an integer >= 1"),
        ([(str(UUID(int=1)), True)], r"entry 0: head version True is not an integer >= 1"),
        ([(str(UUID(int=10)).upper(), 1)], "entry 0: stream .* is not a UUID in canonical form"),
        ([("job:1", 1)], "entry 0: stream 'job:1' is not a UUID in canonical form"),
        ([(str(UUID(int=1)),)], "entry 0 is not a \\[stream, head version\\] pair"),
    ],
)
def test_malformed_entries_are_refused_naming_the_entry(
    entries: list[HeadEntry], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bucket_leaf(entries)
    with pytest.raises(ValueError, match=message):
        merge_heads(entries, {})


def test_a_malformed_advance_is_refused_naming_the_stream() -> None:
    with pytest.raises(ValueError, match="advance of stream 'x': stream 'x' is not a UUID"):
        merge_heads([], {"x": 1})
    with pytest.raises(ValueError, match="head version 0 is not an integer >= 1"):
        merge_heads([], {str(UUID(int=1)): 0})


def test_the_tree_refuses_misplaced_streams_and_bad_shapes() -> None:
    table = NodeTable()
    with pytest.raises(ValueError, match=r"stream .* belongs in bucket 1, not 0"):
        HeadsTree(table.node, 2).update({0: [(str(stream_in(1, 1, 2)), 1)]})
    with pytest.raises(ValueError, match="bucket 4 is outside a tree of 4 buckets"):
        HeadsTree(table.node, 2).update({4: []})
    with pytest.raises(ValueError, match=r"bucket bits 0 is outside 1\.\.128"):
        bucket_of(UUID(int=1), 0)
    with pytest.raises(ValueError, match="tree level -1 is negative"):
        default_node(-1)
    with pytest.raises(ValueError, match="a tree of 2 levels has 2 siblings, got 1"):
        root_from_path(0, default_node(0), [default_node(0)], 2)
    with pytest.raises(ValueError, match="sibling at level 1 must be 32 bytes, got 3"):
        root_from_path(0, default_node(0), [default_node(0), b"abc"], 2)


def test_a_stored_node_that_is_no_hash_is_refused() -> None:
    def truncated(level: int, index: int) -> bytes | None:
        return b"\x00" * 31

    with pytest.raises(ValueError, match=r"stored node \(0, 1\) must be 32 bytes, got 31"):
        HeadsTree(truncated, 2).update({0: []})
