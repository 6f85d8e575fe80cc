"""Telling a key removed from the keyring from a signature forged under an invented key id.

A record's key id is in its envelope, not under its MAC (it picks the key the MAC is checked
with): someone with database access can edit a record and re-wrap it under a key id the keyring
does not hold, and no MAC check can then say it was altered. The checkpoints can. A checkpoint's
Merkle leaf covers a record's stored bytes, key id included, and its writer checked the record's
MAC before it covered it (`Checkpoints._leaf`). So a record signed under a key id K that the
keyring lacks is:

- the store's own, unaltered, when the newest checkpoint includes it as stored: the keyring lacks
  K (`MissingSigningKey`, a configuration error);
- altered, when the newest checkpoint covers its place with other bytes (`AlteredUnderUnknownKey`:
  edited and re-wrapped, never "cannot be checked");
- after the newest checkpoint, signed under one of the store's keys when that checkpoint includes
  K's check record (the first write under a key records one, signed by it): the keyring lacks K
  again. Given K back, the record's MAC is checked, so an edit re-wrapped under a real key is
  still caught; an invented key id is never one of the store's keys;
- otherwise, nothing shows the store ever used K: an integrity failure, as before.

The newest checkpoint must be one this keyring can read: one signed (as a record) under the
removed key itself proves nothing here, until a write under the current key checkpoints again.
"""

from __future__ import annotations

from eventsourcing.persistence import StoredEvent

from domain.errors import IntegrityFailure
from domain.key_check import KeyCheck
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.checkpoints.inclusion_proofs import inclusion_proofs
from infrastructure.storage.records.key_checks import MissingSigningKey, signed_by
from infrastructure.storage.records.signed_record import UnknownSigningKey


class AlteredUnderUnknownKey(IntegrityFailure):
    """A record under a key id the keyring lacks whose place the newest checkpoint covers with
    other bytes: edited in the database and re-wrapped so that no MAC check could catch it."""


def judge_unknown_key(
    checkpoints: Checkpoints, source: str, key_id: str, stored: StoredEvent
) -> Exception:
    """What ``stored``, signed under ``key_id`` which the keyring (from ``source``) lacks, is."""
    stream, version = stored.originator_id, stored.originator_version
    try:
        newest = checkpoints.newest()
    except UnknownSigningKey:
        newest = None  # itself signed under a key the keyring lacks: no evidence either way
    if newest is not None:
        body = newest.checkpoint
        where = f"stream {stream} version {version}"
        try:
            included = inclusion_proofs(checkpoints.tables, body, [stored]) is not None
        except IntegrityFailure as failure:
            if failure.stream != str(stream):
                raise  # a log node is missing: nothing is known of the record
            reason = (
                f"signed with key id {key_id!r}, which the keyring lacks, where checkpoint"
                f" {body.number} holds other bytes: {failure.reason}"
            )
            return AlteredUnderUnknownKey(stream, version, reason)
        if included:
            evidence = f"checkpoint {body.number} includes that record as stored"
            return MissingSigningKey(source, key_id, where, evidence)
        recorder = checkpoints.store.recorder
        check = next(iter(recorder.select_events(KeyCheck.id_for(key_id), limit=1)), None)
        if (
            check is not None
            and isinstance(check.topic, str)
            and signed_by(check, key_id)
            and inclusion_proofs(checkpoints.tables, body, [check]) is not None
        ):
            evidence = f"checkpoint {body.number} includes the key check record of {key_id}"
            return MissingSigningKey(source, key_id, where, evidence)
    reason = (
        f"signed with key id {key_id!r}, which the keyring lacks and no checkpoint the keyring"
        " can read shows this store ever used"
    )
    return UnknownSigningKey(stream, version, reason)
