"""The lines ``mace context``, ``mace handoff`` and ``mace receipts`` print for receipts and diffs.

Every line is one line: memory content is printed as canonical JSON (an episode's newlines stay
escaped), except redacted content, which is printed bare as ``[REDACTED]``. An answer whose
personal data was replaced for its reader (``redacted``) ends with a line that says so.
"""

from __future__ import annotations

from typing import Any

from domain.canonical import canonical_json
from domain.context_assembly import REDACTED
from projections.redaction import PII_MARK

REDACTED_LINE = (
    f"personal data: shown as {PII_MARK} (only an admin reads it in full);"
    " the signature is over the stored receipt"
)


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


def receipt_lines(emitted: dict[str, Any]) -> list[str]:
    """A receipt as ``get`` and ``emit`` answer it: ``{"receipt": body, "signature": hex}``.

    An emission whose receipt could not be written has no id and no signature; it says so.
    """
    lines: list[str] = []
    body = emitted["receipt"]
    receipt_id = body["receipt_id"] or "(not written)"
    lines.append(f"receipt {receipt_id} ({body['kind']}, {body['mode']}) tenant {body['tenant']}")
    if body.get("parent_receipt_id") is not None:
        lines.append(f"replay of: {body['parent_receipt_id']}")
    caller = body["caller"]
    lines.append(f"caller: {caller['id']} [{', '.join(caller['roles'])}]")
    if body.get("replayed_by") is not None:
        by = body["replayed_by"]
        lines.append(f"replayed by: {by['id']} [{', '.join(by['roles'])}]")
    handoff = body.get("handoff")
    if handoff is not None:
        note = "" if handoff["note"] is None else f": {handoff['note']}"
        lines.append(f"handoff: {handoff['from_agent'] or '-'} -> {handoff['to_agent']}{note}")
    request = body["request"]
    lines.append(f"query: {_json(request['query'])} (max {request['max_entries']} entries)")
    memory = body["memory"]
    lines.append(f"memory: log position {memory['log_position']} ({memory['view']})")
    snapshot = body["policy_snapshot"]
    bundle = None if snapshot is None else snapshot["bundle_hash"]
    lines.append(f"policy bundle: {bundle or 'none in force'}")
    lines.append(f"context_hash: {body['context_hash']}")
    lines.append(f"entries: {len(body['entries'])}")
    for entry in body["entries"]:
        lines.append(f"  {entry['rank']}. {entry_text(entry)}")
    lines.append(f"filters applied: {len(body['filters_applied'])}")
    for applied in body["filters_applied"]:
        lines.append(f"  {filter_text(applied)}")
    signature = body["signature"]
    if signature is None:
        lines.append("signature: none (the receipt was not written)")
    else:
        algorithm, key_id = signature["algorithm"], signature["key_id"]
        lines.append(f"signature: {algorithm} key {key_id} {emitted['signature']}")
    lines.append(f"emitted_at: {body['emitted_at']}")
    return _noting_redaction(emitted, lines)


def diff_lines(answer: dict[str, Any]) -> list[str]:
    """The replay envelope: whether the context changed, then entries and filters added/removed."""
    lines: list[str] = []
    replay_id = answer["replay_receipt_id"] or "(replay receipt not written)"
    lines.append(f"replay of {answer['original_receipt_id']}: {replay_id}")
    diff = answer["diff"]
    hashes = diff["context_hash"]
    verdict = "changed" if hashes["changed"] else "unchanged"
    lines.append(f"context: {verdict} ({hashes['original']} -> {hashes['replay'] or 'none'})")
    entries = diff["selected_entries"]
    lines.append(
        f"entries: {len(entries['added'])} added, {len(entries['removed'])} removed,"
        f" {entries['common']} common"
    )
    for sign, key in (("+", "added"), ("-", "removed")):
        for entry in entries[key]:
            lines.append(f"  {sign} {entry_text(entry)}")
    filters = diff["filters_applied"]
    lines.append(f"filters: {len(filters['added'])} added, {len(filters['removed'])} removed")
    for sign, key in (("+", "added"), ("-", "removed")):
        for applied in filters[key]:
            lines.append(f"  {sign} {filter_text(applied)}")
    return _noting_redaction(answer, lines)


def _noting_redaction(answer: dict[str, Any], lines: list[str]) -> list[str]:
    return [*lines, REDACTED_LINE] if answer.get("redacted") else lines
