"""A checkpoint's leaf: one definition (`leaf_data`), and the scan's way of hashing it."""

from __future__ import annotations

from uuid import UUID

import pytest

from domain.checkpoint import leaf_data, stream_leaf_data, stream_leaf_hash
from domain.merkle import leaf_hash

STREAM = UUID("0084ad5c-6662-52d3-a1cf-0db82a7339b0")


def test_leaf_data_is_the_fixed_width_id_version_and_length_prefixed_topic_then_state() -> None:
    assert leaf_data(STREAM, 258, "t\u00e9", b"state") == (
        STREAM.bytes + bytes([0, 0, 0, 0, 0, 0, 1, 2]) + bytes([0, 0, 0, 3]) + b"t\xc3\xa9state"
    )


@pytest.mark.parametrize(
    ("version", "topic", "state"),
    [
        (1, "domain.job:Job.Started", b"mace1.k1." + b"0" * 64 + b".{}"),
        (2**63 - 1, "", b""),
        (-1, '\u2028"quoted"', bytes(range(256))),
    ],
)
def test_the_scan_hashes_exactly_the_leaf_data(version: int, topic: str, state: bytes) -> None:
    expected = leaf_hash(leaf_data(STREAM, version, topic, state))
    assert stream_leaf_data(STREAM.bytes, version, topic, state) == leaf_data(
        STREAM, version, topic, state
    )
    assert stream_leaf_hash(STREAM.bytes, version, topic, state) == expected
