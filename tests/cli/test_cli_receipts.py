"""``mace memories|policy|context|handoff|receipts`` end to end, on SQLite and PostgreSQL.

Exit codes: 0 success; 1 the operation ran and failed (an integrity failure, a receipt that does
not verify, an unreplayable receipt); 2 bad input, one line ``mace: INVALID_INPUT: ...`` and nothing
written. Writes and replays act as ``MACE_ACTOR``/``MACE_ROLES``; reads need no identity. The
acting identity is also the caller a context is assembled for.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.cli_output import json_error, json_error_as_line
from support.ledger_fixtures import RawTable, run, signing_keys
from support.receipt_examples import ALIAS_BOMB, BUNDLE
from support.receipt_tampering import edit_receipt, refuse_new_receipts

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM
from domain.governance import Actor
from domain.policy import MAX_BUNDLE_BYTES, parse_bundle
from domain.receipt import BODY_KEYS, Receipt
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

BUNDLE_HASH = parse_bundle(BUNDLE).bundle_hash
OPEN = "version: 1\nrules: []\n"
ACME = ("--tenant", "acme")
ID = r"[0-9a-f]{32}"
HASH = r"[0-9a-f]{64}"


# --- helpers ------------------------------------------------------------------------------------


def act(monkeypatch: pytest.MonkeyPatch, actor: str, roles: str) -> None:
    """The identity the next ``mace`` commands act as."""
    monkeypatch.setenv("MACE_ACTOR", actor)
    monkeypatch.setenv("MACE_ROLES", roles)


def anonymous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MACE_ACTOR", raising=False)
    monkeypatch.delenv("MACE_ROLES", raising=False)


def stored(settings: Settings) -> list[tuple[Any, ...]]:
    """Every stored event, to show that a refused command changed nothing."""
    return RawTable(settings).execute(
        "SELECT originator_id, originator_version, state FROM {table}"
        " ORDER BY originator_id, originator_version"
    )


def ok(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """``mace *argv`` succeeded quietly: its standard output."""
    code, out, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    return out


def ok_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """``mace *argv --json`` succeeded: its output, which is one line of canonical JSON."""
    out = ok(capsys, *argv, "--json")
    data = orjson.loads(out)
    assert out == canonical_json(data).decode() + "\n"
    return data


def refused(
    capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str, code: int = 2
) -> str:
    """``mace *argv`` failed with ``code``, one line on standard error and nothing written."""
    before = stored(settings)
    got, out, err = run(capsys, *argv)
    assert (got, out) == (code, ""), err
    assert err.count("\n") == 1 and err.endswith("\n")
    assert stored(settings) == before
    return err


def write_bundle(tmp_path: Path, text: str = BUNDLE, name: str = "bundle.yaml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


@dataclass(frozen=True)
class Acme:
    """The ids of tenant acme's memories."""

    plan: str
    email: str
    medical: str
    invoice: str


