"""Policy bundles and gate decisions written by hand, for tests of gates decided again."""

from __future__ import annotations

from typing import Any

from domain.policy import parse_bundle

SECRETS_DENIED = """version: 1
rules:
  - id: no-secrets
    when: {memory_label: secret}
    action: deny
"""
NOTHING_DENIED = """version: 1
rules:
  - id: redact-notes
    when: {memory_label: note}
    action: redact
"""
DENIED_HASH = parse_bundle(SECRETS_DENIED).bundle_hash
NOTHING_DENIED_HASH = parse_bundle(NOTHING_DENIED).bundle_hash
SECRET = {"memory_kind": "fact", "labels": ["secret"], "caller_id": "bot"}
"""A subject SECRETS_DENIED denies and NOTHING_DENIED lets through."""


def gate(decision: str, bundle_hash: str = DENIED_HASH, **extra: Any) -> dict[str, Any]:
    """A context gate's decision about `SECRET` under ``bundle_hash``."""
    return {
        "type": "GateDecision",
        "gate": "context",
        "decision": decision,
        "policy_bundle_hash": bundle_hash,
        "subject": SECRET,
        **extra,
    }
