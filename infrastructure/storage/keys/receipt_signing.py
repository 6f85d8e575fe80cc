"""Receipt signatures: HMAC-SHA256 over a receipt's whole canonical body, and their verdicts.

The body names its own algorithm and key id (``body["signature"]``), so both are covered by the
MAC. The keyring signs with its active key and verifies with any key it holds, so a receipt
signed before a key rotation still verifies after it.

A verdict is ``valid`` true (``ok``), false (``record_mac_mismatch``, ``record_altered``,
``signature_mismatch``) or null when the receipt cannot be checked here (``no_signature``,
``unsupported_algorithm``, ``key_unavailable``). Its stored record carries the ledger's own MAC
too, checked first: a record whose MAC fails has been edited in the database, so nothing it says
about its own signature (key id, algorithm, signature) is believed, and it is
``record_mac_mismatch``.

A record stored under a key id the keyring does not hold cannot have its MAC checked, and an edit
re-wrapped under an invented key id would otherwise pass for "cannot be checked". The store judges
such a record by its newest checkpoint (`checkpoints.removed_keys`), as it does every record: one
the checkpoint holds as stored means the keyring lacks one of the store's keys, a configuration
error (``KEY_MISMATCH``) and no verdict; one where the checkpoint holds other bytes is
``record_altered`` (false). Only a record nothing yet shows the store signed stays
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
    KEY_UNAVAILABLE = "key_unavailable"
    NO_SIGNATURE = "no_signature"
    UNSUPPORTED_ALGORITHM = "unsupported_algorithm"


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
    altered: VerifyReason | None = None,
) -> Verdict:
    """``altered``: why the stored record is known to be edited (its ledger MAC failed under a key
    the keyring holds, or a checkpoint holds other bytes where it stands under a key id the
    keyring lacks); None when it is not known to be."""
    declared = body.get("signature") if isinstance(body, dict) else None
    named = declared if isinstance(declared, dict) else {}
    key_id, algorithm = named.get("key_id"), named.get("algorithm")
    key_id = key_id if isinstance(key_id, str) else None
    algorithm = algorithm if isinstance(algorithm, str) else None
    if altered is not None:
        return Verdict(False, key_id, algorithm, altered)
    if not isinstance(declared, dict) or not isinstance(signature, str):
        return Verdict(None, None, None, VerifyReason.NO_SIGNATURE)
    if algorithm != SIGNATURE_ALGORITHM:
        return Verdict(None, key_id, algorithm, VerifyReason.UNSUPPORTED_ALGORITHM)
    if key_id is None or not keyring.has_key(key_id):
        return Verdict(None, key_id, algorithm, VerifyReason.KEY_UNAVAILABLE)
    try:
        holds = keyring.verify(key_id, canonical_json(body), bytes.fromhex(signature))
    except (ValueError, CanonicalJSONError):
        holds = False
    if not holds:
        return Verdict(False, key_id, algorithm, VerifyReason.SIGNATURE_MISMATCH)
    return Verdict(True, key_id, algorithm, VerifyReason.OK)
