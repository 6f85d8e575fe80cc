"""The privacy rules a job or run is held to, and what they mean for a run recorded from outside.

A job's rules are its declared ``privacy`` snapshot; when it declares none, or the ledger does not
hold it (or cannot use it), the Stage-0 default (``password``, ``pin``, ``ssn``, ...) applies.

The Stage-0 runtime masks a refused value itself (`projections.refused_input`). A run recorded
from outside is the emitter's account and is stored as sent, so the ledger cannot mask it
faithfully (hashes the emitter gave cover the content). Instead it refuses, with nothing written,
a run whose start, events or completion hold personal data or a secret in clear anywhere
(`domain.sensitive_data`: a value under a secret's name, such as a denied SEM attribute or a
``password`` argument, or a text shaped like an SSN, a card number, an API key, ...): the emitter
records such a value as ``null`` or masked. ``mace ingest``, the HTTP run uploads and the
`RunRecorder` all come through `refuse_clear_private_values`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from domain.errors import NotFoundError
from domain.events import RunCompleted, RunEvent, RunStarted
from domain.sensitive_data import first_sensitive
from domain.snapshot import SnapshotKind
from domain.stage0.config import DEFAULT_PRIVACY, PrivacyPolicy, parse_config
from infrastructure.application.snapshots import SnapshotService


class ClearPrivateValue(ValueError):
    """A run's start, event or completion holds, in clear, what its privacy rules never let the
    ledger keep; ``position`` is the event's among the run's events (-1: the start or the
    completion), ``path`` the field's inside it."""

    def __init__(self, position: int, path: str, message: str) -> None:
        super().__init__(message)
        self.position = position
        self.path = path


KEPT_POLICIES: Final = 256
"""The most privacy snapshots' rules a process keeps parsed (a store holds a handful)."""


class PrivacyRules:
    def __init__(self, snapshots: SnapshotService) -> None:
        self.snapshots = snapshots
        self._kept: dict[str, PrivacyPolicy] = {}

    def of(self, snapshot_ids: dict[str, str]) -> PrivacyPolicy:
        """The rules of a job or run declaring ``snapshot_ids`` (by kind name).

        A stored snapshot's rules are read, verified and parsed once by this process: a snapshot
        is named by its content's digest, so what an id names never changes (every batch of a
        run read and verified its rules again). A snapshot not (yet) stored, or not usable, is
        not kept: the default applies until it is stored."""
        snapshot_id = snapshot_ids.get(SnapshotKind.PRIVACY.value)
        if snapshot_id is None:
            return DEFAULT_PRIVACY
        kept = self._kept.get(snapshot_id)
        if kept is not None:
            return kept
        try:
            policy = parse_config(SnapshotKind.PRIVACY, self.snapshots.get(snapshot_id).payload)
        except (NotFoundError, ValueError):
            return DEFAULT_PRIVACY
        assert isinstance(policy, PrivacyPolicy)
        if len(self._kept) >= KEPT_POLICIES:
            self._kept.clear()
        self._kept[snapshot_id] = policy
        return policy

    def refuse_clear_private_values(
        self,
        snapshot_ids: dict[str, str],
        events: Sequence[RunEvent],
        position: int = 0,
        *,
        payloads: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """Raise `ClearPrivateValue` for the first of ``events`` (a run's start, its events, its
        completion; the first at ``position`` among the run's events) holding personal data.

        ``payloads``: each event's payload, when the caller holds them (`RunContents`), so that
        they are not dumped again."""
        denied = self.of(snapshot_ids).deny_sem_attributes
        if payloads is None:
            payloads = [event.payload() for event in events]
        for event, payload in zip(events, payloads, strict=True):
            framing = isinstance(event, RunStarted | RunCompleted)
            found = first_sensitive(payload, denied)
            if found is not None:
                message = (
                    f"{event.EVENT_TYPE}.{found.path} holds {found.why}, which the run's privacy"
                    " rules never let the ledger keep in clear: record a refused value as null"
                    " (or masked)"
                )
                raise ClearPrivateValue(-1 if framing else position, found.path, message)
            position += 0 if framing else 1
