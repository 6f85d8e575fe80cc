"""`assemble_context` and the receipt diff: pure, total-ordered, pinned to the byte."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.canonical import canonical_json
from domain.context_assembly import (
    REDACTED,
    ContextCaller,
    ContextRequest,
    ContextRequestError,
    assemble_context,
)
from domain.memories import Memory, MemoryLog
from domain.policy import parse_bundle
from projections.receipts import receipt_diff

BUNDLE = parse_bundle(
    "version: 1\nrules:\n"
    "- {id: no-medical, when: {memory_label: medical}, action: deny}\n"
    "- {id: mask-pii, when: {memory_label: pii, caller_role_not: admin}, action: redact}\n"
)
AGENT = ContextCaller("support-bot", ("operator",))


def memories() -> list[Memory]:
    log = MemoryLog(tenant="acme")
    log.remember_fact("user/customer/alice/plan", "gold", [], {"actor": "w"})
    log.remember_fact("user/customer/alice/email", "alice@example.com", ["pii"], {"actor": "w"})
    log.remember_episode("Alice asked about her plan renewal", ["medical"], {"actor": "w"})
    log.remember_episode("alice disputed a plan invoice", ["billing"], {"actor": "w"})
    log.remember_episode("bob likes trains", [], {"actor": "w"})
    return log.live()


def test_the_assembled_context_is_pinned() -> None:
    context = assemble_context(memories(), ContextRequest("ALICE plan email", 3), AGENT, BUNDLE)
    assert [(e["kind"], e["score"], e["rank"], e["redacted"]) for e in context.entries] == [
        ("episode", 2, 1, False),
        ("fact", 2, 2, True),
        ("fact", 2, 3, False),
    ]
    assert context.entries[1]["content"] == REDACTED
    assert [f["rule_id"] for f in context.filters_applied] == ["no-medical", "mask-pii"]
    assert [e["memory_id"] for e in context.entries] == PINNED_IDS
    assert context.context_hash == PINNED_CONTEXT_HASH


PINNED_CONTEXT_HASH = "35d3d139560a9e9451f4897af49cb6a16aa6efc490734295d92a4ca4a20eac3c"
PINNED_IDS = [
    "epi-a721229ae2726450c1e4de8e111564ce",  # derive_id("acme", "memory", "episode", 5)
    "mem-00ce90a2a7c19e302367b0d4fdd8a0ad",
    "mem-4e139d93d02d19f9a78747336cb11faa",
]


def test_an_admin_caller_sees_through_the_redaction_but_not_the_denial() -> None:
    admin = ContextCaller("ops", ("admin",))
    context = assemble_context(memories(), ContextRequest("alice"), admin, BUNDLE)
    assert REDACTED not in [e["content"] for e in context.entries]
    assert [f["action"] for f in context.filters_applied] == ["deny"]


def test_without_a_bundle_nothing_is_filtered_and_unmatched_memories_are_not_candidates() -> None:
    context = assemble_context(memories(), ContextRequest("alice"), AGENT, None)
    assert context.filters_applied == []
    assert len(context.entries) == 4  # bob's memory shares no word with the query


@given(st.permutations(range(5)), st.integers(min_value=1, max_value=5))
def test_the_order_memories_arrive_in_does_not_matter(order: list[int], max_entries: int) -> None:
    stored = memories()
    shuffled = [stored[i] for i in order]
    request = ContextRequest("alice plan invoice trains", max_entries)
    assert assemble_context(shuffled, request, AGENT, BUNDLE) == assemble_context(
        stored, request, AGENT, BUNDLE
    )


@pytest.mark.parametrize(
    ("query", "max_entries", "message"),
    [
        ("", 10, "query: expected 1-2000 characters"),
        ("!!!", 10, "query: expected at least one word"),
        ("alice", 0, "max_entries: expected an integer from 1 to 100"),
        ("alice", 101, "max_entries: expected an integer from 1 to 100"),
        ("alice", True, "max_entries: expected an integer from 1 to 100"),
    ],
)
def test_bad_requests_name_the_field(query: str, max_entries: Any, message: str) -> None:
    with pytest.raises(ContextRequestError, match=message):
        ContextRequest(query, max_entries)


def _entry(memory_id: str, rank: int) -> dict[str, Any]:
    return {"memory_id": memory_id, "rank": rank}


def test_the_diff_envelope_is_pinned() -> None:
    original = {
        "context_hash": "a" * 64,
        "entries": [_entry("m2", 1), _entry("m1", 2)],
        "filters_applied": [{"rule_id": "r", "memory_id": "m9", "action": "deny"}],
    }
    replay = {
        "context_hash": "b" * 64,
        "entries": [_entry("m3", 1), _entry("m1", 2)],
        "filters_applied": [
            {"rule_id": "r", "memory_id": "m8", "action": "redact"},
            {"rule_id": "r", "memory_id": "m7", "action": "deny"},
        ],
    }
    assert canonical_json(receipt_diff(original, replay)) == (
        b'{"context_hash":{"changed":true,"original":"'
        + b"a" * 64
        + b'","replay":"'
        + b"b" * 64
        + b'"},'
        b'"filters_applied":{"added":[{"action":"deny","memory_id":"m7","rule_id":"r"},'
        b'{"action":"redact","memory_id":"m8","rule_id":"r"}],'
        b'"removed":[{"action":"deny","memory_id":"m9","rule_id":"r"}]},'
        b'"selected_entries":{"added":[{"memory_id":"m3","rank":1}],"common":1,'
        b'"removed":[{"memory_id":"m2","rank":1}]}}'
    )
    unwritten = receipt_diff(original, None)
    assert unwritten["context_hash"] == {"original": "a" * 64, "replay": None, "changed": True}
    assert [e["memory_id"] for e in unwritten["selected_entries"]["removed"]] == ["m1", "m2"]
    assert unwritten["filters_applied"]["removed"] == original["filters_applied"]
