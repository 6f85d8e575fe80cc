"""Checkpoints as C2SP signed notes (``c2sp.org/signed-note``, ``c2sp.org/tlog-checkpoint``).

A checkpoint's note text is three lines: the log's origin, the tree size in decimal, the base64
Merkle root; no extension lines. Below it, after a blank line, one line per signature:
``— <key name> base64(key id || signature)``. The ledger signs with its checkpoint key under the
origin as key name (tlog-checkpoint: the key name SHOULD match the origin), and the key id is the
first four bytes of SHA-256(key name || 0x0A || 0x01 || Ed25519 public key). A verifier key
(*vkey*) ``<name>+<hex key id>+base64(0x01 || public key)`` is what a verifier is configured with.

This module is the text format alone, pure: making and parsing notes, vkeys and checkpoint bodies.
Signing and checking Ed25519 signatures is the caller's (it holds the keys). Notes are bytes in
and out: the spec's rules (UTF-8, no control character but newline, the last blank line splits
text from signatures) are checked on the bytes given, so that what is verified is exactly what
was read. Witnesses' cosignatures (``tlog-cosignature``) are further signature lines of the same
note, which `SignedNote.signed_by` appends.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from typing import Final

from domain.errors import InvalidInput

ED25519: Final = 0x01
"""The signed-note signature type of Ed25519 signatures over the note text."""
KEY_ID_SIZE: Final = 4
MAX_SIGNATURES: Final = 100
"""More signature lines than any log and its witnesses add (the spec asks for at least 16)."""
SIGNATURE_PREFIX: Final = "— "  # em dash, space
_DECIMAL: Final = re.compile(r"0|[1-9][0-9]{0,19}")
EXPECTED_NOTE: Final = (
    "expected a signed note: the text, a blank line, then lines '— <key name> <base64>'"
)
EXPECTED_VKEY: Final = (
    "expected a verifier key <name>+<8 hex digits>+<base64> (mace checkpoint public-key --vkey)"
)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a key name or origin (None: it can): the spec's rules (non-empty, no
    Unicode space, no '+') and the note's (no control character)."""
    if not name:
        return "is empty"
    for char in name:
        if char.isspace():
            return f"holds a space ({char!r})"
        if char == "+":
            return "holds a '+'"
        if ord(char) < 0x20:
            return f"holds a control character ({char!r})"
    return None


def key_id(name: str, signature_type: int, public_key: bytes) -> bytes:
    """SHA-256(name || 0x0A || signature type || public key)[:4], the spec's recommended key id."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([signature_type]) + public_key)
    return digest.digest()[:KEY_ID_SIZE]


@dataclass(frozen=True)
class VerifierKey:
    """A verifier key: the key name, its 4-byte id, the signature type and the public key."""

    name: str
    key_id: bytes
    signature_type: int
    public_key: bytes

    @classmethod
    def ed25519(cls, name: str, public_key: bytes) -> VerifierKey:
        return cls(name, key_id(name, ED25519, public_key), ED25519, public_key)

    def encoded(self) -> str:
        material = base64.b64encode(bytes([self.signature_type]) + self.public_key).decode()
        return f"{self.name}+{self.key_id.hex()}+{material}"


def parse_vkey(text: str) -> VerifierKey:
    """The verifier key ``text`` holds; one that is malformed, or whose id is not its name's and
    key's, is `InvalidInput` saying which."""
    # Split at the first two '+' only: the base64 material may hold '+' itself.
    parts = text.strip().split("+", 2)
    if len(parts) != 3:
        raise InvalidInput(f"verifier key {text.strip()!r} is not three parts: {EXPECTED_VKEY}")
    name, hex_id, material = parts
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"verifier key name {name!r} {problem}: {EXPECTED_VKEY}")
    if not re.fullmatch(r"[0-9a-f]{8}", hex_id):
        raise InvalidInput(f"verifier key id {hex_id!r} is not 8 hex digits: {EXPECTED_VKEY}")
    try:
        decoded = base64.b64decode(material, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"verifier key material is not base64: {EXPECTED_VKEY}") from None
    if not decoded:
        raise InvalidInput(f"verifier key material is empty: {EXPECTED_VKEY}")
    vkey = VerifierKey(name, bytes.fromhex(hex_id), decoded[0], decoded[1:])
    if key_id(name, vkey.signature_type, vkey.public_key) != vkey.key_id:
        raise InvalidInput(f"verifier key id {hex_id} is not the id of its name and key")
    return vkey


