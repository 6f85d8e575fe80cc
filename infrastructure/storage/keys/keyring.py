"""Signing keys: one active key signs, every key verifies, and no secret ever leaves this module.

Keys come from ``MACE_SIGNING_KEYS`` (a JSON object of key id to base64 secret, each secret at least
32 bytes) and ``MACE_ACTIVE_KEY_ID``. Old keys stay in the ring after rotation so that events
signed months ago still verify. Without configured keys, development use gets a keyring file next
to the SQLite store (created once, mode 0600, announced by a warning when it is made);
``MACE_ENV=production`` refuses to start instead, because a generated key is no key an auditor can
hold anyone to.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import stat
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC
from eventsourcing.persistence import StoredEvent

from domain.errors import InvalidInput
from infrastructure.storage.keys.development_files import create_development_file
from infrastructure.storage.settings import Settings

KEY_ID_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MIN_SECRET_BYTES = 32
DEV_KEY_ID = "dev-1"

UnknownKeyJudge = Callable[[str, StoredEvent], Exception | None]
"""What a record signed under a key id the keyring lacks is (`Keyring.unknown_key`)."""


class KeyringError(InvalidInput):
    """The keys cannot be used; the message names the setting, never a secret."""


class Keyring:
    """HMAC-SHA256 keys by id. Its repr names key ids only.

    Each key's HMAC is keyed once (`_keyed`) and copied for every message: keying hashes the
    secret into the inner and outer states, which was half of what a MAC over a stored event
    cost; a copy starts from those states.
    """

    __slots__ = ("_active_key_id", "_judge", "_keyed", "_source")

    def __init__(
        self, keys: Mapping[str, bytes], active_key_id: str, source: str = "the keyring"
    ) -> None:
        if not keys:
            msg = "a keyring needs at least one key"
            raise KeyringError(msg)
        for key_id, secret in keys.items():
            if not KEY_ID_PATTERN.fullmatch(key_id):
                msg = f"invalid key id {key_id!r}: expected 1-64 of A-Z a-z 0-9 _ -"
                raise KeyringError(msg)
            if len(secret) < MIN_SECRET_BYTES:
                msg = f"key {key_id!r} is {len(secret)} bytes; at least {MIN_SECRET_BYTES} needed"
                raise KeyringError(msg)
        if active_key_id not in keys:
            msg = f"active key id {active_key_id!r} is not in the keyring {sorted(keys)}"
            raise KeyringError(msg)
        self._keyed = {key_id: HMAC(secret, hashes.SHA256()) for key_id, secret in keys.items()}
        self._active_key_id = active_key_id
        self._source = source
        self._judge: UnknownKeyJudge | None = None

    def judged_by(self, judge: UnknownKeyJudge) -> Keyring:
        """These keys (shared, not copied) with ``judge`` saying what a record signed under a
        key id they lack is: a store's own judgement, from what it holds (`LedgerStore`)."""
        judged = object.__new__(type(self))
        # Slot by slot, over the class and its bases: a keyring that delegates to another (a
        # bundle's vouching keyring) holds its own slots, not these.
        for cls in type(self).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if hasattr(self, name):
                    object.__setattr__(judged, name, getattr(self, name))
        judged._judge = judge
        return judged

    def unknown_key(self, key_id: str, stored: StoredEvent) -> Exception | None:
        """What the store makes of ``stored``, signed under ``key_id`` which this keyring
        lacks; None when no store judges (then it cannot be checked, and fails closed)."""
        judge: UnknownKeyJudge | None = getattr(self, "_judge", None)  # unset in a delegate
        return None if judge is None else judge(key_id, stored)

    @property
    def active_key_id(self) -> str:
        return self._active_key_id

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._keyed)

    @property
    def source(self) -> str:
        """Where the keys came from, for messages that tell an operator what to fix."""
        return self._source

    def sign(self, message: bytes, key_id: str | None = None) -> tuple[str, bytes]:
        """The signing key's id and its HMAC-SHA256 of ``message``: the active key unless named.

        Only a key check names its key: it must be signed by the key whose secret it proves.
        """
        key_id = self._active_key_id if key_id is None else key_id
        mac = self._keyed[key_id].copy()
        mac.update(message)
        return key_id, mac.finalize()

    def verify(self, key_id: str, message: bytes, tag: bytes) -> bool:
        """Constant-time check of ``tag``; False for an unknown key id or a wrong tag."""
        keyed = self._keyed.get(key_id)
        if keyed is None:
            return False
        mac = keyed.copy()
        mac.update(message)
        try:
            mac.verify(tag)
        except InvalidSignature:
            return False
        return True

    def has_key(self, key_id: str) -> bool:
        return key_id in self._keyed

    def keyed_by_stored_id(self) -> dict[bytes, HMAC]:
        """Each key's HMAC, keyed and never updated, by its id as a stored record holds it
        (ASCII): a pass over many records copies one for each (`RecordCheck`). Copies: what
        the caller does to them leaves this keyring's as they are."""
        return {key_id.encode("ascii"): keyed.copy() for key_id, keyed in self._keyed.items()}

    def __repr__(self) -> str:
        return f"Keyring(active={self._active_key_id!r}, key_ids={self.key_ids!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling would copy secrets somewhere we do not control.
        msg = "a Keyring cannot be pickled"
        raise TypeError(msg)


