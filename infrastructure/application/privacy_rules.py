"""The privacy rules a job or run is held to, and what they mean for a run recorded from outside.

A job's rules are its declared ``privacy`` snapshot; when it declares none, or the ledger does not
hold it (or cannot use it), the Stage-0 default (``password``, ``pin``, ``ssn``, ...) applies.

The Stage-0 runtime masks a refused value itself (`projections.refused_input`). A run recorded
from outside is the emitter's account and is stored as sent, so the ledger cannot mask it
faithfully (hashes the emitter gave cover the content). Instead it refuses, with nothing written,
a run event that records a value in clear under an attribute its rules deny (by the safe export's
PII rule, `bundle_redaction.PrivacyNeedles`): the emitter records a refused value as ``null``.
"""

from __future__ import annotations

from collections.abc import Sequence

from domain.errors import NotFoundError
from domain.events import RunEvent
from domain.snapshot import SnapshotKind
from domain.stage0.config import DEFAULT_PRIVACY, PrivacyPolicy, parse_config
from domain.stage0.refusals import is_mark
from infrastructure.application.snapshots import SnapshotService
from projections.redaction import PrivacyNeedles


class ClearPrivateValue(ValueError):
    """A run event holds, in clear, a value its privacy rules never let the ledger keep."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(message)
        self.position = position


class PrivacyRules:
    def __init__(self, snapshots: SnapshotService) -> None:
        self.snapshots = snapshots

    def of(self, snapshot_ids: dict[str, str]) -> PrivacyPolicy:
        """The rules of a job or run declaring ``snapshot_ids`` (by kind name)."""
        snapshot_id = snapshot_ids.get(SnapshotKind.PRIVACY.value)
        if snapshot_id is None:
            return DEFAULT_PRIVACY
        try:
            policy = parse_config(SnapshotKind.PRIVACY, self.snapshots.get(snapshot_id).payload)
        except (NotFoundError, ValueError):
            return DEFAULT_PRIVACY
        assert isinstance(policy, PrivacyPolicy)
        return policy

    def refuse_clear_private_values(
        self, snapshot_ids: dict[str, str], events: Sequence[RunEvent]
    ) -> None:
        """Raise `ClearPrivateValue` for the first event that records a denied value in clear."""
        denied = frozenset(self.of(snapshot_ids).deny_sem_attributes)
        for position, event in enumerate(events):
            needles = PrivacyNeedles(denied)
            needles.collect(event.payload())
            if any(not is_mark(text) for text in needles.texts):
                message = (
                    f"{event.EVENT_TYPE} records in clear a value under an attribute the run's"
                    f" privacy rules deny storing ({sorted(denied)}): record a refused value as"
                    " null"
                )
                raise ClearPrivateValue(position, message)
