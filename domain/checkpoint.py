"""Checkpoints: signed commitments to the whole ledger, chained, in a stream of their own.

A checkpoint commits to every stored event of every other stream up to a notification id, in
notification (commit) order, as the leaves of an RFC 9162 Merkle tree (`domain.merkle`), and to
each of those streams' length at that point (`heads_root`, `domain.stream_heads`). Each names the
previous checkpoint's digest, so they form one chain, and the writer signs the canonical JSON of
the body with an Ed25519 key whose public half anyone may hold.

The checkpoint stream's own events are no leaves: a checkpoint cannot commit to itself, and
leaving them out lets a checkpoint cover the whole ledger once it is written. The chain protects
them instead (a checkpoint gone from the middle breaks the next one's ``previous``), and an
exported checkpoint kept elsewhere protects the newest ones.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Final
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from domain.aggregate import MaceAggregate
from domain.canonical import canonical_json
from domain.errors import InvalidInput

ALGORITHM: Final = "ed25519"
_LEAF_HEAD: Final = b"\x00"  # RFC 9162's leaf prefix (`domain.merkle.leaf_hash`)
HEX_HASH: Final = r"^[0-9a-f]{64}$"


def leaf_data(originator_id: UUID, version: int, topic: str, state: bytes) -> bytes:
    """What a stored event's Merkle leaf binds: its stream, version, topic and stored bytes.

    Fixed-width id and version and a length-prefixed topic make the encoding unambiguous, and
    simple enough that a database can compute the same bytes (PostgreSQL: ``uuid_send``,
    ``int8send``, ``int4send``).
    """
    return stream_leaf_data(originator_id.bytes, version, topic, state)


def stream_leaf_data(stream: bytes, version: int, topic: str, state: bytes) -> bytes:
    """`leaf_data` of a stream given as its 16 UUID bytes: a whole-log scan that reads ids as
    text saves parsing each into a UUID."""
    return b"".join((stream, version.to_bytes(8, "big", signed=True), _topic_part(topic), state))


def stream_leaf_hash(stream: bytes, version: int, topic: str, state: bytes) -> bytes:
    """``leaf_hash(stream_leaf_data(...))``."""
    return leaf_hash_after(stream_leaf_prefix(stream), version, topic, state)


def stream_leaf_prefix(stream: bytes) -> bytes:
    """How the hashed bytes of every leaf of one stream begin (`leaf_hash_after`)."""
    return _LEAF_HEAD + stream


def leaf_hash_after(prefix: bytes, version: int, topic: str, state: bytes) -> bytes:
    """`stream_leaf_hash` of a stream whose `stream_leaf_prefix` is ``prefix``: a whole-log
    pass meets a stream's rows one after another and makes its prefix once for all of them."""
    return hashlib.sha256(
        b"".join((prefix, version.to_bytes(8, "big", signed=True), _topic_part(topic), state))
    ).digest()


@dataclass(frozen=True)
class LeafRecord:
    """The stored event a leaf's data names (`leaf_data` read back)."""

    originator_id: UUID
    version: int
    topic: str
    state: bytes


_FIXED: Final = 16 + 8 + 4  # stream id, version, topic length


def parse_leaf_data(data: bytes) -> LeafRecord:
    """The event ``data`` (`leaf_data`'s bytes) names; `InvalidInput` if it is not such bytes."""
    expected = "expected a stream id (16 bytes), a version (8), a topic length (4) and topic"
    if len(data) < _FIXED:
        raise InvalidInput(f"the leaf data is {len(data)} bytes, too short: {expected}")
    length = int.from_bytes(data[24:_FIXED], "big")
    if _FIXED + length > len(data):
        raise InvalidInput(f"the leaf data's topic length {length} runs past its end: {expected}")
    try:
        topic = data[_FIXED : _FIXED + length].decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"the leaf data's topic is not UTF-8: {expected}") from None
    version = int.from_bytes(data[16:24], "big", signed=True)
    return LeafRecord(UUID(bytes=data[:16]), version, topic, data[_FIXED + length :])


@lru_cache(maxsize=1024)
def _topic_part(topic: str) -> bytes:
    """A topic as a leaf holds it, length first (the same few recur on every event)."""
    encoded = topic.encode("utf-8")
    return len(encoded).to_bytes(4, "big") + encoded


class Checkpoint(BaseModel):
    """The signed body of checkpoint ``number``: what an exported checkpoint carries.

    ``peaks`` are the roots of the complete subtrees at ``tree_size`` (`MerkleBuilder.peaks`),
    so that the next checkpoint extends this one's tree without reading the events it covers.
    ``written_at`` is when it was written, by the wall clock: operations metadata for whoever
    keeps exported checkpoints, never compared by a replay.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int = Field(ge=1)
    tree_size: int = Field(ge=0)
    root: str = Field(pattern=HEX_HASH)
    last_notification_id: int = Field(ge=0)
    previous: str | None = Field(pattern=HEX_HASH)
    heads_root: str = Field(pattern=HEX_HASH)
    peaks: tuple[str, ...]
    written_at: str

    def signed_bytes(self) -> bytes:
        """The bytes the signature is over: the body's canonical JSON."""
        return canonical_json(self.model_dump(mode="json"))

    def summary(self) -> dict[str, Any]:
        """Which checkpoint it is, as outputs name one: number, tree size and root."""
        return {"number": self.number, "tree_size": self.tree_size, "root": self.root}

    def digest(self) -> str:
        """What the next checkpoint names as its ``previous``."""
        return hashlib.sha256(self.signed_bytes()).hexdigest()


class LedgerCheckpoints(MaceAggregate):
    """The ledger's one checkpoint stream: version n holds checkpoint n.

    Written by appending (`MaceAggregate.appended`), never loaded whole: two writers racing for
    the next number collide on the version, so the chain cannot fork.
    """

    NAME_PREFIX = "checkpoints"
    NAME_FIELD = "ledger"
    LEDGER: ClassVar[str] = "ledger"

    class Signed(MaceAggregate.Event):
        checkpoint: Checkpoint
        key_id: str
        signature: str  # base64 of the Ed25519 signature over `Checkpoint.signed_bytes`


CHECKPOINT_STREAM: Final = LedgerCheckpoints.id_for(LedgerCheckpoints.LEDGER)


@dataclass(frozen=True)
class SignedCheckpoint:
    """A checkpoint with its signature, as stored and as exported."""

    checkpoint: Checkpoint
    key_id: str
    signature: bytes

    def exported(self) -> dict[str, Any]:
        """The export format: ``{"algorithm", "key_id", "checkpoint", "signature"}``."""
        return {
            "algorithm": ALGORITHM,
            "key_id": self.key_id,
            "checkpoint": self.checkpoint.model_dump(mode="json"),
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }


def decoded(signature: str) -> bytes:
    """A stored or bundled signature's bytes; one that is not base64 is empty, which no key
    verifies."""
    try:
        return base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return b""