def parse_signing_keys(raw: str, active_key_id: str | None) -> Keyring:
    try:
        decoded = orjson.loads(raw)
    except orjson.JSONDecodeError:
        msg = 'MACE_SIGNING_KEYS is not JSON: expected {"key-id": "<base64 secret>", ...}'
        raise KeyringError(msg) from None
    if not isinstance(decoded, dict) or not decoded:
        msg = 'MACE_SIGNING_KEYS must be a non-empty JSON object {"key-id": "<base64 secret>"}'
        raise KeyringError(msg)
    keys: dict[str, bytes] = {}
    for key_id, encoded in decoded.items():
        if not isinstance(encoded, str):
            msg = f"MACE_SIGNING_KEYS[{key_id!r}] must be a base64 string"
            raise KeyringError(msg)
        try:
            keys[key_id] = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            msg = f"MACE_SIGNING_KEYS[{key_id!r}] is not valid base64"
            raise KeyringError(msg) from None
    if active_key_id is None:
        if len(keys) > 1:
            msg = "MACE_ACTIVE_KEY_ID must name the signing key when MACE_SIGNING_KEYS has several"
            raise KeyringError(msg)
        active_key_id = next(iter(keys))
    return Keyring(keys, active_key_id, "MACE_SIGNING_KEYS")


def dev_keyring_path(settings: Settings) -> Path | None:
    if settings.keyring_file is not None:
        return settings.keyring_file
    return settings.parsed_store().development_file(".keys.json")


def _read_keyring_file(path: Path) -> Keyring:
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        msg = f"keyring file {path} is readable by others (mode {mode:04o}): chmod 600 it"
        raise KeyringError(msg)
    try:
        content = orjson.loads(path.read_bytes())
        keys = {k: base64.b64decode(v, validate=True) for k, v in content["keys"].items()}
        active = content["active_key_id"]
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, binascii.Error):
        msg = f"keyring file {path} is not a MACE keyring (keys, active_key_id)"
        raise KeyringError(msg) from None
    return Keyring(keys, active, f"keyring file {path}")


def _new_keyring_file() -> bytes:
    secret = base64.b64encode(secrets.token_bytes(MIN_SECRET_BYTES)).decode()
    return orjson.dumps({"active_key_id": DEV_KEY_ID, "keys": {DEV_KEY_ID: secret}})


def load_keyring(settings: Settings, *, create: bool) -> Keyring:
    """The keyring the settings describe; ``create`` allows making a development keyring file."""
    if settings.signing_keys is not None:
        return parse_signing_keys(settings.signing_keys.get_secret_value(), settings.active_key_id)
    if settings.env == "production":
        msg = "MACE_ENV=production requires MACE_SIGNING_KEYS (and MACE_ACTIVE_KEY_ID)"
        raise KeyringError(msg)
    path = dev_keyring_path(settings)
    if path is None:
        msg = "no signing keys: set MACE_SIGNING_KEYS, or MACE_KEYRING_FILE for development"
        raise KeyringError(msg)
    if not path.exists():
        if not create:
            msg = f"no signing keys: no keyring file {path} and MACE_SIGNING_KEYS is unset"
            raise KeyringError(msg)
        # Another process may create it first; either way the file on disk is the keyring.
        create_development_file(
            path,
            _new_keyring_file(),
            "development keyring",
            "set MACE_SIGNING_KEYS and MACE_ACTIVE_KEY_ID for real use",
        )
    return _read_keyring_file(path)
