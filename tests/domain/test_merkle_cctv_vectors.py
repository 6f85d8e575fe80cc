"""The RFC 9162 Merkle tree against the CCTV Merkle vectors, valid and invalid.

The vectors (``vectors/cctv_merkle``, source and licence in its ``SOURCE.md``) are the Community
Cryptography Test Vectors' Merkle set, prepared for ``C2SP/CCTV`` by Rasmus Dahlberg: tree heads
over the leaves "a".."p", inclusion and consistency proofs, and invalid proofs made by mutating
valid ones. Every valid one must be made and accepted exactly, every invalid one refused, whether
by a verdict of False or by refusing sizes that cannot be (`ValueError`). They sit beside the
transparency-dev reference vectors of `test_merkle.py`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from domain.merkle import (
    MerkleBuilder,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

VECTORS = Path(__file__).with_name("vectors") / "cctv_merkle"


def load(name: str) -> list[dict[str, Any]]:
    cases = orjson.loads((VECTORS / name).read_bytes())
    assert isinstance(cases, list) and cases
    return cases


def b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


TREE = load("merkle_tree.json")
LEAVES = [b64(case["leaf_hash"]) for case in TREE]


def test_every_leaf_hash_and_every_tree_head_matches() -> None:
    builder = MerkleBuilder()
    for size, case in enumerate(TREE, start=1):
        assert leaf_hash(case["leaf_data"].encode()) == b64(case["leaf_hash"]), case
        builder.append(b64(case["leaf_hash"]))
        assert builder.root() == b64(case["root_hash"]) == root(LEAVES[:size]), size


def cases(name: str) -> pytest.MarkDecorator:
    """The vectors of ``name`` as test parameters, each named by its place in the file."""
    return pytest.mark.parametrize(
        "case", load(name), ids=[f"{name}[{index}]" for index in range(len(load(name)))]
    )


def accepts(verify: Callable[..., bool], *claim: object) -> bool:
    """A claim with sizes that cannot be (ValueError) is as refused as one that does not verify."""
    try:
        return verify(*claim)
    except ValueError:
        return False


def inclusion_claim(case: dict[str, Any]) -> tuple[bytes, int, int, list[bytes], bytes]:
    path = [b64(node) for node in case["inclusion_path"]]
    return (
        b64(case["leaf_hash"]),
        case["leaf_index"],
        case["tree_size"],
        path,
        b64(case["root_hash"]),
    )


def consistency_claim(case: dict[str, Any]) -> tuple[int, int, bytes, bytes, list[bytes]]:
    path = [b64(node) for node in case["consistency_path"]]
    return case["old_size"], case["new_size"], b64(case["old_root"]), b64(case["new_root"]), path


@cases("inclusion-valid.json")
def test_every_valid_inclusion_proof_is_made_and_verifies(case: dict[str, Any]) -> None:
    leaf, index, size, path, tree_root = inclusion_claim(case)
    assert inclusion_proof(LEAVES[:size], index) == path
    assert root(LEAVES[:size]) == tree_root
    assert verify_inclusion(leaf, index, size, path, tree_root)


@cases("inclusion-invalid.json")
def test_every_invalid_inclusion_proof_is_refused(case: dict[str, Any]) -> None:
    assert not accepts(verify_inclusion, *inclusion_claim(case)), case["comment"]


@cases("consistency-valid.json")
def test_every_valid_consistency_proof_is_made_and_verifies(case: dict[str, Any]) -> None:
    old_size, new_size, old_root, new_root, path = consistency_claim(case)
    assert consistency_proof(LEAVES[:new_size], old_size) == path
    assert (root(LEAVES[:old_size]), root(LEAVES[:new_size])) == (old_root, new_root)
    assert verify_consistency(old_size, new_size, old_root, new_root, path)


@cases("consistency-invalid.json")
def test_every_invalid_consistency_proof_is_refused(case: dict[str, Any]) -> None:
    assert not accepts(verify_consistency, *consistency_claim(case)), case["comment"]


def test_the_vectors_hold_what_their_readme_says() -> None:
    """A file cut short would pass the loops above with fewer cases: the counts are pinned."""
    counts = {
        name: len(load(name))
        for name in (
            "merkle_tree.json",
            "inclusion-valid.json",
            "inclusion-invalid.json",
            "consistency-valid.json",
            "consistency-invalid.json",
        )
    }
    assert counts == {
        "merkle_tree.json": 16,
        "inclusion-valid.json": 4,
        "inclusion-invalid.json": 4,
        "consistency-valid.json": 4,
        "consistency-invalid.json": 16,
    }
