"""Witness cosignatures of checkpoint notes (``c2sp.org/tlog-cosignature``, v1, Ed25519).

A cosignature is one more signature line of a checkpoint note, by a witness's key of signature
type 0x04. Its bytes after the key id are a ``timestamped_signature``: the time it was made (a
big-endian u64 of POSIX seconds, never zero) and the Ed25519 signature of the message
``cosignature/v1``, ``time <timestamp>`` and the note's text, each line ending in a newline. It
states that, as of that time, the witness saw no other tree of the log that this one does not
extend. Pure: checking needs the note text and the witness's verifier key alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from domain.checkpoint_note import NoteSignature, VerifierKey, key_id

COSIGNATURE_V1: Final = 0x04
"""The signed-note signature type of tlog-cosignature/v1 Ed25519 cosignatures."""
TIMESTAMP_SIZE: Final = 8
ED25519_SIGNATURE_SIZE: Final = 64
MAX_TIMESTAMP: Final = 2**63 - 1


def cosigner_vkey(name: str, public_key: bytes) -> VerifierKey:
    """The verifier key of the witness ``name`` whose Ed25519 public key is ``public_key``."""
    return VerifierKey(name, key_id(name, COSIGNATURE_V1, public_key), COSIGNATURE_V1, public_key)


def cosigned_message(note_text: str, timestamp: int) -> bytes:
    """The bytes a v1 cosignature signs: the header line, the time line, the note's text."""
    return f"cosignature/v1\ntime {timestamp}\n{note_text}".encode()


@dataclass(frozen=True)
class Cosignature:
    """A cosignature line taken apart: who made it, when, and the Ed25519 signature."""

    line: NoteSignature
    timestamp: int
    signature: bytes


def timestamped(line: NoteSignature) -> Cosignature | str:
    """The cosignature ``line`` holds, or why it holds none (its length, a zero time)."""
    raw = line.signature
    if len(raw) != TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE:
        expected = TIMESTAMP_SIZE + ED25519_SIGNATURE_SIZE
        return f"is {len(raw)} bytes after its key id, not a timestamp and a signature ({expected})"
    timestamp = int.from_bytes(raw[:TIMESTAMP_SIZE], "big")
    if timestamp == 0 or timestamp > MAX_TIMESTAMP:
        return f"has timestamp {timestamp}: expected POSIX seconds between 1 and 2**63-1"
    return Cosignature(line, timestamp, raw[TIMESTAMP_SIZE:])


def cosignature_problem(note_text: str, line: NoteSignature, vkey: VerifierKey) -> str | None:
    """Why ``line`` is not ``vkey``'s valid v1 cosignature of ``note_text`` (None: it is)."""
    named = f"{vkey.name}+{vkey.key_id.hex()}"
    if vkey.signature_type != COSIGNATURE_V1:
        return f"{named} is not a cosignature/v1 key (type 0x{vkey.signature_type:02x}, not 0x04)"
    if not line.by(vkey):
        return f"the line is by {line.name}+{line.key_id.hex()}, not by {named}"
    cosignature = timestamped(line)
    if isinstance(cosignature, str):
        return f"the cosignature by {named} {cosignature}"
    try:
        key = Ed25519PublicKey.from_public_bytes(vkey.public_key)
        key.verify(cosignature.signature, cosigned_message(note_text, cosignature.timestamp))
    except ValueError:
        return f"{named} holds no Ed25519 public key ({len(vkey.public_key)} bytes, not 32)"
    except InvalidSignature:
        return f"the cosignature by {named} does not verify"
    return None
