"""`shown_receipt`: what a reader is shown of a receipt holding personal data (pure, no store)."""

from __future__ import annotations

from typing import Any

from domain.governance import Actor
from domain.memories import TENANT_PRIVACY
from projections.receipts import receipt_diff
from projections.redaction import PII_MARK, shown_receipt

PIN_ID = "mem-" + "0" * 32
"""An id that holds the PIN below as a substring: a name, never rewritten."""
DENIED = TENANT_PRIVACY.deny_sem_attributes


def entry(memory_id: str, key: str | None, content: Any, rank: int) -> dict[str, Any]:
    return {
        "memory_id": memory_id,
        "kind": "fact" if key else "episode",
        "key": key,
        "content": content,
        "labels": [],
        "redacted": False,
        "score": 1,
        "rank": rank,
        "position": rank,
    }


def body(*entries: dict[str, Any]) -> dict[str, Any]:
    return {
        "receipt_id": "rct-" + "0" * 32,
        "request": {"query": "alice pin 0000", "max_entries": 10},
        "entries": list(entries),
        "filters_applied": [],
        "context_hash": "0000" + "a" * 60,
        "emitted_at": "2026-01-01T00:00:00Z",
    }


def test_a_secret_keys_value_is_hidden_whole_and_wherever_else_it_is_said() -> None:
    stored = body(
        entry(PIN_ID, "user/person/alice/pin", "0000", 1),
        entry("mem-" + "1" * 32, "user/person/alice/bank_pin", 4821, 2),
        entry("mem-" + "2" * 32, None, "alice's pin is 0000", 3),
        entry("mem-" + "3" * 32, "user/person/alice/city", "Paris", 4),
    )
    answer = {"receipt": stored, "signature": "0000" + "b" * 60}
    shown = shown_receipt(None, answer, [stored], DENIED)
    assert shown["redacted"] is True
    assert [e["content"] for e in shown["receipt"]["entries"]] == [
        PII_MARK,
        PII_MARK,
        PII_MARK,
        "Paris",
    ]
    assert shown["receipt"]["request"]["query"] == PII_MARK
    # Ids, hashes, stamps and the signature name things: never rewritten, even holding the PIN.
    assert [e["memory_id"] for e in shown["receipt"]["entries"]] == [
        e["memory_id"] for e in stored["entries"]
    ]
    assert shown["signature"] == answer["signature"]
    for name in ("receipt_id", "context_hash", "emitted_at"):
        assert shown["receipt"][name] == stored[name]
    assert stored["entries"][0]["content"] == "0000"  # the stored body is left as it was
    admin = shown_receipt(Actor.of("adam", ["admin"]), answer, [stored], DENIED)
    assert admin == {**answer, "redacted": False}


def test_a_diff_is_shown_redacted_as_its_receipts_are() -> None:
    original = body(entry(PIN_ID, "user/person/alice/pin", "0000", 1))
    replay = body()
    envelope = {
        "original_receipt_id": original["receipt_id"],
        "diff": receipt_diff(original, replay),
    }
    shown = shown_receipt(Actor.of("aude", ["auditor"]), envelope, [original, replay], DENIED)
    removed = shown["diff"]["selected_entries"]["removed"]
    assert [(e["memory_id"], e["content"]) for e in removed] == [(PIN_ID, PII_MARK)]
    assert shown["diff"]["context_hash"] == envelope["diff"]["context_hash"]
    assert shown["redacted"] is True
    nothing = shown_receipt(None, {"receipt": replay, "signature": None}, [replay], DENIED)
    assert nothing["redacted"] is False
