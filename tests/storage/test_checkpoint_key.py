"""The checkpoint key: read from MACE_CHECKPOINT_KEY, made for development, refused in production,
and never shown; anyone holding its public half checks a signature without any secret."""

from __future__ import annotations

import hashlib
import logging
import pickle
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from support.ledger_fixtures import settings_for

from infrastructure.storage.keys.checkpoint_key import (
    CheckpointKey,
    CheckpointKeyError,
    PublicCheckpointKey,
    load_checkpoint_key,
    read_checkpoint_key,
    verify,
)
from infrastructure.storage.settings import Settings

# RFC 8032 section 7.1, TEST 1: a known Ed25519 key and its signature of the empty message.
RFC8032_SECRET = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46b"
    "d25bf5f0595bbe24655141438e7a100b"
)
UNENCRYPTED = serialization.NoEncryption()
PKCS8 = serialization.PrivateFormat.PKCS8
PEM = serialization.Encoding.PEM


def rfc8032_pem() -> bytes:
    return Ed25519PrivateKey.from_private_bytes(RFC8032_SECRET).private_bytes(
        PEM, PKCS8, UNENCRYPTED
    )


def write_key(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "checkpoint.pem"
    path.write_bytes(content)
    path.chmod(0o600)
    return path


def ed25519_pem() -> bytes:
    return Ed25519PrivateKey.generate().private_bytes(PEM, PKCS8, UNENCRYPTED)


BAD_KEY_FILES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "missing": (lambda d: d / "absent.pem", "checkpoint key {path} does not exist"),
    "unreadable": (lambda d: d, "cannot read checkpoint key {path}: Is a directory"),
    "not PEM": (
        lambda d: write_key(d, b"\x9d\x61" * 16),
        "checkpoint key {path} is not PEM",
    ),
    "PEM but no private key": (
        lambda d: write_key(
            d,
            Ed25519PrivateKey.generate()
            .public_key()
            .public_bytes(PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        ),
        "checkpoint key {path} is not a PEM private key",
    ),
    "OpenSSH format": (
        lambda d: write_key(
            d,
            Ed25519PrivateKey.generate().private_bytes(
                PEM, serialization.PrivateFormat.OpenSSH, UNENCRYPTED
            ),
        ),
        "checkpoint key {path} is not a PEM private key",
    ),
    "truncated": (
        lambda d: write_key(d, ed25519_pem()[:-40]),
        "checkpoint key {path} is not a PEM private key",
    ),
    "EC key": (
        lambda d: write_key(
            d, ec.generate_private_key(ec.SECP256R1()).private_bytes(PEM, PKCS8, UNENCRYPTED)
        ),
        "checkpoint key {path} is not Ed25519 but EC",
    ),
    "Ed448 key": (
        lambda d: write_key(
            d, ed448.Ed448PrivateKey.generate().private_bytes(PEM, PKCS8, UNENCRYPTED)
        ),
        "checkpoint key {path} is not Ed25519 but Ed448",
    ),
    "encrypted": (
        lambda d: write_key(
            d,
            Ed25519PrivateKey.generate().private_bytes(
                PEM, PKCS8, serialization.BestAvailableEncryption(b"passphrase")
            ),
        ),
        "checkpoint key {path} is encrypted",
    ),
}


@pytest.mark.parametrize("case", list(BAD_KEY_FILES))
def test_every_bad_key_file_is_refused_in_one_line_naming_it(case: str, tmp_path: Path) -> None:
    make, message = BAD_KEY_FILES[case]
    path = make(tmp_path)
    content = path.read_bytes() if path.is_file() else b""
    with pytest.raises(CheckpointKeyError) as refused:
        load_checkpoint_key(Settings(store=f"sqlite:///{tmp_path}/m.db", checkpoint_key=path))
    text = str(refused.value)
    assert text.startswith(message.format(path=path)), text
    assert "\n" not in text
    # No part of the key's body is echoed back.
    body = b"".join(content.splitlines()[1:-1])
    assert not body or body[:16].decode("ascii", "replace") not in text
    # A configured key is never made or replaced, and nothing is made beside the store.
    assert not (tmp_path / "m.db.checkpoint-key.pem").exists()


def test_a_configured_key_is_used_as_it_is(tmp_path: Path) -> None:
    path = write_key(tmp_path, rfc8032_pem())
    key = load_checkpoint_key(Settings(store=f"sqlite:///{tmp_path}/m.db", checkpoint_key=path))
    assert key.public.verify(b"", RFC8032_SIGNATURE)
    assert key.source == f"checkpoint key {path}"
    assert sorted(tmp_path.iterdir()) == [path]


def test_the_key_id_is_the_start_of_the_sha256_of_the_raw_public_key(tmp_path: Path) -> None:
    key = read_checkpoint_key(write_key(tmp_path, rfc8032_pem()))
    assert key.key_id == hashlib.sha256(RFC8032_PUBLIC).hexdigest()[:16] == "21fe31dfa154a261"
    # The same id from the public half alone, as an outsider computes it.
    assert PublicCheckpointKey.from_pem(key.public_pem()).key_id == key.key_id
    assert read_checkpoint_key(write_key(tmp_path, rfc8032_pem())).key_id == key.key_id


def test_a_signature_verifies_with_the_public_key_alone_and_a_flipped_byte_fails(
    tmp_path: Path,
) -> None:
    key = read_checkpoint_key(write_key(tmp_path, rfc8032_pem()))
    assert key.sign(b"") == RFC8032_SIGNATURE  # Ed25519 as RFC 8032 defines it
    message = b'{"size":3,"root":"ab"}'
    signature = key.sign(message)
    public_pem = key.public_pem()
    assert verify(public_pem, message, signature)
    for i in (0, len(signature) // 2, len(signature) - 1):
        flipped = bytearray(signature)
        flipped[i] ^= 0x01
        assert not verify(public_pem, message, bytes(flipped))
    assert not verify(public_pem, message[:-1] + b"!", signature)
    assert not verify(public_pem, message, signature[:-1])
    other = CheckpointKey(Ed25519PrivateKey.generate(), "another key")
    assert not verify(other.public_pem(), message, signature)


@pytest.mark.parametrize(
    ("public_pem", "message"),
    [
        ("not a key", "public key is not PEM"),
        (
            ec.generate_private_key(ec.SECP256R1())
            .public_key()
            .public_bytes(PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode(),
            "public key is not Ed25519 but EC",
        ),
    ],
)
def test_a_public_key_that_is_not_ed25519_is_refused_not_answered_false(
    public_pem: str, message: str
) -> None:
    with pytest.raises(CheckpointKeyError, match=message):
        verify(public_pem, b"m", b"\x00" * 64)


def test_development_key_is_made_once_beside_sqlite_private_and_announced_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(store=f"sqlite:///{tmp_path}/m.db")
    path = tmp_path / "m.db.checkpoint-key.pem"
    with caplog.at_level(logging.WARNING, logger="mace.keys"):
        first = load_checkpoint_key(settings)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert caplog.messages == [
        f"created development checkpoint key {path}; set MACE_CHECKPOINT_KEY for real use"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mace.keys"):
        again = load_checkpoint_key(settings)
    assert caplog.messages == []  # announced once, when it was made
    assert again.key_id == first.key_id
    assert again.public.verify(b"x", first.sign(b"x"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no draft left behind


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_production_refuses_to_start_without_a_checkpoint_key(kind: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/m.db" if kind == "sqlite" else "postgresql://u:p@db:5432/mace"
    settings = Settings(store=store, env="production")
    with pytest.raises(
        CheckpointKeyError,
        match=r"^MACE_ENV=production requires MACE_CHECKPOINT_KEY \(the path of an Ed25519",
    ):
        load_checkpoint_key(settings)
    assert list(tmp_path.iterdir()) == []


def test_postgres_without_a_checkpoint_key_is_refused_naming_the_variable(
    store_url: str, tmp_path: Path
) -> None:
    settings = settings_for(store_url).model_copy(update={"checkpoint_key": None})
    if store_url.startswith("sqlite"):
        assert load_checkpoint_key(settings).source.endswith(".checkpoint-key.pem")
        return
    with pytest.raises(CheckpointKeyError, match="set MACE_CHECKPOINT_KEY") as refused:
        load_checkpoint_key(settings)
    assert "postgresql://" in str(refused.value)
    assert settings.parsed_store().describe() in str(refused.value)  # never the password


def test_no_private_key_in_reprs_and_no_pickling(tmp_path: Path) -> None:
    path = write_key(tmp_path, rfc8032_pem())
    key = read_checkpoint_key(path)
    body = rfc8032_pem().splitlines()[1].decode()
    for text in (repr(key), str(key), repr(key.public)):
        assert RFC8032_SECRET.hex() not in text
        assert body not in text
    assert repr(key) == f"CheckpointKey(key_id='21fe31dfa154a261', source='checkpoint key {path}')"
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(key)
