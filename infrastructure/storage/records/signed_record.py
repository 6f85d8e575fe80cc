"""The stored form of every event: a signed envelope around its canonical JSON body.

``state`` column = ``b"mace1." + key_id + b"." + hex(mac) + b"." + body``. The MAC is
HMAC-SHA256 over the canonical JSON of ``[originator_id, originator_version, topic]`` followed by
the body bytes; the header is a self-delimiting JSON array, so the concatenation is unambiguous.
Binding id, version and topic means a byte flip, a changed topic, a renumbered version or two
swapped events all fail verification. Verification reads the bytes as stored: nothing is decoded or
re-encoded before the MAC holds.
"""

from __future__ import annotations

import hashlib
from binascii import Error as BinasciiError
from binascii import unhexlify
from collections.abc import Iterable
from functools import lru_cache
from hmac import compare_digest
from typing import NamedTuple
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from domain.canonical import INT64_MAX, INT64_MIN, canonical_json
from domain.errors import IntegrityFailure
from infrastructure.storage.keys.keyring import Keyring

MAGIC = b"mace1"
SEPARATOR = b"."
MAC_HEX_LENGTH = 64
NO_TOPIC = "the stored row has no topic"
NO_STATE = "the stored row has no state"


class UnknownSigningKey(IntegrityFailure):
    """A record signed under a key id the keyring does not hold: not checked, so not known to
    be altered either."""


class VerifiedRecord(NamedTuple):
    """A stored event whose MAC held, with the parts of its envelope."""

    stored: StoredEvent
    key_id: str
    mac: bytes
    body: bytes


def mac_message(originator_id: UUID | str, version: int, topic: str, body: bytes) -> bytes:
    """``canonical_json([str(originator_id), version, topic]) + body``, built without walking
    the list: every read and write builds one, and the general encoder was most of its cost."""
    if type(version) is not int or not INT64_MIN <= version <= INT64_MAX:
        return canonical_json([str(originator_id), version, topic]) + body  # refuses as it does
    return b"".join(
        (stream_header(originator_id), str(version).encode(), b",", _json_string(topic), b"]", body)
    )


@lru_cache(maxsize=4096)
def stream_header(originator_id: UUID | str) -> bytes:
    """How the MAC message of every event of one stream begins: ``[`` and the id as a JSON
    string, then ``,``. Kept for the streams read last: the events of a stream are read
    together, and a UUID's text took a third of building a message."""
    if isinstance(originator_id, UUID):
        # A UUID's text is hex digits and hyphens: nothing in it is escaped.
        return b'["' + str(originator_id).encode() + b'",'
    return b"[" + _json_string(originator_id) + b","


@lru_cache(maxsize=1024)
def _json_string(text: str) -> bytes:
    """The canonical JSON of a string (a topic: the same few recur on every record)."""
    return canonical_json(text)


def sign_record(
    keyring: Keyring,
    originator_id: UUID | str,
    version: int,
    topic: str,
    body: bytes,
    key_id: str | None = None,
) -> bytes:
    """The signed envelope, by the active key unless ``key_id`` names another (a key check)."""
    key_id, mac = keyring.sign(mac_message(originator_id, version, topic, body), key_id)
    return SEPARATOR.join((MAGIC, key_id.encode("ascii"), mac.hex().encode("ascii"), body))


class Envelope(NamedTuple):
    """The parts of a record's envelope, parsed; nothing verified."""

    key_id: str
    mac: bytes
    body: bytes


