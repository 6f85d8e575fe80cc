"""The Ed25519 key that signs checkpoints, and the public half that anyone may check them with.

``MACE_CHECKPOINT_KEY`` is the path of the private key: PEM, PKCS8, unencrypted (e.g.
``openssl genpkey -algorithm ed25519 -out checkpoint-key.pem``). Without it, development use gets
a key file next to the SQLite store (``<store>.checkpoint-key.pem``, made once, mode 0600,
announced by a warning when it is made), as the development keyring is; ``MACE_ENV=production``
and PostgreSQL refuse instead, because a key made on one client's disk is no key an auditor can
hold anyone to. The private key never leaves this module: not in a repr, a log or an error.

A key's id is the first 16 hex digits of the SHA-256 of its raw 32-byte public key, so anyone
holding the public key computes the same id, and a checkpoint names the key that signed it.

Rotation: ``MACE_CHECKPOINT_RETIRED_KEYS`` lists the public keys (PEM files, separated by the
path separator, ``:`` on POSIX) of the keys used before the current one. The checkpoints they
signed still verify, as the event keyring's retired HMAC keys still verify old events; new
checkpoints are signed by the current key only, and chain on from the last one the retired key
signed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from domain.errors import InvalidInput
from infrastructure.storage.keys.development_files import create_development_file

if TYPE_CHECKING:
    from infrastructure.storage.settings import Settings

DEVELOPMENT_SUFFIX: Final = ".checkpoint-key.pem"
# A PEM Ed25519 key is about 120 bytes: reading more only feeds a wrong file to the parser.
MAX_KEY_FILE_BYTES: Final = 64 * 1024
WHAT: Final = "the path of an Ed25519 private key, PEM"
EXPECTED: Final = "expected an unencrypted PKCS8 Ed25519 private key (-----BEGIN PRIVATE KEY-----)"


class CheckpointKeyError(InvalidInput):
    """The checkpoint key cannot be used; the message names the file or setting, never the key."""


class PublicCheckpointKey:
    """The half anyone may hold: it checks checkpoint signatures and names the key by its id."""

    __slots__ = ("_key", "key_id", "pem", "raw")

    def __init__(self, key: Ed25519PublicKey) -> None:
        self._key = key
        # The 32 bytes of RFC 8032: what a signed note's verifier key carries.
        self.raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.key_id = hashlib.sha256(self.raw).hexdigest()[:16]
        self.pem = key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ).decode("ascii")

    @classmethod
    def from_pem(cls, pem: str) -> PublicCheckpointKey:
        try:
            key = serialization.load_pem_public_key(pem.encode("utf-8"))
        except (ValueError, UnsupportedAlgorithm):
            msg = "public key is not PEM: expected -----BEGIN PUBLIC KEY----- of an Ed25519 key"
            raise CheckpointKeyError(msg) from None
        if not isinstance(key, Ed25519PublicKey):
            msg = f"public key is not Ed25519 but {_kind(key)}"
            raise CheckpointKeyError(msg)
        return cls(key)

    @classmethod
    def from_raw(cls, raw: bytes) -> PublicCheckpointKey:
        """The key whose 32 RFC 8032 bytes are ``raw`` (a verifier key's material)."""
        try:
            return cls(Ed25519PublicKey.from_public_bytes(raw))
        except ValueError:
            msg = f"public key is not Ed25519: expected 32 bytes, got {len(raw)}"
            raise CheckpointKeyError(msg) from None

    def verify(self, message: bytes, signature: bytes) -> bool:
        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def __repr__(self) -> str:
        return f"PublicCheckpointKey(key_id={self.key_id!r})"


def verify(public_pem: str, message: bytes, signature: bytes) -> bool:
    """Whether ``signature`` is the Ed25519 signature of ``message`` under the key ``public_pem``.

    Needs no private key and no secret. A ``public_pem`` that is no Ed25519 public key is a
    `CheckpointKeyError` (a wrong input, not a failed check).
    """
    return PublicCheckpointKey.from_pem(public_pem).verify(message, signature)


class CheckpointKey:
    """The private key that signs checkpoints, and the public halves of the keys it replaced
    (``retired``, by key id). Its repr names the key id and its source only."""

    __slots__ = ("_private", "public", "retired", "source")

    def __init__(
        self,
        private: Ed25519PrivateKey,
        source: str,
        retired: Mapping[str, PublicCheckpointKey] | None = None,
    ) -> None:
        self._private = private
        self.public = PublicCheckpointKey(private.public_key())
        self.source = source
        self.retired = dict(retired or {})

    @property
    def key_id(self) -> str:
        return self.public.key_id

    def verifier(self, key_id: str) -> PublicCheckpointKey | None:
        """The public key of ``key_id``: the current key's or a retired one's (None: neither)."""
        return self.public if key_id == self.key_id else self.retired.get(key_id)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._private.sign(message)

    def public_pem(self) -> str:
        return self.public.pem

    def __repr__(self) -> str:
        return f"CheckpointKey(key_id={self.key_id!r}, source={self.source!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would copy the private key somewhere we do not control.
        msg = "a CheckpointKey cannot be pickled"
        raise TypeError(msg)


def load_checkpoint_key(settings: Settings, *, create: bool = True) -> CheckpointKey:
    """The key ``MACE_CHECKPOINT_KEY`` names, with the retired keys
    ``MACE_CHECKPOINT_RETIRED_KEYS`` lists; in development, the store's own, made if missing
    unless ``create`` is False (a read store's reader makes no file: it is refused instead)."""
    key = _current_key(settings, create=create)
    if settings.checkpoint_retired_keys:
        paths = [Path(part) for part in settings.checkpoint_retired_keys.split(os.pathsep) if part]
        key.retired.update(
            (retired.key_id, retired) for retired in (_retired_key(path) for path in paths)
        )
    return key


def _retired_key(path: Path) -> PublicCheckpointKey:
    """The public key in the PEM file ``path``, named in every refusal."""
    try:
        with path.open("rb") as handle:
            pem = handle.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        msg = f"MACE_CHECKPOINT_RETIRED_KEYS: cannot read {path}: {reason}"
        raise CheckpointKeyError(msg) from None
    try:
        return PublicCheckpointKey.from_pem(pem.decode("utf-8", "replace"))
    except CheckpointKeyError as problem:
        raise CheckpointKeyError(f"MACE_CHECKPOINT_RETIRED_KEYS: {path}: {problem}") from None


def _current_key(settings: Settings, *, create: bool) -> CheckpointKey:
    if settings.checkpoint_key is not None:
        return read_checkpoint_key(settings.checkpoint_key)
    if settings.env == "production":
        msg = f"MACE_ENV=production requires MACE_CHECKPOINT_KEY ({WHAT})"
        raise CheckpointKeyError(msg)
    store = settings.parsed_store()
    path = store.development_file(DEVELOPMENT_SUFFIX)
    if path is None:
        msg = f"no checkpoint key for {store.describe()}: set MACE_CHECKPOINT_KEY ({WHAT})"
        raise CheckpointKeyError(msg)
    if not path.exists():
        if not create:
            msg = f"no checkpoint key: {path} does not exist and MACE_CHECKPOINT_KEY is unset"
            raise CheckpointKeyError(msg)
        # Another process may create it first; either way the file on disk is the key.
        remedy = "set MACE_CHECKPOINT_KEY for real use"
        create_development_file(path, _new_key_pem(), "development checkpoint key", remedy)
    return read_checkpoint_key(path)


def read_checkpoint_key(path: Path) -> CheckpointKey:
    """The Ed25519 private key in the PEM file ``path``; every refusal is one line naming it."""
    try:
        with path.open("rb") as handle:
            pem = handle.read(MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        msg = f"checkpoint key {path} does not exist: {EXPECTED}"
        raise CheckpointKeyError(msg) from None
    except OSError as exc:
        msg = f"cannot read checkpoint key {path}: {exc.strerror or type(exc).__name__}"
        raise CheckpointKeyError(msg) from None
    if b"-----BEGIN " not in pem or len(pem) > MAX_KEY_FILE_BYTES:
        msg = f"checkpoint key {path} is not PEM: {EXPECTED}"
        raise CheckpointKeyError(msg)
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError:  # cryptography's way of saying that it would need a password
        msg = f"checkpoint key {path} is encrypted: {EXPECTED}"
        raise CheckpointKeyError(msg) from None
    except (ValueError, UnsupportedAlgorithm):
        msg = f"checkpoint key {path} is not a PEM private key: {EXPECTED}"
        raise CheckpointKeyError(msg) from None
    if not isinstance(key, Ed25519PrivateKey):
        msg = f"checkpoint key {path} is not Ed25519 but {_kind(key)}: {EXPECTED}"
        raise CheckpointKeyError(msg)
    return CheckpointKey(key, f"checkpoint key {path}")


def _new_key_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _kind(key: object) -> str:
    """The kind of a key, for a message: ``RSA``, ``EC``, ``Ed448``."""
    return type(key).__name__.removesuffix("PrivateKey").removesuffix("PublicKey")
