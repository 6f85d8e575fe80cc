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

# A 280-byte "billion laughs": each level is nine references to the one before, so six levels
# stand for 9**6 strings. It must be refused before anything expands it.
ALIAS_BOMB = (
    "version: 1\n"
    "metadata:\n"
    '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"  {name}: &{name} [{','.join([f'*{previous}'] * 9)}]\n"
        for previous, name in zip("abcde", "bcdef", strict=True)
    )
    + "rules: []\n"
)
