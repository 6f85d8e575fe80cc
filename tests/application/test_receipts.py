"""Retrieval receipts (seed 001): memories, bundles, emission, verification and replay, both stores.

Tampering is done as someone with database access would: by editing the stored row.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from support.ledger_fixtures import settings_for, store_of
from support.receipt_examples import BUNDLE
from support.receipt_tampering import edit_receipt, flip_memory_byte, refuse_new_receipts

from domain.canonical import canonical_json
from domain.context_assembly import REDACTED, ContextCaller, ContextRequest
from domain.errors import IntegrityFailure, NotFoundError
from domain.governance import AccessDenied, Actor
from domain.memories import MemoryLogError
from domain.policy import PolicyError
from domain.receipt import (
    BODY_KEYS,
    MemoryView,
    Receipt,
    ReceiptKind,
    Unreplayable,
    handoff_of,
)
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.storage.records.key_checks import MissingSigningKey
from infrastructure.storage.settings import Settings

WRITER = Actor.of("writer", ["operator"])
AUDITOR = Actor.of("ada", ["auditor"])
AGENT = ContextCaller("support-bot", ("operator",))

STRICTER = BUNDLE.replace("memory_label: medical", "memory_labels_any: [medical, billing]")


def ask(query: str, tenant: str = "acme", max_entries: int = 10) -> Assembly:
    return Assembly(ReceiptKind.CONTEXT, tenant, AGENT, ContextRequest(query, max_entries), None)


@pytest.fixture
def acme(ledger: Ledger) -> Ledger:
    """A tenant with a fact, a PII fact, a medical episode and a billing episode, under BUNDLE."""
    mem = ledger.memories
    mem.remember_fact("acme", "user/customer/alice/plan", "gold", [], WRITER, None)
    mem.remember_fact(
        "acme", "user/customer/alice/email", "alice@example.com", ["pii"], WRITER, None
    )
    mem.remember_episode("acme", "alice asked about her plan renewal", ["medical"], WRITER, None)
    mem.remember_episode(
        "acme", "alice disputed a plan invoice", ["billing"], WRITER, {"job_id": "j-7"}
    )
    ledger.policy.set_bundle("acme", BUNDLE, AUDITOR)
    return ledger


def test_context_applies_the_bundle_and_records_every_filter(acme: Ledger) -> None:
    body = acme.receipts.emit(ask("alice plan email"))["receipt"]
    kept = {e["key"] or e["content"]: e for e in body["entries"]}
    assert "alice asked about her plan renewal" not in kept  # denied
    assert kept["user/customer/alice/email"]["content"] == REDACTED
    assert kept["user/customer/alice/email"]["redacted"] is True
    assert kept["user/customer/alice/plan"]["content"] == "gold"
    assert [(f["rule_id"], f["action"]) for f in body["filters_applied"]] == [
        ("no-medical", "deny"),  # the episode (position 3) outranks the email (2) at score 2
        ("mask-pii", "redact"),
    ]
    assert body["policy_snapshot"]["bundle_yaml"] == BUNDLE
    assert body["memory"] == {"log_position": 5, "view": "current"}
    assert body["mode"] == "live" and body["parent_receipt_id"] is None
    assert body["caller"] == {"id": "support-bot", "roles": ["operator"]}
    assert body["signature"] == {"algorithm": "HMAC-SHA256", "key_id": "k1"}
    assert [e["rank"] for e in body["entries"]] == list(range(1, len(body["entries"]) + 1))


def test_ranking_is_a_total_order_by_score_then_recency_then_id(acme: Ledger) -> None:
    body = acme.receipts.emit(ask("alice plan invoice"))["receipt"]
    ranked = [(e["score"], e["position"]) for e in body["entries"]]
    assert ranked == sorted(ranked, key=lambda p: (-p[0], -p[1]))
    assert body["entries"][0]["content"] == "alice disputed a plan invoice"


def test_no_bundle_is_a_captured_null_snapshot_and_the_global_bundle_is_the_fallback(
    ledger: Ledger,
) -> None:
    ledger.memories.remember_episode("acme", "alice has a medical note", ["medical"], WRITER, None)
    body = ledger.receipts.emit(ask("alice"))["receipt"]
    snapshot = body["policy_snapshot"]
    assert (snapshot["bundle_hash"], snapshot["bundle_yaml"]) == (None, None)
    assert len(body["entries"]) == 1
    ledger.policy.set_bundle(None, BUNDLE, AUDITOR)
    fallback = ledger.receipts.emit(ask("alice"))["receipt"]
    assert fallback["policy_snapshot"]["bundle_yaml"] == BUNDLE
    assert fallback["entries"] == []
    ledger.policy.set_bundle("acme", "version: 1\nrules: []\n", AUDITOR)
    own = ledger.receipts.emit(ask("alice"))["receipt"]
    assert len(own["entries"]) == 1
    ledger.policy.clear_bundle("acme", AUDITOR)
    assert ledger.receipts.emit(ask("alice"))["receipt"]["entries"] == []


def test_a_refused_bundle_writes_nothing(ledger: Ledger) -> None:
    with pytest.raises(PolicyError, match="rule 'a': unknown predicate 'colour'"):
        ledger.policy.set_bundle(
            "acme", "version: 1\nrules:\n- {id: a, when: {colour: red}, action: deny}\n", AUDITOR
        )
    assert ledger.policy.book("acme") is None
    with pytest.raises(NotFoundError, match="no policy bundle is set for tenant/acme"):
        ledger.policy.clear_bundle("acme", AUDITOR)


def test_memory_writes_refuse_bad_input(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="rule S2"):
        ledger.memories.remember_fact("acme", "user/Customer/a/b", 1, [], WRITER, None)
    with pytest.raises(MemoryLogError, match="label 'PII'"):
        ledger.memories.remember_episode("acme", "text", ["PII"], WRITER, None)
    with pytest.raises(MemoryLogError, match="episode: expected non-empty text"):
        ledger.memories.remember_episode("acme", "  ", [], WRITER, None)
    with pytest.raises(LookupError):
        ledger.memories.forget("acme", "mem-" + "0" * 32, "gone", WRITER)
    assert ledger.memories.log("acme") is None


def test_a_fact_written_again_supersedes_the_live_one(ledger: Ledger) -> None:
    first = ledger.memories.remember_fact("acme", "user/customer/a/plan", "gold", [], WRITER, None)
    second = ledger.memories.remember_fact(
        "acme", "user/customer/a/plan", "bronze", [], WRITER, None
    )
    assert first.memory_id != second.memory_id
    assert [m.memory_id for m in ledger.memories.memories("acme")] == [second.memory_id]


def test_memories_are_per_tenant(acme: Ledger) -> None:
    assert acme.receipts.emit(ask("alice", tenant="other"))["receipt"]["entries"] == []
    assert acme.memories.memories("other") == []


def test_verify_ok_then_after_rotation_then_the_removed_key_named(
    acme: Ledger, settings: Settings
) -> None:
    receipt_id = acme.receipts.emit(ask("alice"))["receipt"]["receipt_id"]
    assert acme.receipts.verify(receipt_id, "acme").as_json() == {
        "valid": True,
        "key_id": "k1",
        "algorithm": "HMAC-SHA256",
        "reason": "ok",
    }
    rotated = settings_for(str(settings.store), "k1", "k2", active="k2")
    with Ledger.open(rotated) as later:
        assert later.receipts.verify(receipt_id, "acme").reason == "ok"
        newer = later.receipts.emit(ask("alice"))["receipt"]
        assert newer["signature"]["key_id"] == "k2"
    retired = settings_for(str(settings.store), "k2", active="k2")
    with Ledger.open(retired) as without_k1:
        # The newest checkpoint holds the receipt's record as stored: the keyring lacks k1.
        with pytest.raises(MissingSigningKey, match="MACE_SIGNING_KEYS lacks key k1"):
            without_k1.receipts.verify(receipt_id, "acme")
        assert without_k1.receipts.verify(newer["receipt_id"], "acme").reason == "ok"


def test_foreign_and_unknown_receipts_are_not_found_alike(acme: Ledger) -> None:
    receipt_id = acme.receipts.emit(ask("alice"))["receipt"]["receipt_id"]
    messages = []
    for rid, tenant in [(receipt_id, "other"), ("rct-" + "0" * 32, "acme"), ("nope", "acme")]:
        with pytest.raises(NotFoundError) as caught:
            acme.receipts.replay(rid, tenant, AUDITOR, MemoryView.CURRENT)
        messages.append(str(caught.value).replace(rid, "ID"))
    assert len(set(messages)) == 1


def test_replay_with_nothing_changed_is_an_empty_diff(acme: Ledger) -> None:
    original = acme.receipts.emit(ask("alice plan email"))["receipt"]
    answer = acme.receipts.replay(original["receipt_id"], "acme", AUDITOR, MemoryView.CURRENT)
    assert answer["original_receipt_id"] == original["receipt_id"]
    diff = answer["diff"]
    assert diff["context_hash"] == {
        "original": original["context_hash"],
        "replay": original["context_hash"],
        "changed": False,
    }
    assert diff["selected_entries"] == {
        "added": [],
        "removed": [],
        "common": len(original["entries"]),
    }
    assert diff["filters_applied"] == {"added": [], "removed": []}
    replay = acme.receipts.get(answer["replay_receipt_id"], "acme", AUDITOR)["receipt"]
    assert replay["mode"] == "as_of_replay"
    assert replay["parent_receipt_id"] == original["receipt_id"]
    assert replay["policy_snapshot"] == original["policy_snapshot"]
    assert replay["replayed_by"] == {"id": "ada", "roles": ["auditor"]}
    assert replay["caller"] == original["caller"]


def test_data_drift_shows_added_and_removed_and_as_emitted_reproduces(acme: Ledger) -> None:
    original = acme.receipts.emit(ask("alice plan"))["receipt"]
    plan = next(e for e in original["entries"] if e["key"] == "user/customer/alice/plan")
    acme.memories.forget("acme", plan["memory_id"], "customer left", WRITER)
    added = acme.memories.remember_episode("acme", "alice plan cancelled", [], WRITER, None)
    acme.policy.clear_bundle("acme", AUDITOR)  # the live bundle does not matter to a replay
    rid = original["receipt_id"]

    current = acme.receipts.replay(rid, "acme", AUDITOR, MemoryView.CURRENT)["diff"]
    assert current["context_hash"]["changed"] is True
    assert [e["memory_id"] for e in current["selected_entries"]["added"]] == [added.memory_id]
    assert [e["memory_id"] for e in current["selected_entries"]["removed"]] == [plan["memory_id"]]
    assert current["filters_applied"] == {"added": [], "removed": []}

    answer = acme.receipts.replay(rid, "acme", AUDITOR, MemoryView.AS_EMITTED)
    assert answer["diff"]["context_hash"]["changed"] is False
    replay = acme.receipts.get(answer["replay_receipt_id"], "acme", AUDITOR)["receipt"]
    assert replay["entries"] == original["entries"]
    assert replay["filters_applied"] == original["filters_applied"]
    assert replay["memory"] == {"log_position": 5, "view": "as_emitted"}
    assert acme.memories.log("acme") is not None
    assert acme.memories.log("acme").version == 7  # type: ignore[union-attr] # nothing replayed wrote


def test_policy_drift_is_zero_even_when_the_live_bundle_changed(acme: Ledger) -> None:
    original = acme.receipts.emit(ask("alice plan invoice"))["receipt"]
    acme.policy.set_bundle("acme", STRICTER, AUDITOR)
    live = acme.receipts.emit(ask("alice plan invoice"))["receipt"]
    assert live["context_hash"] != original["context_hash"]
    diff = acme.receipts.replay(original["receipt_id"], "acme", AUDITOR, MemoryView.CURRENT)
    assert diff["diff"]["context_hash"]["changed"] is False


def test_replay_of_a_replay_is_refused(acme: Ledger) -> None:
    original = acme.receipts.emit(ask("alice"))["receipt"]
    first = acme.receipts.replay(original["receipt_id"], "acme", AUDITOR, MemoryView.CURRENT)
    with pytest.raises(Unreplayable) as caught:
        acme.receipts.replay(first["replay_receipt_id"], "acme", AUDITOR, MemoryView.CURRENT)
    assert caught.value.code.value == "unreplayable.nested_replay"


def test_listing_is_in_emission_order_and_filters_by_parent(acme: Ledger) -> None:
    a = acme.receipts.emit(ask("alice"))["receipt"]["receipt_id"]
    b = acme.receipts.emit(ask("plan"))["receipt"]["receipt_id"]
    ra = acme.receipts.replay(a, "acme", AUDITOR, MemoryView.CURRENT)["replay_receipt_id"]
    rows = acme.receipts.listing("acme")
    assert [(r["number"], r["receipt_id"], r["parent_receipt_id"]) for r in rows] == [
        (0, a, None),
        (1, b, None),
        (2, ra, a),
    ]
    assert [r["receipt_id"] for r in acme.receipts.listing("acme", parent=a)] == [ra]
    assert [r["receipt_id"] for r in acme.receipts.listing("acme", after=0, limit=1)] == [b]
    assert acme.receipts.listing("other") == []


# Tampering: rows edited directly in the database


@pytest.fixture
def emitted(acme: Ledger) -> Iterator[str]:
    yield acme.receipts.emit(ask("alice plan email"))["receipt"]["receipt_id"]


def test_only_an_auditor_admin_or_council_member_may_replay_a_receipt(
    acme: Ledger, emitted: str
) -> None:
    before = store_of(acme).recorder.max_notification_id()
    for who in (WRITER, Actor.of("olga", ["operator"])):
        with pytest.raises(AccessDenied) as denied:
            acme.receipts.replay(emitted, "acme", who, MemoryView.CURRENT)
        assert denied.value.message == (
            "this needs one of the roles ['admin', 'auditor', 'council'];"
            f" {who.actor_id} holds ['operator']"
        )
    # Refused before anything is read: an unknown receipt is refused the same way.
    with pytest.raises(AccessDenied):
        acme.receipts.replay("rct-" + "0" * 32, "acme", WRITER, MemoryView.CURRENT)
    assert store_of(acme).recorder.max_notification_id() == before
    for role in ("auditor", "admin", "council"):
        who = Actor.of("replayer", ["operator", role])
        answer = acme.receipts.replay(emitted, "acme", who, MemoryView.CURRENT)
        assert answer["replay_receipt_id"] is not None


def test_an_edited_row_fails_verification_and_is_refused_by_replay(
    acme: Ledger, settings: Settings, emitted: str
) -> None:
    edit_receipt(settings, emitted, lambda f: f["body"]["entries"].pop())
    verdict = acme.receipts.verify(emitted, "acme")
    assert (verdict.valid, verdict.reason) == (False, "record_mac_mismatch")
    with pytest.raises(Unreplayable) as caught:
        acme.receipts.replay(emitted, "acme", AUDITOR, MemoryView.CURRENT)
    assert caught.value.code == "unreplayable.invalid_snapshot"
    assert "record_mac_mismatch" in str(caught.value)
    with pytest.raises(IntegrityFailure, match=f"version 1: receipt {emitted}: MAC mismatch"):
        acme.receipts.get(emitted, "acme", AUDITOR)
    # The receipt index is a read model of verified events: listing fails closed on the record.
    with pytest.raises(IntegrityFailure, match=f"stream {Receipt.id_for(emitted)} version 1"):
        acme.receipts.listing("acme")


def test_broken_yaml_in_the_row_is_an_invalid_snapshot(
    acme: Ledger, settings: Settings, emitted: str
) -> None:
    def break_yaml(fields: dict[str, Any]) -> None:
        fields["body"]["policy_snapshot"]["bundle_yaml"] = "version: [1"

    edit_receipt(settings, emitted, break_yaml)
    with pytest.raises(Unreplayable) as caught:
        acme.receipts.replay(emitted, "acme", AUDITOR, MemoryView.CURRENT)
    assert caught.value.code == "unreplayable.invalid_snapshot"
    assert "does not load: not YAML" in str(caught.value)


@pytest.mark.parametrize(
    "edit",
    [
        lambda f: f.update(signature=None),
        lambda f: f["body"].pop("signature"),
        lambda f: f["body"]["signature"].update(algorithm="none"),
        lambda f: f["body"]["signature"].update(key_id="k9"),
    ],
)
def test_a_row_edited_to_look_unverifiable_is_invalid_not_unchecked(
    acme: Ledger, settings: Settings, emitted: str, edit: Any
) -> None:
    # The row's own MAC is checked first: what an edited row says of its signature (none, an
    # unknown algorithm or key) is not believed.
    edit_receipt(settings, emitted, edit)
    verdict = acme.receipts.verify(emitted, "acme")
    assert (verdict.valid, verdict.reason) == (False, "record_mac_mismatch")


def test_the_refusal_order_is_missing_then_nested_then_invalid(
    acme: Ledger, settings: Settings, emitted: str
) -> None:
    def everything_wrong(fields: dict[str, Any]) -> None:
        fields["body"]["policy_snapshot"] = None
        fields["body"]["parent_receipt_id"] = "rct-" + "1" * 32

    edit_receipt(settings, emitted, everything_wrong)
    with pytest.raises(Unreplayable) as caught:
        acme.receipts.replay(emitted, "acme", AUDITOR, MemoryView.CURRENT)
    assert caught.value.code == "unreplayable.missing_policy_snapshot"

    def nested_and_broken(fields: dict[str, Any]) -> None:
        fields["body"]["policy_snapshot"]["bundle_yaml"] = "version: [1"
        fields["body"]["parent_receipt_id"] = "rct-" + "1" * 32

    second = acme.receipts.emit(ask("alice"))["receipt"]["receipt_id"]
    edit_receipt(settings, second, nested_and_broken)
    with pytest.raises(Unreplayable) as caught:
        acme.receipts.replay(second, "acme", AUDITOR, MemoryView.CURRENT)
    assert caught.value.code == "unreplayable.nested_replay"


# Fail-open: the replay receipt cannot be written


def test_a_replay_whose_receipt_cannot_be_written_still_answers(
    acme: Ledger, settings: Settings, emitted: str
) -> None:
    original = acme.receipts.get(emitted, "acme", AUDITOR)["receipt"]
    refuse_new_receipts(settings)
    answer = acme.receipts.replay(emitted, "acme", AUDITOR, MemoryView.CURRENT)
    assert answer["replay_receipt_id"] is None
    diff = answer["diff"]
    assert diff["context_hash"] == {
        "original": original["context_hash"],
        "replay": None,
        "changed": True,
    }
    ids = sorted(e["memory_id"] for e in original["entries"])
    assert [e["memory_id"] for e in diff["selected_entries"]["removed"]] == ids
    assert diff["selected_entries"]["added"] == [] and diff["selected_entries"]["common"] == 0
    assert len(acme.receipts.listing("acme")) == 1


# Fail-open: a context or handoff receipt cannot be written

NOT_WRITTEN = (
    "the receipt was not written (the store refused it): this answer has no receipt id"
    " and no signature"
)
HANDOFF = handoff_of("billing-bot", "support-bot", "customer disputes an invoice")


@pytest.mark.parametrize("kind", list(ReceiptKind))
def test_an_assembly_whose_receipt_cannot_be_written_is_served_unsigned(
    acme: Ledger, settings: Settings, caplog: pytest.LogCaptureFixture, kind: ReceiptKind
) -> None:
    handoff = HANDOFF if kind is ReceiptKind.HANDOFF else None
    assembly = Assembly(kind, "acme", AGENT, ContextRequest("alice plan email", 10), handoff)
    written = acme.receipts.emit(assembly)["receipt"]
    refuse_new_receipts(settings)
    before = store_of(acme).recorder.max_notification_id()

    answer = acme.receipts.emit(assembly)
    assert set(answer) == {"receipt", "signature", "warning", "redacted"}
    assert (answer["signature"], answer["warning"]) == (None, NOT_WRITTEN)
    served = answer["receipt"]
    assert set(served) == BODY_KEYS
    assert (served["receipt_id"], served["signature"]) == (None, None)
    for key in ("kind", "handoff", "caller", "request", "memory", "entries", "context_hash"):
        assert served[key] == written[key], key
    assert served["filters_applied"] == written["filters_applied"] != []
    bundle = ("bundle_hash", "bundle_yaml")
    assert [served["policy_snapshot"][k] for k in bundle] == [
        written["policy_snapshot"][k] for k in bundle
    ]
    assert store_of(acme).recorder.max_notification_id() == before
    assert [r["receipt_id"] for r in acme.receipts.listing("acme")] == [written["receipt_id"]]
    (line,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert line.startswith(f"{kind.value} for tenant acme: the receipt was not written (")
    assert line.endswith("); answering without it")


def test_only_the_receipt_write_fails_open_not_the_reads_the_assembly_needs(
    acme: Ledger, settings: Settings
) -> None:
    refuse_new_receipts(settings)
    flip_memory_byte(settings, "acme")
    with pytest.raises(IntegrityFailure):
        acme.receipts.emit(ask("alice plan"))


def test_secrets_never_enter_a_receipt(acme: Ledger) -> None:
    body = acme.receipts.emit(ask("alice"))["receipt"]
    text = orjson.dumps(body)
    assert base64.b64encode(b"\x11" * 32) not in text and b"\x11" * 32 not in text


def test_a_handoff_receipt_replays_as_a_handoff(acme: Ledger) -> None:
    handoff = handoff_of("billing-bot", "support-bot", "customer disputes an invoice")
    request = ContextRequest("alice invoice", 5)
    emitted = acme.receipts.emit(Assembly(ReceiptKind.HANDOFF, "acme", AGENT, request, handoff))
    body = emitted["receipt"]
    assert (body["kind"], body["handoff"]) == ("handoff", handoff)
    answer = acme.receipts.replay(body["receipt_id"], "acme", AUDITOR, MemoryView.AS_EMITTED)
    replay = acme.receipts.get(answer["replay_receipt_id"], "acme", AUDITOR)["receipt"]
    assert (replay["kind"], replay["handoff"]) == ("handoff", handoff)
    with pytest.raises(ValueError, match="to_agent: 'billing bot' is not an agent id"):
        handoff_of("billing bot", None, None)


def test_the_signature_verifies_offline_over_the_canonical_body(acme: Ledger) -> None:
    emitted = acme.receipts.emit(ask("alice"))
    expected = hmac.new(b"\x11" * 32, canonical_json(emitted["receipt"]), "sha256").hexdigest()
    assert emitted["signature"] == expected
    assert acme.receipts.get(emitted["receipt"]["receipt_id"], "acme", AUDITOR) == emitted


def test_as_emitted_before_any_memory_existed_sees_none(ledger: Ledger) -> None:
    original = ledger.receipts.emit(ask("alice"))["receipt"]
    assert (original["memory"]["log_position"], original["entries"]) == (0, [])
    ledger.memories.remember_episode("acme", "alice arrived", [], WRITER, None)
    rid = original["receipt_id"]
    assert ledger.receipts.replay(rid, "acme", AUDITOR, MemoryView.AS_EMITTED)["diff"] == {
        "context_hash": {
            "original": original["context_hash"],
            "replay": original["context_hash"],
            "changed": False,
        },
        "selected_entries": {"added": [], "removed": [], "common": 0},
        "filters_applied": {"added": [], "removed": []},
    }
    current = ledger.receipts.replay(rid, "acme", AUDITOR, MemoryView.CURRENT)["diff"]
    assert len(current["selected_entries"]["added"]) == 1
