"""A workload identity as an identity provider signs it and an emitter records it."""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from domain.canonical import sha256_hex
from domain.events import WorkloadIdentity, hash_of
from domain.workload_identity import statement_bytes

FIXED_ISSUER_KEY = Ed25519PrivateKey.from_private_bytes(b"\x07" * 32)
"""An issuer key that gives the same signature every run (Ed25519 signing is deterministic)."""


def public_key_text(issuer_key: Ed25519PrivateKey) -> str:
    raw = issuer_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def signed_identity(issuer_key: Ed25519PrivateKey = FIXED_ISSUER_KEY) -> WorkloadIdentity:
    """The identity provider's signed statement for a support agent, as an emitter records it."""
    statement = {
        "subject": "spiffe://example.org/agents/support",
        "issuer": "https://idp.example.org",
        "claims": {"aud": "tools", "exp": 1767225600},
        "attestation": {"status": "verified", "platform": "k8s-node-attestor"},
    }
    signed = statement_bytes(statement)
    return WorkloadIdentity(
        **statement,
        key_id="idp-2026-01",
        public_key=public_key_text(issuer_key),
        signature=base64.b64encode(issuer_key.sign(signed)).decode(),
        statement_hash=sha256_hex(signed),
        credential_hash=hash_of("the bearer token the agent presented"),
    )