@pytest.fixture
def acme(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Acme:
    """Tenant acme: a fact, a PII fact, a medical episode and a billing episode, under BUNDLE.

    Recorded through the use cases the commands call, as ``wes`` (operator) and ``ada``
    (auditor), in one ledger that checkpoints as it closes: the store is as the commands leave
    it, fully checkpointed (`mace memories add` and `mace policy set` are tested above).
    Afterwards the acting identity is ``support-bot`` (operator), the agent asking for context.
    """
    wes = Actor.of("wes", ["operator"])
    with Ledger.open(cli_env) as ledger:
        memories = ledger.memories

        def fact(key: str, value: str, *labels: str) -> str:
            return memories.remember_fact("acme", key, value, [*labels], wes, None).memory_id

        def episode(text: str, *labels: str) -> str:
            return memories.remember_episode("acme", text, [*labels], wes, None).memory_id

        ids = Acme(
            plan=fact("user/customer/alice/plan", "gold"),
            email=fact("user/customer/alice/email", "alice@example.com", "pii"),
            medical=episode("alice asked about her plan renewal", "medical"),
            invoice=episode("alice disputed a plan invoice", "billing"),
        )
        ledger.policy.set_bundle("acme", BUNDLE, Actor.of("ada", ["auditor"]))
    act(monkeypatch, "support-bot", "operator")
    return ids


def emit(capsys: pytest.CaptureFixture[str], query: str, *argv: str) -> dict[str, Any]:
    """``mace context QUERY --json`` for acme: ``{"receipt", "signature", "redacted"}``."""
    emitted = ok_json(capsys, "context", query, *ACME, *argv)
    assert isinstance(emitted, dict)
    return emitted


# --- mace memories ------------------------------------------------------------------------------


def test_memories_add_list_and_forget(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    act(monkeypatch, "wes", "operator")
    out = ok(capsys, "memories", "add", "--fact", "user/customer/alice/plan", '"gold"', *ACME)
    added = re.fullmatch(rf"(mem-{ID}) fact at position 2\n", out)
    assert added is not None
    plan = added.group(1)
    email = ok_json(
        capsys,
        "memories",
        "add",
        "--fact",
        "user/customer/alice/email",
        '"alice@example.com"',
        *("--label", "pii", "--label", "contact", "--label", "pii"),
        *("--origin", '{"job_id": "j-7"}'),
        *ACME,
    )
    assert email == {
        "memory_id": email["memory_id"],
        "kind": "fact",
        "key": "user/customer/alice/email",
        "content": "alice@example.com",
        "labels": ["contact", "pii"],
        "provenance": {
            "actor": "wes",
            "origin": {"job_id": "j-7"},
            "recorded_at": email["provenance"]["recorded_at"],
        },
        "position": 3,
    }
    episode = ok_json(capsys, "memories", "add", "--episode", "alice called\ntwice", *ACME)
    assert re.fullmatch(rf"epi-{ID}", episode["memory_id"])
    assert (episode["kind"], episode["key"], episode["content"], episode["labels"]) == (
        "episode",
        None,
        "alice called\ntwice",
        [],
    )

    anonymous(monkeypatch)  # reads need no identity
    assert ok(capsys, "memories", "list", *ACME) == (
        f"{plan} fact user/customer/alice/plan []\n"
        f"{email['memory_id']} fact user/customer/alice/email [contact,pii]\n"
        f'{episode["memory_id"]} episode "alice called\\ntwice" []\n'
    )
    listed = ok_json(capsys, "memories", "list", *ACME)
    assert listed["log_position"] == 4
    assert [m["memory_id"] for m in listed["memories"]] == [
        plan,
        email["memory_id"],
        episode["memory_id"],
    ]
    assert listed["memories"][1] == email

    act(monkeypatch, "wes", "operator")
    forgot = ok(capsys, "memories", "forget", plan, "--reason", "customer left", *ACME)
    assert forgot == f"forgot {plan} (tenant acme) by wes\n"
    assert ok_json(
        capsys, "memories", "forget", episode["memory_id"], "--reason", "duplicate", *ACME
    ) == {"memory_id": episode["memory_id"], "tenant": "acme", "forgotten": True}
    listed = ok_json(capsys, "memories", "list", *ACME)
    assert (listed["log_position"], listed["memories"]) == (6, [email])

    # A fact written again under its key supersedes the live one, with a new id.
    again = ok_json(
        capsys, "memories", "add", "--fact", "user/customer/alice/email", '"a@example.org"', *ACME
    )
    assert again["memory_id"] != email["memory_id"]
    assert ok_json(capsys, "memories", "list", *ACME)["memories"] == [again]

    # Tenants are apart; without --tenant it is "default".
    assert ok(capsys, "memories", "list") == "no live memories for tenant default\n"
    ok(capsys, "memories", "add", "--episode", "kept in the default tenant")
    assert [m["content"] for m in ok_json(capsys, "memories", "list")["memories"]] == [
        "kept in the default tenant"
    ]
    assert ok_json(capsys, "memories", "list", "--tenant", "other") == {
        "log_position": 0,
        "memories": [],
    }


# --- mace policy --------------------------------------------------------------------------------


def test_policy_set_show_and_clear(
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    act(monkeypatch, "ada", "auditor")
    commented = "# owned by the privacy team\n" + BUNDLE
    out = ok(capsys, "policy", "set", write_bundle(tmp_path, commented), *ACME)
    assert out == f"policy bundle {BUNDLE_HASH} in force for tenant/acme by ada\n"

    anonymous(monkeypatch)
    shown = ok(capsys, "policy", "show", *ACME)
    assert shown == f"scope: tenant/acme\nbundle_hash: {BUNDLE_HASH}\n{commented}"
    assert ok_json(capsys, "policy", "show", *ACME) == {
        "tenant": "acme",
        "scope": "tenant/acme",
        "bundle_hash": BUNDLE_HASH,
        "bundle_yaml": commented,  # verbatim: a receipt freezes exactly this text
    }
    assert ok(capsys, "policy", "show") == "no policy bundle in force\n"
    assert ok_json(capsys, "policy", "show") == {
        "tenant": "default",
        "scope": None,
        "bundle_hash": None,
        "bundle_yaml": None,
    }
    assert ok(capsys, "policy", "show", "--global") == "no policy bundle in force\n"

    act(monkeypatch, "ada", "auditor")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(OPEN.encode())))
    open_hash = parse_bundle(OPEN).bundle_hash
    assert ok_json(capsys, "policy", "set", "-", "--global") == {
        "scope": "global",
        "bundle_hash": open_hash,
        "rules": 0,
    }
    assert ok_json(capsys, "policy", "show")["scope"] == "global"  # the fallback
    assert ok_json(capsys, "policy", "show", "--global") == {
        "tenant": None,
        "scope": "global",
        "bundle_hash": open_hash,
        "bundle_yaml": OPEN,
    }
    assert ok_json(capsys, "policy", "show", *ACME)["scope"] == "tenant/acme"

    assert ok(capsys, "policy", "clear", *ACME) == "policy bundle cleared for tenant/acme by ada\n"
    assert ok_json(capsys, "policy", "show", *ACME)["scope"] == "global"
    assert ok_json(capsys, "policy", "clear", "--global") == {"scope": "global", "cleared": True}
    assert ok(capsys, "policy", "show", *ACME) == "no policy bundle in force\n"
    err = refused(capsys, cli_env, "policy", "clear", *ACME)
    assert err == "mace: NOT_FOUND: no policy bundle is set for tenant/acme\n"


# --- mace context, mace handoff, mace receipts show ---------------------------------------------


def test_context_prints_its_receipt_with_redactions_and_filters(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ok(capsys, "context", "alice plan email", *ACME)
    first = re.match(rf"receipt (rct-{ID}) \(context, live\) tenant acme\n", out)
    assert first is not None
    receipt_id = first.group(1)
    anonymous(monkeypatch)
    shown = ok_json(capsys, "receipts", "show", receipt_id, *ACME)
    body = shown["receipt"]
    assert out == (
        f"receipt {receipt_id} (context, live) tenant acme\n"
        "caller: support-bot [operator]\n"
        'query: "alice plan email" (max 10 entries)\n'
        "memory: log position 5 (current)\n"
        f"policy bundle: {BUNDLE_HASH}\n"
        f"context_hash: {body['context_hash']}\n"
        "entries: 3\n"
        f'  1. {acme.invoice} episode "alice disputed a plan invoice" [billing]\n'
        f"  2. {acme.email} fact user/customer/alice/email = [REDACTED] [pii]\n"
        f'  3. {acme.plan} fact user/customer/alice/plan = "gold" []\n'
        "filters applied: 2\n"
        f"  no-medical deny {acme.medical}\n"
        f"  mask-pii redact {acme.email}\n"
        f"signature: HMAC-SHA256 key k1 {shown['signature']}\n"
        f"emitted_at: {body['emitted_at']}\n"
    )
    assert ok(capsys, "receipts", "show", receipt_id, *ACME) == out


def test_context_json_is_the_signed_receipt_for_the_acting_caller(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    emitted = emit(capsys, "alice plan email", "--max-entries", "2")
    assert set(emitted) == {"receipt", "signature", "redacted"}
    body = emitted["receipt"]
    assert set(body) == BODY_KEYS
    assert (body["kind"], body["mode"], body["tenant"], body["parent_receipt_id"]) == (
        "context",
        "live",
        "acme",
        None,
    )
    assert body["caller"] == {"id": "support-bot", "roles": ["operator"]}
    assert body["request"] == {"query": "alice plan email", "max_entries": 2}
    assert [(e["memory_id"], e["content"], e["redacted"]) for e in body["entries"]] == [
        (acme.invoice, "alice disputed a plan invoice", False),
        (acme.email, "[REDACTED]", True),
    ]
    assert body["policy_snapshot"]["bundle_yaml"] == BUNDLE
    assert body["signature"] == {"algorithm": "HMAC-SHA256", "key_id": "k1"}
    assert re.fullmatch(HASH, emitted["signature"])
    anonymous(monkeypatch)
    assert ok_json(capsys, "receipts", "show", body["receipt_id"], *ACME) == emitted

    # The caller is whoever acts: an admin is not subject to the PII rule.
    act(monkeypatch, "root", "admin,operator")
    admin = emit(capsys, "alice plan email")["receipt"]
    assert admin["caller"] == {"id": "root", "roles": ["admin", "operator"]}
    email = next(e for e in admin["entries"] if e["memory_id"] == acme.email)
    assert (email["content"], email["redacted"]) == ("alice@example.com", False)
    assert [f["rule_id"] for f in admin["filters_applied"]] == ["no-medical"]


def test_handoff_records_who_hands_over_to_whom(
    acme: Acme, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("handoff", "alice invoice", "--to", "billing-bot", *ACME)
    out = ok(capsys, *argv, "--from", "support-bot", "--note", "customer disputes an invoice")
    lines = out.splitlines()
    assert re.fullmatch(rf"receipt rct-{ID} \(handoff, live\) tenant acme", lines[0])
    assert lines[2] == "handoff: support-bot -> billing-bot: customer disputes an invoice"
    assert "  2. " + f"{acme.email} fact user/customer/alice/email = [REDACTED] [pii]" in lines

    emitted = ok_json(capsys, *argv, "--max-entries", "1")
    body = emitted["receipt"]
    assert (body["kind"], body["handoff"]) == (
        "handoff",
        {"from_agent": None, "to_agent": "billing-bot", "note": None},
    )
    assert [e["memory_id"] for e in body["entries"]] == [acme.invoice]
    assert "handoff: - -> billing-bot\n" in ok(capsys, *argv)


def test_a_context_with_no_bundle_in_force_says_so(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    act(monkeypatch, "wes", "operator")
    ok(capsys, "memories", "add", "--episode", "alice has a medical note", "--label", "medical")
    out = ok(capsys, "context", "alice")
    assert "policy bundle: none in force\n" in out and "tenant default\n" in out
    assert "filters applied: 0\n" in out
    body = ok_json(capsys, "context", "alice")["receipt"]
    assert body["policy_snapshot"]["bundle_hash"] is None
    assert [e["content"] for e in body["entries"]] == ["alice has a medical note"]


# --- mace receipts list -------------------------------------------------------------------------


def test_receipts_list_in_emission_order_filtered_by_parent(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    a = emit(capsys, "alice")["receipt"]
    b = emit(capsys, "plan")["receipt"]
    act(monkeypatch, "ada", "auditor")
    replayed = ok_json(capsys, "receipts", "replay", a["receipt_id"], *ACME)
    ra = ok_json(capsys, "receipts", "show", replayed["replay_receipt_id"], *ACME)["receipt"]

    anonymous(monkeypatch)
    rows = ok_json(capsys, "receipts", "list", *ACME)["receipts"]
    assert rows == [
        {
            "number": n,
            "receipt_id": r["receipt_id"],
            "parent_receipt_id": r["parent_receipt_id"],
            "kind": "context",
            "mode": r["mode"],
            "emitted_at": r["emitted_at"],
            "context_hash": r["context_hash"],
            "intact": True,
        }
        for n, r in enumerate([a, b, ra])
    ]
    assert ok(capsys, "receipts", "list", *ACME) == (
        f"0 {a['receipt_id']} context live {a['context_hash']} {a['emitted_at']}\n"
        f"1 {b['receipt_id']} context live {b['context_hash']} {b['emitted_at']}\n"
        f"2 {ra['receipt_id']} context as_of_replay of {a['receipt_id']}"
        f" {ra['context_hash']} {ra['emitted_at']}\n"
    )
    by_parent = ok_json(capsys, "receipts", "list", "--parent", a["receipt_id"], *ACME)
    assert [r["receipt_id"] for r in by_parent["receipts"]] == [ra["receipt_id"]]
    assert ok_json(capsys, "receipts", "list", "--parent", b["receipt_id"], *ACME) == {
        "receipts": []
    }
    page = ok_json(capsys, "receipts", "list", "--after", "0", "--limit", "1", *ACME)
    assert [r["receipt_id"] for r in page["receipts"]] == [b["receipt_id"]]
    assert ok(capsys, "receipts", "list", "--tenant", "other") == "no receipts for tenant other\n"
    assert ok_json(capsys, "receipts", "list") == {"receipts": []}


# --- mace receipts verify, and rows edited in the database --------------------------------------


def test_verify_exits_0_only_for_a_valid_signature_and_survives_rotation(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    anonymous(monkeypatch)
    assert ok_json(capsys, "receipts", "verify", receipt_id, *ACME) == {
        "valid": True,
        "key_id": "k1",
        "algorithm": "HMAC-SHA256",
        "reason": "ok",
    }
    out = ok(capsys, "receipts", "verify", receipt_id, *ACME)
    assert out == f"receipt {receipt_id}: valid (ok), key k1, HMAC-SHA256\n"

    # Rotated: k2 signs, k1 still verifies.
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k1", "k2").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k2")
    assert ok_json(capsys, "receipts", "verify", receipt_id, *ACME)["reason"] == "ok"

    # Retired: k1 is gone. It also signed the newest checkpoint, which every read of a stream is
    # held to (`head_check`): nothing can be vouched for here, not even that the store ever used
    # k1, so the command fails closed.
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k2").get_secret_value())
    unknown = f"stream {CHECKPOINT_STREAM} version "
    code, out, err = run(capsys, "receipts", "verify", receipt_id, *ACME, "--json")
    assert (code, out) == (1, "")
    error = json_error(err)
    assert error["code"] == "INTEGRITY_FAILURE"
    assert error["message"].startswith(unknown), error
    assert error["message"].endswith(
        ": signed with key id 'k1', which the keyring lacks and no checkpoint the keyring can read"
        " shows this store ever used"
    ), error


def test_an_edited_row_fails_verify_show_and_replay_with_exit_1(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    receipt_id = emit(capsys, "alice plan email")["receipt"]["receipt_id"]
    ok(capsys, "receipts", "list", *ACME)  # indexed while intact
    edit_receipt(cli_env, receipt_id, lambda f: f["body"]["entries"].pop())
    act(monkeypatch, "ada", "auditor")

    before = stored(cli_env)
    code, out, err = run(capsys, "receipts", "verify", receipt_id, *ACME, "--json")
    assert (code, err) == (1, "")
    assert orjson.loads(out) == {
        "valid": False,
        "key_id": "k1",
        "algorithm": "HMAC-SHA256",
        "reason": "record_mac_mismatch",
    }
    code, out, _ = run(capsys, "receipts", "verify", receipt_id, *ACME)
    assert (code, out) == (
        1,
        f"receipt {receipt_id}: INVALID (record_mac_mismatch), key k1, HMAC-SHA256\n",
    )

    err = refused(capsys, cli_env, "receipts", "show", receipt_id, *ACME, code=1)
    assert err == (
        f"mace: INTEGRITY_FAILURE: stream {Receipt.id_for(receipt_id)} version 1:"
        f" receipt {receipt_id}: MAC mismatch\n"
    )
    err = refused(capsys, cli_env, "receipts", "replay", receipt_id, *ACME, code=1)
    assert err == (
        "mace: unreplayable.invalid_snapshot: the policy snapshot is on a receipt whose"
        " signature does not verify (record_mac_mismatch)\n"
    )
    # Indexed before the edit, it is listed, marked: each listed receipt is read and verified.
    row = ok_json(capsys, "receipts", "list", *ACME)["receipts"][0]
    assert (row["receipt_id"], row["intact"]) == (receipt_id, False)
    assert ok(capsys, "receipts", "list", *ACME).endswith(" ALTERED\n")
    assert stored(cli_env) == before


def test_a_row_edited_before_it_was_indexed_fails_the_listing(
    acme: Acme, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    # The receipt index is a read model of verified events: it cannot index an altered record.
    receipt_id = emit(capsys, "alice plan email")["receipt"]["receipt_id"]
    edit_receipt(cli_env, receipt_id, lambda f: f["body"]["entries"].pop())
    err = refused(capsys, cli_env, "receipts", "list", *ACME, code=1)
    assert (
        err
        == f"mace: INTEGRITY_FAILURE: stream {Receipt.id_for(receipt_id)} version 1: MAC mismatch\n"
    )


@pytest.mark.parametrize(
    "edit",
    [
        lambda f: f.update(signature=None),
        lambda f: f["body"]["signature"].update(algorithm="none"),
        lambda f: f["body"]["signature"].update(key_id="k9"),
    ],
)
def test_a_row_edited_to_look_unverifiable_is_invalid_with_exit_1(
    acme: Acme,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    edit: Any,
) -> None:
    # The row's own MAC is checked first: an edited key id, algorithm or signature is not
    # believed (it would answer "cannot be checked", valid null).
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    edit_receipt(cli_env, receipt_id, edit)
    code, out, err = run(capsys, "receipts", "verify", receipt_id, *ACME, "--json")
    assert (code, err) == (1, "")
    verdict = orjson.loads(out)
    assert (verdict["valid"], verdict["reason"]) == (False, "record_mac_mismatch")


def test_a_receipt_under_a_retired_key_is_not_called_altered(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k2").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k2")
    code, _, err = run(capsys, "receipts", "show", receipt_id, *ACME)
    assert code == 1
    assert err.startswith("mace: INTEGRITY_FAILURE: ")
    assert "altered" not in err and "key id 'k1', which the keyring lacks" in err


def test_a_receipt_deleted_from_the_store_fails_the_listing(
    acme: Acme, cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    ok(capsys, "receipts", "list", *ACME)  # the receipt index names it
    RawTable(cli_env).delete(Receipt.id_for(receipt_id), 1)
    # The newest checkpoint counts the receipt's stream: its absence is a truncation, not a miss.
    gone = (
        f"mace: INTEGRITY_FAILURE: stream {Receipt.id_for(receipt_id)} version 1: truncated below"
        " checkpoint "
    )
    for argv in (["list"], ["show", receipt_id]):
        err = refused(capsys, cli_env, "receipts", *argv, *ACME, code=1)
        assert err.startswith(gone), err
        assert err.endswith("; the store holds none of it\n"), err


# --- mace receipts replay -----------------------------------------------------------------------


def test_replay_shows_data_drift_and_as_emitted_reproduces_the_context_hash(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = emit(capsys, "alice plan")["receipt"]
    receipt_id, original_hash = original["receipt_id"], original["context_hash"]
    act(monkeypatch, "wes", "operator")
    ok(capsys, "memories", "forget", acme.plan, "--reason", "customer left", *ACME)
    added = ok_json(capsys, "memories", "add", "--episode", "alice plan cancelled", *ACME)
    act(monkeypatch, "ada", "auditor")
    ok(capsys, "policy", "clear", *ACME)  # the live bundle does not matter to a replay
    position = ok_json(capsys, "memories", "list", *ACME)["log_position"]

    out = ok(capsys, "receipts", "replay", receipt_id, *ACME)
    first = re.match(rf"replay of {receipt_id}: (rct-{ID})\n", out)
    assert first is not None
    current = ok_json(capsys, "receipts", "show", first.group(1), *ACME)["receipt"]
    assert out == (
        f"replay of {receipt_id}: {current['receipt_id']}\n"
        f"context: changed ({original_hash} -> {current['context_hash']})\n"
        "entries: 1 added, 1 removed, 2 common\n"
        f'  + {added["memory_id"]} episode "alice plan cancelled" []\n'
        f'  - {acme.plan} fact user/customer/alice/plan = "gold" []\n'
        "filters: 0 added, 0 removed\n"
    )
    assert current["memory"] == {"log_position": position, "view": "current"}

    answer = ok_json(capsys, "receipts", "replay", receipt_id, "--memory", "as-emitted", *ACME)
    assert answer == {
        "original_receipt_id": receipt_id,
        "replay_receipt_id": answer["replay_receipt_id"],
        "diff": {
            "context_hash": {"original": original_hash, "replay": original_hash, "changed": False},
            "selected_entries": {"added": [], "removed": [], "common": len(original["entries"])},
            "filters_applied": {"added": [], "removed": []},
        },
        "redacted": False,
    }
    replay = ok_json(capsys, "receipts", "show", answer["replay_receipt_id"], *ACME)["receipt"]
    assert replay["context_hash"] == original_hash
    assert (replay["entries"], replay["filters_applied"]) == (
        original["entries"],
        original["filters_applied"],
    )
    assert replay["memory"] == {"log_position": 5, "view": "as_emitted"}
    assert (replay["mode"], replay["parent_receipt_id"]) == ("as_of_replay", receipt_id)
    assert replay["replayed_by"] == {"id": "ada", "roles": ["auditor"]}
    assert replay["caller"] == original["caller"]
    assert replay["policy_snapshot"] == original["policy_snapshot"]

    out = ok(capsys, "receipts", "replay", receipt_id, "--memory", "as-emitted", *ACME)
    assert f"context: unchanged ({original_hash} -> {original_hash})\n" in out
    assert "entries: 0 added, 0 removed, 3 common\n" in out
    # Replays never write to the memories or the original receipt.
    assert ok_json(capsys, "memories", "list", *ACME)["log_position"] == position
    assert ok_json(capsys, "receipts", "show", receipt_id, *ACME)["receipt"] == original


def test_replay_shows_filters_that_a_memory_change_adds(
    acme: Acme, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = emit(capsys, "alice invoice")["receipt"]
    act(monkeypatch, "wes", "operator")
    medical = ok_json(
        capsys,
        "memories",
        "add",
        "--episode",
        "alice invoice for a scan",
        "--label",
        "medical",
        *ACME,
    )["memory_id"]
    act(monkeypatch, "ada", "auditor")
    out = ok(capsys, "receipts", "replay", original["receipt_id"], *ACME)
    assert out.endswith(f"filters: 1 added, 0 removed\n  + no-medical deny {medical}\n")
    diff = ok_json(capsys, "receipts", "replay", original["receipt_id"], *ACME)["diff"]
    assert diff["filters_applied"] == {
        "added": [{"rule_id": "no-medical", "memory_id": medical, "action": "deny"}],
        "removed": [],
    }
    assert diff["context_hash"]["changed"] is False  # denied: what the agent sees is the same


def _no_snapshot(fields: dict[str, Any]) -> None:
    fields["body"]["policy_snapshot"] = None


def _broken_yaml(fields: dict[str, Any]) -> None:
    fields["body"]["policy_snapshot"]["bundle_yaml"] = "version: [1"


@pytest.mark.parametrize(
    ("tamper", "line"),
    [
        (
            _no_snapshot,
            "unreplayable.missing_policy_snapshot: the receipt captured no policy snapshot:"
            " which bundle applied cannot be known",
        ),
        (
            "replay",
            "unreplayable.nested_replay: the receipt is itself a replay of {original}:"
            " replay that one",
        ),
        (
            _broken_yaml,
            "unreplayable.invalid_snapshot: the policy snapshot does not load: not YAML",
        ),
    ],
    ids=["missing_policy_snapshot", "nested_replay", "invalid_snapshot"],
)
def test_an_unreplayable_receipt_exits_1_with_its_code_and_writes_nothing(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tamper: Any,
    line: str,
) -> None:
    original = emit(capsys, "alice plan")["receipt"]["receipt_id"]
    act(monkeypatch, "ada", "auditor")
    if tamper == "replay":
        target = ok_json(capsys, "receipts", "replay", original, *ACME)["replay_receipt_id"]
    else:
        target = original
        edit_receipt(cli_env, original, tamper)
    for argv in ([], ["--memory", "as-emitted"], ["--json"]):
        err = refused(capsys, cli_env, "receipts", "replay", target, *ACME, *argv, code=1)
        if "--json" in argv:
            err = json_error_as_line(err)
        assert err.startswith("mace: " + line.format(original=original))


def test_replay_needs_the_roles_http_needs_and_a_refusal_records_nothing(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    receipt_id = emit(capsys, "alice plan")["receipt"]["receipt_id"]
    act(monkeypatch, "olga", "operator")
    for argv in ([], ["--json"], ["--memory", "as-emitted"]):
        err = refused(capsys, cli_env, "receipts", "replay", receipt_id, *ACME, *argv, code=1)
        if "--json" in argv:
            err = json_error_as_line(err)
        assert err == (
            "mace: ACCESS_DENIED: this needs one of the roles ['admin', 'auditor', 'council'];"
            " olga holds ['operator']\n"
        )
    assert ok_json(capsys, "receipts", "list", "--parent", receipt_id, *ACME)["receipts"] == []
    for roles in ("operator,admin", "auditor", "council"):
        act(monkeypatch, "olga", roles)
        assert ok_json(capsys, "receipts", "replay", receipt_id, *ACME)["replay_receipt_id"]


def test_replay_of_an_unknown_or_foreign_receipt_is_bad_input(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    act(monkeypatch, "ada", "auditor")
    unknown = "rct-" + "0" * 32
    for rid, tenant in ((receipt_id, "other"), (receipt_id, "default"), (unknown, "acme")):
        for verb in ("replay", "show", "verify"):
            err = refused(capsys, cli_env, "receipts", verb, rid, "--tenant", tenant)
            assert err == f"mace: NOT_FOUND: no receipt {rid}\n"


def test_a_replay_whose_receipt_cannot_be_written_still_prints_the_diff(
    acme: Acme,
    cli_env: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    original = emit(capsys, "alice plan email")["receipt"]
    receipt_id = original["receipt_id"]
    refuse_new_receipts(cli_env)
    act(monkeypatch, "ada", "auditor")
    before = stored(cli_env)

    code, out, _ = run(capsys, "receipts", "replay", receipt_id, *ACME, "--json")
    assert code == 0
    answer = orjson.loads(out)
    assert answer["replay_receipt_id"] is None
    assert answer["diff"]["context_hash"] == {
        "original": original["context_hash"],
        "replay": None,
        "changed": True,
    }
    removed = answer["diff"]["selected_entries"]["removed"]
    assert [e["memory_id"] for e in removed] == sorted(e["memory_id"] for e in original["entries"])
    assert f"replay of receipt {receipt_id}: the replay receipt was not written (" in caplog.text
    assert stored(cli_env) == before

    # The real command: the diff on standard output, one warning line on standard error.
    mace = shutil.which("mace", path=str(Path(sys.executable).parent))
    assert mace is not None
    result = subprocess.run(
        [mace, "receipts", "replay", receipt_id, *ACME],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(
        f"replay of {receipt_id}: (replay receipt not written)\n"
        f"context: changed ({original['context_hash']} -> none)\n"
        "entries: 0 added, 3 removed, 0 common\n"
    )
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"mace: warning: replay of receipt {receipt_id}: the replay receipt was not written ("
    )
    assert stored(cli_env) == before


@pytest.mark.parametrize(
    "argv", [["context"], ["handoff", "--to", "billing-bot"]], ids=["context", "handoff"]
)
def test_a_context_whose_receipt_cannot_be_written_is_printed_with_a_warning(
    acme: Acme,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    argv: list[str],
) -> None:
    kind, *options = argv
    ask = [kind, "alice plan email", *options, *ACME]
    written = ok_json(capsys, *ask)["receipt"]
    refuse_new_receipts(cli_env)
    before = stored(cli_env)

    code, out, _ = run(capsys, *ask, "--json")
    assert code == 0
    answer = orjson.loads(out)
    assert (answer["receipt"]["receipt_id"], answer["signature"]) == (None, None)
    assert answer["receipt"]["entries"] == written["entries"]
    assert answer["warning"].startswith("the receipt was not written (the store refused it)")
    assert f"{kind} for tenant acme: the receipt was not written (" in caplog.text
    assert stored(cli_env) == before

    # The real command: the context on standard output, one warning line on standard error.
    mace = shutil.which("mace", path=str(Path(sys.executable).parent))
    assert mace is not None
    result = subprocess.run(
        [mace, *ask], capture_output=True, text=True, check=False, env=dict(os.environ)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"receipt (not written) ({kind}, live) tenant acme\n")
    assert "signature: none (the receipt was not written)\n" in result.stdout
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"mace: warning: {kind} for tenant acme: the receipt was not written ("
    )
    assert stored(cli_env) == before


# --- bad input: exit 2, one line, nothing written -----------------------------------------------

TENANT_RULE = (
    "expected 1-64 characters of lowercase letters, digits and . _ -, starting with a letter"
    " or digit"
)
ZERO = "rct-" + "0" * 32


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["memories", "add", "--fact", "user/customer/a/b", "1", "--episode", "x"],
            "argument --episode: not allowed with argument --fact (see 'mace memories add --help')",
        ),
        (
            ["memories", "add", *ACME],
            "one of the arguments --fact --episode is required (see 'mace memories add --help')",
        ),
        (
            ["memories", "add", "--fact", "user/Customer/a/b", "1"],
            "invalid SEM key 'user/Customer/a/b': rule S2: only a-z, 0-9, _ and / are allowed,"
            " found 'C'",
        ),
        (
            ["memories", "add", "--fact", "user/customer/a/b", "gold"],
            "value 'gold' is not JSON: quote strings, e.g. '\"gold\"'",
        ),
        (
            ["memories", "add", "--fact", "user/customer/a/b", "null"],
            "a SEM value must not be null: a missing fact is a miss (S9), not a stored null",
        ),
        (["memories", "add", "--episode", "  "], "episode: expected non-empty text"),
        (
            ["memories", "add", "--episode", "x", "--label", "PII"],
            "label 'PII': expected 1-64 of lowercase letters, digits and . _ : -, starting with a"
            " letter or digit",
        ),
        (["memories", "add", "--episode", "x", "--origin", "{nope"], "--origin is not JSON: "),
        (
            ["memories", "add", "--episode", "x", "--origin", '{"job": [1, NaN]}'],
            "--origin: non-finite float at $.job[1]",
        ),
        (
            ["memories", "add", "--fact", "user/customer/a/b", "123456789012345678901234567890"],
            "value: integer outside signed 64-bit range at $",
        ),
        (
            ["memories", "add", "--fact", "user/customer/a/b", '{"n": 1e400}'],
            "value: non-finite float at $.n",
        ),
        (
            ["memories", "add", "--fact", "user/person/bob/password", '"hunter2"', *ACME],
            "the privacy policy denies storing attribute 'password'",
        ),
        (
            ["memories", "list", "--tenant", "ACME"],
            f"argument --tenant: invalid tenant 'ACME': {TENANT_RULE}"
            " (see 'mace memories list --help')",
        ),
        (
            ["memories", "forget", "mem-" + "0" * 32, "--reason", "gone", *ACME],
            "no memory mem-" + "0" * 32,
        ),
        (["memories", "forget", "{plan}", "--reason", "gone"], "no memory {plan}"),
        (
            ["memories", "forget", "{plan}", "--reason", " ", *ACME],
            "reason: expected 1-500 printable characters on one line",
        ),
        (
            ["memories", "forget", "{plan}", *ACME],
            "the following arguments are required: --reason (see 'mace memories forget --help')",
        ),
        (
            ["policy", "set", "{refused}", *ACME],
            "rule 'a': unknown predicate 'colour': expected one of ['caller', 'caller_role',"
            " 'caller_role_not', 'memory_kind', 'memory_label', 'memory_labels_any']",
        ),
        (
            ["policy", "set", "{bundle}"],
            "one of the arguments --tenant --global is required (see 'mace policy set --help')",
        ),
        (
            ["policy", "set", "{bundle}", *ACME, "--global"],
            "argument --global: not allowed with argument --tenant (see 'mace policy set --help')",
        ),
        (["policy", "set", "{missing}", "--global"], "cannot read {missing}: No such file"),
        (
            ["policy", "set", "{bomb}", *ACME],
            "line 3: YAML anchors and aliases are not allowed in a policy bundle",
        ),
        (
            ["policy", "set", "{too_big}", "--global"],
            f"a policy bundle is at most {MAX_BUNDLE_BYTES} bytes of YAML, this one is"
            f" {MAX_BUNDLE_BYTES + 23}",
        ),
        (["policy", "set", "{binary}", "--global"], "{binary} is not UTF-8 text"),
        (["policy", "clear", "--global"], "no policy bundle is set for global"),
        (["policy", "clear", "--tenant", "other"], "no policy bundle is set for tenant/other"),
        (["context", "  ", *ACME], "query: expected 1-2000 characters with at least one word"),
        (
            ["context", "alice", "--max-entries", "0"],
            "max_entries: expected an integer from 1 to 100",
        ),
        (
            ["context", "alice", "--max-entries", "ten"],
            "argument --max-entries: invalid int value: 'ten' (see 'mace context --help')",
        ),
        (
            ["handoff", "alice", "--to", "billing bot", *ACME],
            "to_agent: 'billing bot' is not an agent id (1-128 of letters, digits and . _ @ : -)",
        ),
        (
            ["handoff", "alice", "--to", "b", "--note", "x" * 501],
            "note: expected at most 500 printable characters on one line",
        ),
        (
            ["handoff", "alice", *ACME],
            "the following arguments are required: --to (see 'mace handoff --help')",
        ),
        (["receipts", "list", "--limit", "0", *ACME], "limit: expected 1 to 500, got 0"),
        (
            ["receipts", "list", "--after", "-2"],
            "--after: expected a receipt number (0 or more), got -2",
        ),
        (
            ["receipts", "list", "--parent", "nope"],
            "argument --parent: 'nope' is not a receipt id (rct- and 32 hex digits)"
            " (see 'mace receipts list --help')",
        ),
        (["receipts", "show", ZERO, *ACME], f"no receipt {ZERO}"),
        (["receipts", "show", "nope", *ACME], "no receipt nope"),
        (["receipts", "verify", ZERO, *ACME], f"no receipt {ZERO}"),
        (["receipts", "replay", ZERO, *ACME], f"no receipt {ZERO}"),
        (
            ["receipts", "replay", ZERO, "--memory", "as_emitted"],
            "argument --memory: invalid choice: 'as_emitted' (choose from 'as-emitted',"
            " 'current') (see 'mace receipts replay --help')",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    acme: Acme,
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"version: 1\nrules: []\n# \xff\n")
    names = {
        "{plan}": acme.plan,
        "{bundle}": write_bundle(tmp_path),
        "{refused}": write_bundle(
            tmp_path, "version: 1\nrules:\n- {id: a, when: {colour: red}, action: deny}\n", "r.yaml"
        ),
        "{missing}": str(tmp_path / "absent.yaml"),
        "{bomb}": write_bundle(tmp_path, ALIAS_BOMB, "bomb.yaml"),
        "{too_big}": write_bundle(
            tmp_path, "version: 1\nrules: []\n#" + "x" * MAX_BUNDLE_BYTES + "\n", "big.yaml"
        ),
        "{binary}": str(binary),
    }
    for name, value in names.items():
        message = message.replace(name, value)
    if argv[:2] == ["receipts", "replay"]:
        act(monkeypatch, "ada", "auditor")  # one who may replay, so that the input is judged
    err = refused(capsys, cli_env, *[names.get(a, a) for a in argv])
    # What the input names but the ledger does not hold is not there; the rest is bad input.
    code = (
        "NOT_FOUND" if message.startswith(("no receipt ", "no policy bundle ")) else "INVALID_INPUT"
    )
    assert err.startswith(f"mace: {code}: {message}"), err
    if not message.endswith((": ", "No such file")):
        assert err == f"mace: {code}: {message}\n"


WRITES = [
    ["memories", "add", "--episode", "x"],
    ["memories", "forget", "{plan}", "--reason", "gone", *ACME],
    ["policy", "set", "{bundle}", "--global"],
    ["policy", "clear", *ACME],
    ["context", "alice", *ACME],
    ["handoff", "alice", "--to", "billing-bot", *ACME],
    ["receipts", "replay", "{receipt}", *ACME],
]


@pytest.mark.parametrize("argv", WRITES, ids=[" ".join(a[:2]) for a in WRITES])
def test_writes_and_replays_need_an_identity(
    acme: Acme,
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    receipt_id = emit(capsys, "alice")["receipt"]["receipt_id"]
    names = {"{plan}": acme.plan, "{bundle}": write_bundle(tmp_path), "{receipt}": receipt_id}
    anonymous(monkeypatch)
    err = refused(capsys, cli_env, *[names.get(a, a) for a in argv])
    assert err == (
        "mace: INVALID_INPUT: set MACE_ACTOR (who you are) and MACE_ROLES (comma-separated:"
        " operator, admin, auditor, council, store_operator) to act\n"
    )
    act(monkeypatch, "bad actor!", "operator")
    err = refused(capsys, cli_env, *[names.get(a, a) for a in argv])
    assert err.startswith(
        "mace: INVALID_INPUT: MACE_ACTOR/MACE_ROLES: invalid actor id 'bad actor!'"
    )


def test_bad_input_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/never.db")
    act(monkeypatch, "wes", "operator")
    refusals = [
        ["memories", "add", "--fact", "user/Customer/a/b", "1"],
        ["memories", "add", "--episode", "x", "--label", "PII"],
        ["policy", "set", write_bundle(tmp_path, "version: 2\nrules: []\n"), "--global"],
    ]
    for argv in refusals:
        assert run(capsys, *argv)[0] == 2
    for argv in (["memories", "list"], ["context", "alice"], ["receipts", "list"]):
        code, _, err = run(capsys, *argv)
        assert (code, err) == (
            2,
            f"mace: NOT_FOUND: no ledger at sqlite:///{tmp_path}/never.db (set MACE_STORE)\n",
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle.yaml"]


# --- the whole story ----------------------------------------------------------------------------


def test_workflow_policy_memories_context_forget_replay_verify_list(
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The privacy team puts a bundle in force for acme.
    act(monkeypatch, "ada", "auditor")
    ok(capsys, "policy", "set", write_bundle(tmp_path), *ACME)

    # An operator writes memories.
    act(monkeypatch, "wes", "operator")

    def remember(*argv: str) -> str:
        memory_id = ok_json(capsys, "memories", "add", *argv, *ACME)["memory_id"]
        assert isinstance(memory_id, str)
        return memory_id

    plan = remember("--fact", "user/customer/alice/plan", '"gold"')
    email = remember("--fact", "user/customer/alice/email", '"alice@example.com"', "--label", "pii")
    medical = remember("--episode", "alice asked about her plan renewal", "--label", "medical")

    # The support agent asks for context: the medical episode is denied, the email redacted.
    act(monkeypatch, "support-bot", "operator")
    original = emit(capsys, "alice plan email")["receipt"]
    receipt_id = original["receipt_id"]
    assert [(e["memory_id"], e["redacted"]) for e in original["entries"]] == [
        (email, True),
        (plan, False),
    ]
    assert [(f["rule_id"], f["memory_id"]) for f in original["filters_applied"]] == [
        ("no-medical", medical),
        ("mask-pii", email),
    ]

    # The customer leaves: the plan is forgotten.
    act(monkeypatch, "wes", "operator")
    ok(capsys, "memories", "forget", plan, "--reason", "customer left", *ACME)

    # An auditor replays: today's memories lack the plan; as emitted, the context is reproduced.
    act(monkeypatch, "ada", "auditor")
    current = ok_json(capsys, "receipts", "replay", receipt_id, *ACME)
    assert current["diff"]["context_hash"]["changed"] is True
    assert [e["memory_id"] for e in current["diff"]["selected_entries"]["removed"]] == [plan]
    assert current["diff"]["selected_entries"]["common"] == 1
    as_emitted = ok_json(capsys, "receipts", "replay", receipt_id, "--memory", "as-emitted", *ACME)
    assert as_emitted["diff"]["context_hash"] == {
        "original": original["context_hash"],
        "replay": original["context_hash"],
        "changed": False,
    }

    # Every receipt verifies; the original lists its two replays, in order.
    anonymous(monkeypatch)
    replays = [current["replay_receipt_id"], as_emitted["replay_receipt_id"]]
    for rid in (receipt_id, *replays):
        assert ok(capsys, "receipts", "verify", rid, *ACME).startswith(f"receipt {rid}: valid (ok)")
    rows = ok_json(capsys, "receipts", "list", "--parent", receipt_id, *ACME)["receipts"]
    assert [(r["number"], r["receipt_id"], r["mode"]) for r in rows] == [
        (1, replays[0], "as_of_replay"),
        (2, replays[1], "as_of_replay"),
    ]

    # A replay is not replayed again.
    act(monkeypatch, "ada", "auditor")
    err = refused(capsys, cli_env, "receipts", "replay", replays[1], *ACME, code=1)
    assert err == (
        f"mace: unreplayable.nested_replay: the receipt is itself a replay of {receipt_id}:"
        " replay that one\n"
    )
