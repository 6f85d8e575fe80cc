"""Workload identity evidence, verified from what a run recorded alone (seed 002: a replay months
later must not fail on expired tokens or rotated keys; authenticity is checked against recorded
signatures and hashes, never a live key or token service).

The issuer signs the statement (subject, issuer, claims, attestation) written as canonical JSON
with Ed25519; the run records the statement, the signature, the issuer's public key as it stood
then, and the statement's hash. Verifying needs nothing else, so it holds after the issuer has
rotated that key away. What it cannot show is that the recorded key was the issuer's: a run that
forged a key pair signs what it forged. That is taken as recorded, and said so.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from domain.canonical import canonical_json, sha256_hex

STATEMENT_FIELDS = ("subject", "issuer", "claims", "attestation")
"""What the issuer's signature covers, written as one canonical JSON object."""


def statement_bytes(statement: dict[str, Any]) -> bytes:
    """The bytes an issuer signs: the statement's fields as canonical JSON."""
    return canonical_json({name: statement[name] for name in STATEMENT_FIELDS})


def key_fingerprint(public_key: str) -> str:
    """The SHA-256 of the raw public key: how a report names the key that verified."""
    return sha256_hex(base64.b64decode(public_key))


def identity_problem(
    statement: dict[str, Any], public_key: str, signature: str, statement_hash: str
) -> str | None:
    """What does not verify in a recorded identity, or None: the statement's hash, then the
    issuer's signature under the recorded key."""
    signed = statement_bytes(statement)
    if sha256_hex(signed) != statement_hash:
        return "statement_hash is not the sha256 of the statement's canonical JSON"
    try:
        key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        key.verify(base64.b64decode(signature, validate=True), signed)
    except (InvalidSignature, ValueError, binascii.Error):
        return f"the signature does not verify under the recorded key {key_fingerprint(public_key)}"
    return None
