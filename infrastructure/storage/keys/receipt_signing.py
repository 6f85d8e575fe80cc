"""Receipt signatures: HMAC-SHA256 over a receipt's whole canonical body, and their verdicts.

The body names its own algorithm and key id (``body["signature"]``), so both are covered by the
MAC. The keyring signs with its active key and verifies with any key it holds, so a receipt
signed before a key rotation still verifies after it.

A verdict is ``valid`` true (``ok``), false (``record_mac_mismatch``, ``record_altered``,
``signature_mismatch``) or null when the receipt cannot be checked here (``no_signature``,
``unsupported_algorithm``, ``key_retired``, ``key_unavailable``). Its stored record carries the
ledger's own MAC too, checked first: a record whose MAC fails has been edited in the database, so
nothing it says about its own signature (key id, algorithm, signature) is believed, and it is
``record_mac_mismatch``.

A record stored under a key id the keyring does not hold cannot have its MAC checked, and an edit
re-wrapped under an invented key id would otherwise pass for "cannot be checked". The newest
checkpoint tells the two apart (`RecordStanding`): one that covers the record and whose tree holds
these very bytes proves the ledger stored them under that key, since retired and removed
(``key_retired``, null); one that covers it while its tree does not hold these bytes proves an
edit (``record_altered``, false). Only a record no checkpoint covers yet stays
``key_unavailable``: nothing can tell.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from domain.canonical import CanonicalJSONError, canonical_json
from domain.errors import InvalidInput
from domain.receipt import SIGNATURE_ALGORITHM
from infrastructure.storage.keys.keyring import Keyring


class VerifyReason(StrEnum):
    OK = "ok"
    RECORD_MAC_MISMATCH = "record_mac_mismatch"
    RECORD_ALTERED = "record_altered"
    SIGNATURE_MISMATCH = "signature_mismatch"
    KEY_RETIRED = "key_retired"
    KEY_UNAVAILABLE = "key_unavailable"
    NO_SIGNATURE = "no_signature"
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"


class RecordStanding(StrEnum):
    """What the newest checkpoint says of a record whose MAC could not be checked (its key id is
    not in the keyring)."""

    AS_CHECKPOINTED = "as_checkpointed"
    """The checkpoint covers it, and its tree holds these very bytes."""
    ALTERED = "altered"
    """The checkpoint covers it, and its tree does not hold these bytes."""
    NOT_CHECKPOINTED = "not_checkpointed"
    """No checkpoint covers it yet."""


@dataclass(frozen=True, slots=True)
class Verdict:
    valid: bool | None
    key_id: str | None
    algorithm: str | None
    reason: VerifyReason

    def as_json(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "key_id": self.key_id,
            "algorithm": self.algorithm,
            "reason": self.reason.value,
        }


def sign_receipt(keyring: Keyring, body: dict[str, Any]) -> str:
    """The hex MAC of ``body``, which must name the keyring's active key."""
    named = body["signature"]["key_id"]
    key_id, mac = keyring.sign(canonical_json(body))
    if named != key_id:
        msg = f"the body names key {named!r} but the active key is {key_id!r}"
        raise InvalidInput(msg)
    return mac.hex()


def verify_receipt(
    keyring: Keyring,
    body: Any,
    signature: Any,
    *,
    record_altered: bool = False,
    unchecked_record: RecordStanding | None = None,
) -> Verdict:
    """``record_altered``: the stored record's ledger MAC failed under a key the keyring holds;
    ``unchecked_record``: its MAC could not be checked (a key id the keyring lacks), and what the
    newest checkpoint says of it."""
    declared = body.get("signature") if isinstance(body, dict) else None
    named = declared if isinstance(declared, dict) else {}
    key_id, algorithm = named.get("key_id"), named.get("algorithm")
    key_id = key_id if isinstance(key_id, str) else None
    algorithm = algorithm if isinstance(algorithm, str) else None
    if record_altered or unchecked_record is RecordStanding.ALTERED:
        edited = VerifyReason.RECORD_MAC_MISMATCH if record_altered else VerifyReason.RECORD_ALTERED
        return Verdict(False, key_id, algorithm, edited)
    if not isinstance(declared, dict) or not isinstance(signature, str):
        return Verdict(None, None, None, VerifyReason.NO_SIGNATURE)
    if algorithm != SIGNATURE_ALGORITHM:
        return Verdict(None, key_id, algorithm, VerifyReason.UNSUPPORTED_ALGORITHM)
    if key_id is None or not keyring.has_key(key_id):
        retired = unchecked_record is RecordStanding.AS_CHECKPOINTED
        return Verdict(
            None,
            key_id,
            algorithm,
            VerifyReason.KEY_RETIRED if retired else VerifyReason.KEY_UNAVAILABLE,
        )
    try:
        holds = keyring.verify(key_id, canonical_json(body), bytes.fromhex(signature))
    except (ValueError, CanonicalJSONError):
        holds = False
    if not holds:
        return Verdict(False, key_id, algorithm, VerifyReason.SIGNATURE_MISMATCH)
    return Verdict(True, key_id, algorithm, VerifyReason.OK)
