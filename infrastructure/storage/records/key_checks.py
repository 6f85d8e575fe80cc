"""Proving that this process's signing keys are the store's: at open, and before every write.

Each configured key id is held against the store (a few reads, then nothing: what is proven is
remembered for the life of the process):

- the store has the key's check record (`domain.key_check.KeyCheck`): its MAC must verify under our
  secret, else the key does not match. If it does not verify but an event signed under that key id
  does, it is the record that was altered: an integrity failure, not a wrong key.
- no check record yet: the key must verify one event the store holds signed under that key id, if
  there is one. Only events written before the store's first check record are searched: from that
  record on, every writer records a check for each of its keys with its first write, so a key
  without a check record signed nothing since. A store written before key checks existed is thus
  searched up to the first event of that key (once per process, until a check record exists); a
  newer one costs a single read.
  The missing check records are then written with the process's first write, in its transaction.

A key whose secret differs raises `KeyMismatch`, naming the key id and where the keys came from,
never a secret.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from threading import Lock
from typing import Final
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, Notification, StoredEvent
from eventsourcing.utils import get_topic

from domain.errors import IntegrityFailure
from domain.key_check import KeyCheck
from infrastructure.storage.keys.keyring import Keyring
from infrastructure.storage.records.signed_record import signer_prefix, verify_record

CHECK_TOPIC: Final = get_topic(KeyCheck.Recorded)
SEARCH_PAGE: Final = 500


class KeyStatus(StrEnum):
    VERIFIED = "verified"
    """The store's check record for this key id verifies under our secret."""
    UNRECORDED = "unrecorded"
    """No check record yet and nothing in the store contradicts our secret: our first write
    records one."""
    MISMATCH = "mismatch"
    """The store was signed with another secret under this key id."""


class KeyMismatch(Exception):
    """A configured key id whose secret is not the one the store was signed with.

    Not a ValueError: no request is at fault, so no caller may take it for bad input.
    """

    def __init__(self, keyring: Keyring, key_id: str) -> None:
        super().__init__(
            f"{keyring.source} key {key_id} does not match the key {key_id} this store was signed"
            f" with: configure the store's secret for {key_id}"
        )
        self.key_id = key_id


class MissingSigningKey(Exception):
    """A record signed under a key id the keyring lacks, which the store proves was one of its
    keys (`checkpoints.removed_keys`): a key retired and then removed from the configuration.

    Not an integrity failure (nothing shows the record altered, and a replay must set no halt
    for it) and not bad input: the configuration lacks a key, as `KeyMismatch` holds a wrong one.
    """

    def __init__(self, source: str, key_id: str, where: str, evidence: str) -> None:
        super().__init__(
            f"{source} lacks key {key_id}, which signed {where} ({evidence}: the key is missing,"
            f" not the record altered): add {key_id} back; a retired key stays in the keyring so"
            " that what it signed still verifies"
        )
        self.key_id = key_id


class KeyChecks:
    """Where each configured key stands with one store; safe to share between threads."""

    def __init__(self, recorder: ApplicationRecorder, keyring: Keyring) -> None:
        self._recorder = recorder
        self._keyring = keyring
        self._status: dict[str, KeyStatus] = {}
        self._searched: set[str] = set()
        self._lock = Lock()

    def status(self) -> dict[str, KeyStatus]:
        """Each key id's standing, looked up again until it is settled (verified or mismatch)."""
        with self._lock:
            for key_id in self._keyring.key_ids:
                if self._status.get(key_id) in (None, KeyStatus.UNRECORDED):
                    self._status[key_id] = self._examine(key_id)
            return dict(self._status)

    def prove(self) -> None:
        """Raise `KeyMismatch` for the first key id (in order) the store contradicts."""
        status = self.status()
        for key_id in self._keyring.key_ids:
            if status[key_id] is KeyStatus.MISMATCH:
                raise KeyMismatch(self._keyring, key_id)

    def unwritten(self) -> list[KeyCheck.Recorded]:
        """The check records a write must carry: one per key the store has none for yet.

        Raises `KeyMismatch` first if any configured key contradicts the store.
        """
        self.prove()
        with self._lock:
            unrecorded = [k for k, s in sorted(self._status.items()) if s is KeyStatus.UNRECORDED]
        return [_recorded(key_id) for key_id in unrecorded]

    def recorded(self, checks: Sequence[KeyCheck.Recorded]) -> None:
        """The write carrying ``checks`` committed: their keys are proven for good."""
        with self._lock:
            for check in checks:
                self._status[check.key_id] = KeyStatus.VERIFIED

    def _examine(self, key_id: str) -> KeyStatus:
        check = next(iter(self._recorder.select_events(KeyCheck.id_for(key_id), limit=1)), None)
        if check is not None:
            if self._verifies(key_id, check):
                return KeyStatus.VERIFIED
            if self._verified_elsewhere(key_id, check.originator_id):
                reason = f"key check of {key_id} does not verify, though events signed by it do"
                raise IntegrityFailure(check.originator_id, check.originator_version, reason)
            return KeyStatus.MISMATCH
        if key_id not in self._searched:
            evidence = self._first_signed_by(key_id)
            if evidence is not None and not self._verifies(key_id, evidence):
                return KeyStatus.MISMATCH
            self._searched.add(key_id)
        return KeyStatus.UNRECORDED

    def _verifies(self, key_id: str, stored: StoredEvent) -> bool:
        if not signed_by(stored, key_id):
            reason = f"key check of {key_id} is not signed by {key_id}"
            raise IntegrityFailure(stored.originator_id, stored.originator_version, reason)
        try:
            verify_record(self._keyring, stored)
        except IntegrityFailure:
            return False
        return True

    def _first_signed_by(self, key_id: str) -> StoredEvent | None:
        """The oldest event signed under ``key_id``, searched up to the store's first check
        record."""
        for notification in self._log():
            if notification.topic == CHECK_TOPIC:
                return None
            if signed_by(notification, key_id):
                return notification
        return None

    def _verified_elsewhere(self, key_id: str, check_stream: UUID | str) -> bool:
        """Whether any event outside the key's check record verifies under ``key_id``: then
        the key is right and the record was altered (only on that failure path: the whole log).

        Rows that claim to be check records, or sit in the check record's stream, are no
        evidence: an attacker can move a record's topic, or another record into that stream.
        """
        for notification in self._log():
            if notification.topic == CHECK_TOPIC or notification.originator_id == check_stream:
                continue
            if signed_by(notification, key_id) and self._verifies(key_id, notification):
                return True
        return False

    def _log(self) -> Iterator[Notification]:
        start = 1
        while True:
            page = self._recorder.select_notifications(start, SEARCH_PAGE)
            yield from page
            if len(page) < SEARCH_PAGE:
                return
            start = page[-1].id + 1


def signed_by(stored: StoredEvent, key_id: str) -> bool:
    """Whether the row claims ``key_id`` as its signer (a row edited into text claims none)."""
    state: object = stored.state
    return isinstance(state, bytes) and state.startswith(signer_prefix(key_id))


def _recorded(key_id: str) -> KeyCheck.Recorded:
    (recorded,) = KeyCheck.of(key_id).collect_events()
    assert isinstance(recorded, KeyCheck.Recorded)
    return recorded
