"""The receipt replay diff envelope (seed 001): what changed between a receipt and its replay.

Entries match by memory id (episodes included), so an entry that is still selected but ranked
differently counts under ``common``, not as one removal and one addition. Filters match by
``(rule_id, memory_id, action)``. Every list is sorted: entries by memory id, filters by that
triple, so the same two receipts always give the same bytes.

When the replay receipt could not be written, there is nothing to compare with: the envelope
still answers, with every original entry and filter under ``removed`` and a null replay hash.
"""

from __future__ import annotations

from typing import Any


def _filter_key(f: dict[str, Any]) -> tuple[str, str, str]:
    return (f["rule_id"], f["memory_id"], f["action"])


def receipt_diff(original: dict[str, Any], replay: dict[str, Any] | None) -> dict[str, Any]:
    """The diff from the ``original`` receipt body to the ``replay`` body (None: not written)."""
    before = {e["memory_id"]: e for e in original["entries"]}
    after = {} if replay is None else {e["memory_id"]: e for e in replay["entries"]}
    filters_before = {_filter_key(f): f for f in original["filters_applied"]}
    filters_after = {} if replay is None else {_filter_key(f): f for f in replay["filters_applied"]}
    replay_hash = None if replay is None else replay["context_hash"]
    return {
        "context_hash": {
            "original": original["context_hash"],
            "replay": replay_hash,
            "changed": replay_hash != original["context_hash"],
        },
        "selected_entries": {
            "added": [after[i] for i in sorted(after.keys() - before.keys())],
            "removed": [before[i] for i in sorted(before.keys() - after.keys())],
            "common": len(before.keys() & after.keys()),
        },
        "filters_applied": {
            "added": [
                filters_after[k] for k in sorted(filters_after.keys() - filters_before.keys())
            ],
            "removed": [
                filters_before[k] for k in sorted(filters_before.keys() - filters_after.keys())
            ],
        },
    }
