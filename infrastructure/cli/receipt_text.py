"""How ``mace context``, ``mace handoff`` and ``mace receipts`` print receipts and diffs for people.

Every line is one line: memory content is printed as canonical JSON (an episode's newlines stay
escaped), except redacted content, which is printed bare as ``[REDACTED]``.
"""

from __future__ import annotations

from typing import Any

from domain.canonical import canonical_json
from domain.context_assembly import REDACTED


def _json(value: Any) -> str:
    return canonical_json(value).decode()


def entry_text(entry: dict[str, Any]) -> str:
    """``memory_id kind [key =] content [labels]``; a redacted entry shows ``[REDACTED]``."""
    content = REDACTED if entry.get("redacted") else _json(entry.get("content"))
    said = content if entry.get("key") is None else f"{entry['key']} = {content}"
    labels = ",".join(entry.get("labels") or [])
    return f"{entry.get('memory_id')} {entry.get('kind')} {said} [{labels}]"


def filter_text(applied: dict[str, Any]) -> str:
    return f"{applied.get('rule_id')} {applied.get('action')} {applied.get('memory_id')}"


def print_receipt(emitted: dict[str, Any]) -> None:
    """A receipt as ``get`` and ``emit`` answer it: ``{"receipt": body, "signature": hex}``.

    An emission whose receipt could not be written has no id and no signature; it says so.
    """
    body = emitted["receipt"]
    receipt_id = body["receipt_id"] or "(not written)"
    print(f"receipt {receipt_id} ({body['kind']}, {body['mode']}) tenant {body['tenant']}")
    if body.get("parent_receipt_id") is not None:
        print(f"replay of: {body['parent_receipt_id']}")
    caller = body["caller"]
    print(f"caller: {caller['id']} [{', '.join(caller['roles'])}]")
    if body.get("replayed_by") is not None:
        by = body["replayed_by"]
        print(f"replayed by: {by['id']} [{', '.join(by['roles'])}]")
    handoff = body.get("handoff")
    if handoff is not None:
        note = "" if handoff["note"] is None else f": {handoff['note']}"
        print(f"handoff: {handoff['from_agent'] or '-'} -> {handoff['to_agent']}{note}")
    request = body["request"]
    print(f"query: {_json(request['query'])} (max {request['max_entries']} entries)")
    memory = body["memory"]
    print(f"memory: log position {memory['log_position']} ({memory['view']})")
    snapshot = body["policy_snapshot"]
    bundle = None if snapshot is None else snapshot["bundle_hash"]
    print(f"policy bundle: {bundle or 'none in force'}")
    print(f"context_hash: {body['context_hash']}")
    print(f"entries: {len(body['entries'])}")
    for entry in body["entries"]:
        print(f"  {entry['rank']}. {entry_text(entry)}")
    print(f"filters applied: {len(body['filters_applied'])}")
    for applied in body["filters_applied"]:
        print(f"  {filter_text(applied)}")
    signature = body["signature"]
    if signature is None:
        print("signature: none (the receipt was not written)")
    else:
        algorithm, key_id = signature["algorithm"], signature["key_id"]
        print(f"signature: {algorithm} key {key_id} {emitted['signature']}")
    print(f"emitted_at: {body['emitted_at']}")


def print_diff(answer: dict[str, Any]) -> None:
    """The replay envelope: whether the context changed, then entries and filters added/removed."""
    replay_id = answer["replay_receipt_id"] or "(replay receipt not written)"
    print(f"replay of {answer['original_receipt_id']}: {replay_id}")
    diff = answer["diff"]
    hashes = diff["context_hash"]
    verdict = "changed" if hashes["changed"] else "unchanged"
    print(f"context: {verdict} ({hashes['original']} -> {hashes['replay'] or 'none'})")
    entries = diff["selected_entries"]
    print(
        f"entries: {len(entries['added'])} added, {len(entries['removed'])} removed,"
        f" {entries['common']} common"
    )
    for sign, key in (("+", "added"), ("-", "removed")):
        for entry in entries[key]:
            print(f"  {sign} {entry_text(entry)}")
    filters = diff["filters_applied"]
    print(f"filters: {len(filters['added'])} added, {len(filters['removed'])} removed")
    for sign, key in (("+", "added"), ("-", "removed")):
        for applied in filters[key]:
            print(f"  {sign} {filter_text(applied)}")
