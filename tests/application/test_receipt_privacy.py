"""Receipts of memories a store holds from before the privacy rules, on SQLite and PostgreSQL.

The attack: a store written as a ledger wrote it before memory writes were held to the privacy
rules (`support.older_stores`: a ``password`` field, an SSN, a card number, an API key, a value
under an ``api_key`` key), then, as a non-admin, through the Python API, the CLI (on the store
as CLI writes leave it, checkpointed) and HTTP: assemble a context and a handoff (through the
Python API with a query and a note holding canaries of their own), show both
receipts, list them, verify them, and replay them after the memories are forgotten (so the diff
lists every entry as removed). No canary may be in anything a non-admin is shown; an admin is
shown every one. The receipts' stored bytes keep them (a receipt is signed over its content), and
verification checks those bytes for any reader.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from support.api_support import Api
from support.canaries import API_KEY, CARD, PASSWORD, SSN, found
from support.ledger_fixtures import RawTable, run
from support.older_stores import BEFORE_THE_RULES, OLD_SECRET, store_before_the_rules
from support.receipt_tampering import edit_receipt

from domain.context_assembly import ContextCaller, ContextRequest
from domain.governance import Actor
from domain.receipt import MemoryView, Receipt, ReceiptKind, handoff_of
from infrastructure.application.ledger import Ledger
from infrastructure.application.receipts import Assembly
from infrastructure.storage.settings import Settings
from projections.redaction import PII_MARK

EVERY_CANARY = {PASSWORD, SSN, CARD, API_KEY}
NON_ADMINS = [None, Actor.of("olga", ["operator"]), Actor.of("aude", ["auditor", "council"])]
ADMIN = Actor.of("adam", ["admin"])
AUDITOR = Actor.of("aude", ["auditor"])


def leaks(shown: Any) -> set[str]:
    """The canaries (and the value only its key names) in what a reader was shown."""
    text = shown if isinstance(shown, str) else orjson.dumps(shown).decode()
    return set(found(text)) | ({OLD_SECRET} if OLD_SECRET in text else set())


def assemble(ledger: Ledger, caller: Actor, kind: ReceiptKind) -> dict[str, Any]:
    """A context or handoff for ``caller`` whose query and note hold canaries of their own (an
    assembly's request is kept on its receipt as asked)."""
    handoff = None
    if kind is ReceiptKind.HANDOFF:
        handoff = handoff_of("billing-bot", "support-bot", f"alice's card {CARD}")
    asker = ContextCaller(caller.actor_id, caller.roles)
    request = ContextRequest(f"alice {SSN}", 10)
    return ledger.receipts.emit(Assembly(kind, "acme", asker, request, handoff))


def forget_every_memory(ledger: Ledger) -> None:
    """Erase the older memories: a replay over today's memories lists each entry as removed."""
    for n in range(len(BEFORE_THE_RULES)):
        ledger.memories.forget("acme", f"mem-{n:032x}", "erasure request", ADMIN)


@pytest.fixture
def older(ledger: Ledger) -> Ledger:
    store_before_the_rules(ledger, "acme")
    return ledger


def test_a_non_admin_is_shown_no_personal_data_of_a_receipt(
    older: Ledger, settings: Settings
) -> None:
    shown: list[Any] = []
    receipt_ids = []
    for kind in ReceiptKind:
        emitted = assemble(older, Actor.of("olga", ["operator"]), kind)
        assert len(emitted["receipt"]["entries"]) == len(BEFORE_THE_RULES)
        assert emitted["redacted"] is True and PII_MARK in orjson.dumps(emitted).decode()
        receipt_ids.append(emitted["receipt"]["receipt_id"])
        shown.append(emitted)
    for receipt_id in receipt_ids:
        for reader in NON_ADMINS:
            answer = older.receipts.get(receipt_id, "acme", reader)
            assert answer["redacted"] is True
            shown.append(answer)
        # The stored bytes keep what was handed out; the verdict is over them.
        stored = RawTable(settings).state(Receipt.id_for(receipt_id), 1)
        assert set(found(stored)) == EVERY_CANARY and OLD_SECRET.encode() in stored
        assert older.receipts.verify(receipt_id, "acme").as_json()["valid"] is True
    shown.append(older.receipts.listing("acme"))
    forget_every_memory(older)
    for receipt_id in receipt_ids:
        for view in MemoryView:
            answer = older.receipts.replay(receipt_id, "acme", AUDITOR, view)
            removed = answer["diff"]["selected_entries"]["removed"]
            assert len(removed) == (0 if view is MemoryView.AS_EMITTED else len(BEFORE_THE_RULES))
            shown.append(answer)
    assert [leaks(answer) for answer in shown] == [set() for _ in shown]


def test_an_admin_is_shown_the_receipt_whole(older: Ledger) -> None:
    emitted = assemble(older, ADMIN, ReceiptKind.CONTEXT)
    receipt_id = emitted["receipt"]["receipt_id"]
    assert emitted["redacted"] is False
    assert leaks(emitted) == EVERY_CANARY | {OLD_SECRET}
    stored = older.receipts.get(receipt_id, "acme", ADMIN)
    assert stored == emitted
    forget_every_memory(older)
    admin_auditor = Actor.of("ana", ["admin", "auditor"])
    replayed = older.receipts.replay(receipt_id, "acme", admin_auditor, MemoryView.CURRENT)
    assert leaks(replayed["diff"]) == EVERY_CANARY | {OLD_SECRET}
    assert replayed["redacted"] is False


def test_the_cli_shows_a_non_admin_no_personal_data_of_a_receipt(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with Ledger.open(cli_env) as ledger:  # closed checkpointed, as every CLI write leaves it
        store_before_the_rules(ledger, "acme")
    monkeypatch.setenv("MACE_ACTOR", "olga")
    monkeypatch.setenv("MACE_ROLES", "operator")
    seen = ""
    receipt_ids = []
    for assembly in (("context",), ("handoff", "--to", "billing-bot", "--note", "alice's file")):
        code, out, err = run(capsys, *assembly, "alice", "--tenant", "acme", "--json")
        assert code == 0, err
        receipt_ids.append(orjson.loads(out)["receipt"]["receipt_id"])
        code, text, err = run(capsys, *assembly, "alice", "--tenant", "acme")
        assert code == 0, err
        seen += out + text + err
    for receipt_id in receipt_ids:
        for extra in ((), ("--json",)):
            for command in ("show", "verify"):
                code, out, err = run(
                    capsys, "receipts", command, receipt_id, "--tenant", "acme", *extra
                )
                assert code == 0, err
                seen += out + err
    for extra in ((), ("--json",)):
        code, out, err = run(capsys, "receipts", "list", "--tenant", "acme", *extra)
        assert code == 0, err
        seen += out + err
    with Ledger.open(cli_env) as ledger:
        forget_every_memory(ledger)
    monkeypatch.setenv("MACE_ROLES", "auditor")
    for receipt_id in receipt_ids:
        for extra in ((), ("--json",)):
            code, out, err = run(
                capsys, "receipts", "replay", receipt_id, "--tenant", "acme", *extra
            )
            assert code == 0, err
            assert "removed" in out
            seen += out + err
    assert PII_MARK in seen
    assert leaks(seen) == set()
    monkeypatch.setenv("MACE_ROLES", "admin")
    code, out, err = run(capsys, "receipts", "show", receipt_ids[0], "--tenant", "acme")
    assert code == 0, err
    assert leaks(out) == EVERY_CANARY | {OLD_SECRET}


def test_http_shows_a_non_admin_no_personal_data_of_a_receipt(api: Api, settings: Settings) -> None:
    store_before_the_rules(api.ledger, "acme")
    answers = []
    receipt_ids = []
    for path, body in (
        ("/v1/context", {"query": "alice"}),
        ("/v1/handoff", {"query": "alice", "to_agent": "billing-bot", "note": "alice's file"}),
    ):
        response = api.post(path, body, "operator")
        assert response.status_code == 200, response.content
        receipt_ids.append(response.json()["receipt"]["receipt_id"])
        answers.append(response)
    for receipt_id in receipt_ids:
        for who in ("operator", "auditor", "council"):
            answers.append(api.get(f"/v1/receipts/{receipt_id}", who))
        answers.append(api.get(f"/v1/receipts/{receipt_id}/verify", "operator"))
        assert answers[-1].json()["valid"] is True
    answers.append(api.get("/v1/receipts", "operator"))
    forget_every_memory(api.ledger)
    for receipt_id in receipt_ids:
        answers.append(api.post(f"/v1/receipts/{receipt_id}/replay", None, "auditor"))
    assert [r.status_code for r in answers] == [200] * len(answers)
    assert [leaks(r.text) for r in answers] == [set() for _ in answers]
    admin = api.get(f"/v1/receipts/{receipt_ids[0]}", "admin")
    assert leaks(admin.text) == EVERY_CANARY | {OLD_SECRET}
    assert admin.json()["redacted"] is False


def test_a_receipt_verify_for_a_non_admin_checks_the_stored_bytes(
    api: Api, settings: Settings
) -> None:
    """The redacted view never stands in for the record: an edit of the stored body (here the
    SSN itself, made to look redacted) still fails verification, whoever asks."""
    store_before_the_rules(api.ledger, "acme")
    receipt_id = api.post("/v1/context", {"query": "alice"}, "operator").json()["receipt"][
        "receipt_id"
    ]

    def hide_the_ssn(fields: dict[str, Any]) -> None:
        for entry in fields["body"]["entries"]:
            if entry["content"] == SSN:
                entry["content"] = PII_MARK

    edit_receipt(settings, receipt_id, hide_the_ssn)
    for who in ("operator", "admin"):
        verdict = api.get(f"/v1/receipts/{receipt_id}/verify", who).json()
        assert (verdict["valid"], verdict["reason"]) == (False, "record_mac_mismatch")