def parse_envelope(state: bytes, stream: UUID | str, version: int) -> Envelope:
    """The one parser of the stored format; `IntegrityFailure` for anything else."""
    parts = state.split(SEPARATOR, 3)
    if len(parts) != 4 or parts[0] != MAGIC or len(parts[2]) != MAC_HEX_LENGTH:
        raise IntegrityFailure(stream, version, "not a signed MACE record")
    try:
        mac = bytes.fromhex(parts[2].decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise IntegrityFailure(stream, version, "malformed MAC") from None
    return Envelope(parts[1].decode("ascii", errors="replace"), mac, parts[3])


def with_body(state: bytes, body: bytes) -> bytes:
    """A well-formed envelope with its body replaced (its MAC kept: a redacted copy)."""
    return SEPARATOR.join([*state.split(SEPARATOR, 3)[:3], body])


def unverified_body(state: bytes) -> bytes:
    """What a record that failed verification holds as its body, to say what is wrong with it."""
    return state.split(SEPARATOR, 3)[-1]


def verify_record(keyring: Keyring, stored: StoredEvent) -> VerifiedRecord:
    """Check one stored event's envelope and MAC; raise IntegrityFailure if either is wrong."""
    stream, version = stored.originator_id, stored.originator_version
    # Rows come from a table anyone with database access can edit: a NULL column fails closed.
    if not isinstance(stored.topic, str):
        raise IntegrityFailure(stream, version, NO_TOPIC)
    if not isinstance(stored.state, bytes):
        raise IntegrityFailure(stream, version, NO_STATE)
    key_id, mac, body = parse_envelope(stored.state, stream, version)
    if not keyring.has_key(key_id):
        judged = keyring.unknown_key(key_id, stored)
        raise judged or UnknownSigningKey(stream, version, f"signed with unknown key id {key_id!r}")
    if not keyring.verify(key_id, mac_message(stream, version, stored.topic, body), mac):
        raise IntegrityFailure(stream, version, "MAC mismatch")
    return VerifiedRecord(stored, key_id, mac, body)


class RecordCheck:
    """`verify_record`'s checks in their cheapest exact form, for a pass over many rows.

    Called with a row of a stream whose `stream_header` is ``header``, its version an int (a
    64-bit column's), its topic a str and its state bytes: its MAC when the row is a
    well-formed envelope whose MAC under a known key holds, which `verify_record` accepts
    too; else None, and `verify_record` says why it fails (or accepts it after all: a MAC
    written in capitals, a key id the store judges). Nothing is made for a row beyond its
    parts and the message: no `StoredEvent`, no key id decoded, no HMAC keyed again.
    """

    __slots__ = ("_keyed",)

    def __init__(self, keyring: Keyring) -> None:
        self._keyed = keyring.keyed_by_stored_id()

    def __call__(self, header: bytes, version: int, topic: str, state: bytes) -> bytes | None:
        held = self._held(header, version, topic, state)
        return None if held is None else held[1]

    def verified(self, stored: StoredEvent) -> VerifiedRecord | None:
        """``stored`` as `verify_record` would verify it, when this check accepts it; else
        None, for `verify_record` to judge (a stream read's records, one at a time)."""
        version, topic, state = stored.originator_version, stored.topic, stored.state
        if type(version) is not int or type(topic) is not str or type(state) is not bytes:
            return None
        held = self._held(stream_header(stored.originator_id), version, topic, state)
        if held is None:
            return None
        key_id, mac, body = held
        # A key id this check knows is ASCII: the keyring's ids, encoded.
        return VerifiedRecord(stored, key_id.decode("ascii"), mac, body)

    def _held(
        self, header: bytes, version: int, topic: str, state: bytes
    ) -> tuple[bytes, bytes, bytes] | None:
        """The record's key id (as stored), MAC and body, when its MAC holds."""
        parts = state.split(SEPARATOR, 3)
        if len(parts) != 4 or parts[0] != MAGIC or len(parts[2]) != MAC_HEX_LENGTH:
            return None
        keyed = self._keyed.get(parts[1])
        if keyed is None:
            return None
        try:
            # Hex digits only (``bytes.fromhex`` would skip whitespace, which `parse_envelope`
            # leaves to the MAC to refuse).
            mac = unhexlify(parts[2])
        except BinasciiError:
            return None
        body = parts[3]
        hashed = keyed.copy()
        hashed.update(
            b"".join((header, str(version).encode(), b",", _json_string(topic), b"]", body))
        )
        return (parts[1], mac, body) if compare_digest(hashed.finalize(), mac) else None


def signer_prefix(key_id: str) -> bytes:
    """How every record signed under ``key_id`` begins (unverified: the MAC decides)."""
    return SEPARATOR.join((MAGIC, key_id.encode("ascii"), b""))


def record_mac(state: bytes) -> bytes:
    """The MAC inside a record this process has just signed (so its envelope is well formed)."""
    return bytes.fromhex(state.split(SEPARATOR, 3)[2].decode("ascii"))


def mac_digest(macs: Iterable[bytes]) -> str:
    """SHA-256 over a stream's MACs in version order: what a seal commits to."""
    h = hashlib.sha256()
    for mac in macs:
        h.update(mac)
    return h.hexdigest()
