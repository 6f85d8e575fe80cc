"""What-if changes: the snapshots and policy bundle a recorded job is re-run under instead of
the ones it declared (issue 31). Pure: parsing and naming only.

``--with KIND=ID`` names a snapshot for one of the five Stage-0 kinds (``router``, ``selfrep``,
``brainstate``, ``privacy``, ``governance``: a 64-hex snapshot id) or ``policy=BUNDLE_HASH`` (a
policy bundle's 64-hex hash). Each key at most once, at least one change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from domain.errors import InvalidInput
from domain.snapshot import SnapshotKind

POLICY_KEY: Final = "policy"
WHATIF_KEYS: Final = (*(kind.value for kind in SnapshotKind), POLICY_KEY)
_HEX64: Final = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, slots=True)
class WhatIfChanges:
    """What a what-if re-runs a job under in place of what it declared."""

    snapshots: Mapping[SnapshotKind, str]
    policy_bundle: str | None = None

    def as_json(self) -> dict[str, str]:
        """The changes by key, as ``--with`` and ``POST /v1/whatif`` name them."""
        named = {kind.value: snapshot_id for kind, snapshot_id in self.snapshots.items()}
        if self.policy_bundle is not None:
            named[POLICY_KEY] = self.policy_bundle
        return dict(sorted(named.items()))


def parse_with(options: Iterable[str]) -> WhatIfChanges:
    """``--with KEY=ID`` options: InvalidInput, naming the option, for an unknown key, a
    malformed id or a key given twice."""
    pairs: list[tuple[str, str]] = []
    for option in options:
        key, separator, value = option.partition("=")
        if not separator:
            expected = f"expected KEY=ID, KEY one of {list(WHATIF_KEYS)}"
            raise InvalidInput(f"--with {option!r}: {expected}")
        pairs.append((key, value))
    return changes_of(pairs, "--with ")


def changes_of(pairs: Iterable[tuple[str, str]], prefix: str = "changes: ") -> WhatIfChanges:
    """The changes ``(key, id)`` name; InvalidInput (one line, ``prefix`` naming where) when a
    key is unknown or given twice, an id malformed, or nothing is changed."""
    snapshots: dict[SnapshotKind, str] = {}
    policy: str | None = None
    seen: set[str] = set()
    for key, value in pairs:
        if key not in WHATIF_KEYS:
            msg = f"{prefix}{key}={value}: unknown key {key!r}: expected one of {list(WHATIF_KEYS)}"
            raise InvalidInput(msg)
        if key in seen:
            raise InvalidInput(f"{prefix}{key} is given twice: name each change once")
        seen.add(key)
        if not _HEX64.fullmatch(value):
            what = "a policy bundle hash" if key == POLICY_KEY else f"a {key} snapshot id"
            msg = f"{prefix}{key}={value}: expected {what} (64 lowercase hex characters)"
            raise InvalidInput(msg)
        if key == POLICY_KEY:
            policy = value
        else:
            snapshots[SnapshotKind(key)] = value
    if not seen:
        raise InvalidInput(f"{prefix}nothing to change: name at least one of {list(WHATIF_KEYS)}")
    return WhatIfChanges(snapshots, policy)
