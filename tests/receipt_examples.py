"""The policy bundle receipt tests share: medical memories denied, PII redacted for non-admins."""

from __future__ import annotations

BUNDLE = """\
version: 1
metadata: {owner: privacy-team}
rules:
  - id: no-medical
    when: {memory_label: medical}
    action: deny
  - id: mask-pii
    when: {memory_label: pii, caller_role_not: admin}
    action: redact
"""
