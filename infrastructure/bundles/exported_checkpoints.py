"""Exported checkpoints: the file an outside witness keeps, and the checks anyone can make of it.

An exported checkpoint is the canonical JSON of `SignedCheckpoint.exported`:
``{"algorithm": "ed25519", "key_id", "checkpoint": {...}, "signature": <base64>}``, or the
checkpoint as a C2SP tlog-checkpoint signed note (`domain.checkpoint_note`), which verifiers we
did not write check too. Reading one needs no store and no secret: a file that is neither is bad
input (one line, naming the file and what was wrong); one whose signature does not hold under the
key it is checked with is an integrity failure.
"""

from __future__ import annotations

import base64
import binascii
import os
import tempfile
from pathlib import Path
from typing import Final

import orjson
from pydantic import ValidationError

from domain.canonical import canonical_json
from domain.checkpoint import Checkpoint, SignedCheckpoint
from domain.checkpoint_note import SignedNote, VerifierKey, parse_note
from domain.errors import InvalidInput
from infrastructure.application.checkpoints import (
    CheckpointBody,
    PublicCheckpointKey,
    checked_note,
    checked_signature,
    public_key_from_pem,
)

MAX_FILE_BYTES: Final = 1 << 20
"""An exported checkpoint is under 10 KB (its peaks grow with log2 of the tree size)."""
FIELDS: Final = ("algorithm", "checkpoint", "key_id", "signature")
EXPECTED: Final = (
    'expected an exported checkpoint: {"algorithm", "checkpoint", "key_id", "signature"}'
    " (mace checkpoint export)"
)


def write_exported(signed: SignedCheckpoint, path: Path) -> None:
    """Write ``signed`` to ``path`` as canonical JSON, whole or not at all."""
    _write_whole(canonical_json(signed.exported()), path)


def write_note(note: SignedNote, path: Path) -> None:
    """Write ``note`` to ``path`` as the signed note's bytes, whole or not at all."""
    _write_whole(note.encoded(), path)


def _write_whole(data: bytes, path: Path) -> None:
    """A witness that reads the file while it is written sees the old one."""
    try:
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:
        raise InvalidInput(_cannot_write(path, exc)) from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        Path(temporary).replace(path)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InvalidInput(_cannot_write(path, exc)) from None
        raise


def _cannot_write(path: Path, exc: OSError) -> str:
    return f"cannot write checkpoint file {path}: {exc.strerror or type(exc).__name__}"


def _read_bounded(path: Path, what: str) -> bytes:
    """At most one byte more than `MAX_FILE_BYTES` of ``path``; one line if it cannot be read."""
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput(
            f"cannot read {what} {path}: {exc.strerror or type(exc).__name__}"
        ) from None


def read_checkpoint_file(path: Path) -> tuple[str, SignedCheckpoint] | SignedNote:
    """What ``path`` holds, nothing checked but its form: an exported checkpoint (JSON: the
    algorithm it names and the checkpoint) or a signed note."""
    data = _checkpoint_file(path)
    if data.lstrip()[:1] == b"{":
        return _exported(path, data)
    try:
        return parse_note(data)
    except InvalidInput as exc:
        msg = f"checkpoint file {path} is neither an exported checkpoint (JSON) nor a note: {exc}"
        raise InvalidInput(msg) from None


def read_exported(path: Path) -> tuple[str, SignedCheckpoint]:
    """The algorithm the file names and the checkpoint it holds, nothing checked but its form."""
    return _exported(path, _checkpoint_file(path))


def _checkpoint_file(path: Path) -> bytes:
    data = _read_bounded(path, "checkpoint file")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(
            f"checkpoint file {path} is larger than {MAX_FILE_BYTES} bytes: {EXPECTED}"
        )
    return data


def _exported(path: Path, data: bytes) -> tuple[str, SignedCheckpoint]:
    try:
        fields = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise InvalidInput(f"checkpoint file {path} is not JSON: {EXPECTED}") from None
    if not isinstance(fields, dict) or tuple(sorted(fields)) != FIELDS:
        raise InvalidInput(f"checkpoint file {path} is not an exported checkpoint: {EXPECTED}")
    for name in ("algorithm", "key_id", "signature"):
        if not isinstance(fields[name], str):
            raise InvalidInput(f"checkpoint file {path}: {name} is not a string: {EXPECTED}")
    try:
        signature = base64.b64decode(fields["signature"], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(f"checkpoint file {path}: signature is not base64: {EXPECTED}") from None
    try:
        checkpoint = Checkpoint.model_validate(fields["checkpoint"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in ("checkpoint", *first["loc"]))
        raise InvalidInput(f"checkpoint file {path}: {where}: {first['msg']}") from None
    return fields["algorithm"], SignedCheckpoint(checkpoint, fields["key_id"], signature)


def verified_exported(path: Path, key: PublicCheckpointKey) -> SignedCheckpoint:
    """The checkpoint in ``path``, once its algorithm, key id and signature hold under ``key``."""
    algorithm, signed = read_exported(path)
    return checked_signature(algorithm, signed, key, f"checkpoint file {path}")


def verified_note(note: SignedNote, vkey: VerifierKey, path: Path) -> CheckpointBody:
    """The checkpoint the note read from ``path`` states, once ``vkey`` signed it for its origin."""
    return checked_note(note, vkey, f"checkpoint note {path}")


def read_public_key(path: Path) -> PublicCheckpointKey:
    """The Ed25519 public key (PEM) in ``path``, as ``mace checkpoint public-key`` prints it."""
    pem = _read_bounded(path, "public key")
    try:
        return public_key_from_pem(pem.decode("utf-8"))
    except (UnicodeDecodeError, InvalidInput) as exc:
        problem = "is not PEM text" if isinstance(exc, UnicodeDecodeError) else str(exc)
        raise InvalidInput(f"{path}: {problem}") from None