@dataclass(frozen=True)
class NoteSignature:
    """One signature line: who signed (name and key id) and the signature bytes after the id."""

    name: str
    key_id: bytes
    signature: bytes

    def line(self) -> str:
        encoded = base64.b64encode(self.key_id + self.signature).decode()
        return f"{SIGNATURE_PREFIX}{self.name} {encoded}\n"

    def by(self, vkey: VerifierKey) -> bool:
        """Whether the line names ``vkey`` (name and id both: the spec's known key)."""
        return self.name == vkey.name and self.key_id == vkey.key_id


@dataclass(frozen=True)
class SignedNote:
    """A note's text (ending in a newline) and its signature lines, in order."""

    text: str
    signatures: tuple[NoteSignature, ...]

    def encoded(self) -> bytes:
        lines = "".join(signature.line() for signature in self.signatures)
        return f"{self.text}\n{lines}".encode()

    def signed_by(self, signature: NoteSignature) -> SignedNote:
        """This note with one more signature line (a witness's cosignature, say) at the end."""
        return SignedNote(self.text, (*self.signatures, signature))


def parse_note(data: bytes) -> SignedNote:
    """The note ``data`` encodes, its signatures not checked; `InvalidInput` naming what is
    malformed otherwise."""
    try:
        decoded = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"the note is not UTF-8: {EXPECTED_NOTE}") from None
    for char in decoded:
        if ord(char) < 0x20 and char != "\n":
            raise InvalidInput(f"the note holds a control character {char!r}: {EXPECTED_NOTE}")
    if decoded.endswith("\n\n") and decoded[:-1].rsplit("\n", 2)[-2].startswith(SIGNATURE_PREFIX):
        # What `jq -r` or `echo` leave after a note they print: a spec note ends in its last
        # signature line's newline, and a verifier must not guess where the signatures are.
        raise InvalidInput(
            f"the note ends in a blank line, a newline too many after its last signature (as"
            f" jq -r or echo add): {EXPECTED_NOTE}"
        )
    split = decoded.rfind("\n\n")
    if split < 0:
        raise InvalidInput(f"the note has no blank line before its signatures: {EXPECTED_NOTE}")
    text, block = decoded[: split + 1], decoded[split + 2 :]
    if not block.endswith("\n"):
        raise InvalidInput(f"the note's last line does not end in a newline: {EXPECTED_NOTE}")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise InvalidInput(f"the note has more than {MAX_SIGNATURES} signature lines")
    return SignedNote(text, tuple(_signature(line) for line in lines))


def _signature(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_PREFIX):
        start = line[:60]
        raise InvalidInput(f"signature line {start!r} does not start with '— ': {EXPECTED_NOTE}")
    name, _, encoded = line[len(SIGNATURE_PREFIX) :].partition(" ")
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"signature line key name {name[:60]!r} {problem}")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"the signature by {name} is not base64: {EXPECTED_NOTE}") from None
    if len(raw) <= KEY_ID_SIZE:
        raise InvalidInput(f"the signature by {name} is shorter than a key id and a signature")
    return NoteSignature(name, raw[:KEY_ID_SIZE], raw[KEY_ID_SIZE:])


@dataclass(frozen=True)
class CheckpointBody:
    """A tlog-checkpoint note text: origin, tree size, root hash (no extension lines)."""

    origin: str
    tree_size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.tree_size}\n{base64.b64encode(self.root).decode()}\n"


def parse_checkpoint_text(text: str) -> CheckpointBody:
    """The checkpoint a note's text states; `InvalidInput` if it is not a tlog-checkpoint body.
    Extension lines are refused: the ledger writes none, and no verifier can audit them."""
    lines = text.split("\n")
    expected = "expected a tlog-checkpoint: origin, tree size and base64 root hash, one a line"
    if len(lines) != 4 or lines[-1] != "":
        extra = "extension lines" if len(lines) > 4 else "fewer than three lines"
        raise InvalidInput(f"the note's text has {extra}: {expected}")
    origin, size, root = lines[:3]
    problem = name_problem(origin)
    if problem is not None:
        raise InvalidInput(f"the note's origin {origin[:60]!r} {problem}: {expected}")
    if not _DECIMAL.fullmatch(size) or int(size) >= 2**64:
        problem = "is not a decimal below 2**64"
        raise InvalidInput(f"the note's tree size {size[:30]!r} {problem}: {expected}")
    try:
        root_hash = base64.b64decode(root, validate=True)
    except (binascii.Error, ValueError):
        root_hash = b""
    if len(root_hash) != hashlib.sha256().digest_size:
        raise InvalidInput(f"the note's root hash {root[:60]!r} is not 32 bytes of base64")
    return CheckpointBody(origin, int(size), root_hash)
