"""The checkpoint routes, on both stores: the newest checkpoint and any by number in the export
format, checkable with the public key alone; a consistency proof between two; a verification of
the whole ledger against a witness sent in the body (a store rolled back below it, or a witness
not signed by the ledger's key, is ``ok: false`` with ``INTEGRITY_FAILURE``); admin and auditor
only; 404 before the first; a checkpoint edited in the store is 500 ``INTEGRITY_FAILURE``."""

from __future__ import annotations

import base64

import pytest
from support.api_support import SINGLE_ROLES, Api, assert_error, auth
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, RawTable, store_of

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM, SignedCheckpoint
from domain.checkpoint_note import parse_note, parse_vkey
from domain.merkle import verify_consistency
from infrastructure.application.checkpoints import checked_note
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.keys.checkpoint_key import PublicCheckpointKey, read_checkpoint_key
from infrastructure.storage.settings import Settings

NEWEST = "/v1/checkpoints/newest"
NEWEST_NOTE = "/v1/checkpoints/newest/note"
VKEY = "/v1/checkpoints/vkey"
PUBLIC_KEY = "/v1/checkpoints/public-key"
CONSISTENCY = "/v1/checkpoints/consistency"
VERIFY = "/v1/checkpoints/verify"
READERS = ("admin", "auditor")


def checkpoints(api: Api) -> Checkpoints:
    written = store_of(api.ledger).checkpoints
    assert written is not None
    return written


def test_before_the_first_checkpoint_newest_is_not_found(api: Api) -> None:
    for who in READERS:
        assert_error(api.get(NEWEST, who), 404, "NOT_FOUND", "no checkpoint yet")
        assert_error(api.get(NEWEST_NOTE, who), 404, "NOT_FOUND", "no checkpoint yet")
        assert_error(api.get(VKEY, who), 422, "INVALID_INPUT")


def test_the_newest_note_is_the_ledgers_note_and_checks_with_the_vkey_alone(api: Api) -> None:
    api.new_job()
    written = checkpoints(api).write().newest
    response = api.get(NEWEST_NOTE, "auditor")
    assert response.status_code == 200, response.content
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    answer = api.get(VKEY, "auditor").json()
    vkey = parse_vkey(answer["vkey"])
    assert vkey.name == answer["origin"]
    body = checked_note(parse_note(response.content), vkey, "the note")
    assert (body.origin, body.tree_size, body.root.hex()) == (
        answer["origin"],
        written.checkpoint.tree_size,
        written.checkpoint.root,
    )
    # The bytes `mace checkpoint export --note` writes: one use case behind both.
    note = api.ledger.checkpoints.note(written, answer["origin"])
    assert note.encoded() == response.content


def test_newest_is_the_export_format_and_checks_with_the_public_key_alone(api: Api) -> None:
    api.new_job()
    written = checkpoints(api).write().newest
    for who in READERS:
        response = api.get(NEWEST, who)
        assert response.status_code == 200, response.content
        assert response.content == canonical_json(written.exported())
    exported = api.get(NEWEST, "auditor").json()
    key = api.get(PUBLIC_KEY, "auditor").json()
    assert key["key_id"] == exported["key_id"]
    public = PublicCheckpointKey.from_pem(key["public_key"])
    signature = base64.b64decode(exported["signature"])
    assert public.verify(canonical_json(exported["checkpoint"]), signature)
    assert exported["checkpoint"]["tree_size"] == written.checkpoint.tree_size > 0


def test_the_public_key_is_json_or_the_pem_alone(api: Api) -> None:
    expected = read_checkpoint_key(TEST_CHECKPOINT_KEY)
    assert api.get(PUBLIC_KEY, "admin").json() == {
        "key_id": expected.key_id,
        "public_key": expected.public_pem(),
    }
    headers = auth("auditor") | {"Accept": "application/x-pem-file"}
    response = api.client.get(PUBLIC_KEY, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-pem-file")
    assert response.text == expected.public_pem()


@pytest.mark.parametrize(
    "path",
    [NEWEST, PUBLIC_KEY, "/v1/checkpoints/1", f"{CONSISTENCY}?old=1&new=1", NEWEST_NOTE, VKEY],
)
def test_only_admins_and_auditors_read_the_stores_checkpoints(api: Api, path: str) -> None:
    checkpoints(api).write()
    for who in SINGLE_ROLES:
        response = api.get(path, who)
        if who in READERS:
            assert response.status_code == 200, (who, response.content)
        else:
            assert_error(response, 403, "ACCESS_DENIED")
    assert_error(api.get(path, None), 401, "UNAUTHENTICATED", "a bearer token is required")


def test_a_checkpoint_edited_in_the_store_is_an_integrity_failure(
    api: Api, settings: Settings
) -> None:
    api.new_job()
    checkpoints(api).write()
    table = RawTable(settings)
    state = table.state(CHECKPOINT_STREAM, 1)
    table.set_column(CHECKPOINT_STREAM, 1, "state", state.replace(b'"number":1', b'"number":2'))
    message = assert_error(api.get(NEWEST, "auditor"), 500, "INTEGRITY_FAILURE")
    assert message.startswith(f"stream {CHECKPOINT_STREAM} version 1: ")


def test_the_openapi_document_describes_both(api: Api) -> None:
    with api.unchecked() as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert set(paths[NEWEST]["get"]["responses"]) >= {"200", "401", "403", "404"}
    answers = paths[PUBLIC_KEY]["get"]["responses"]["200"]["content"]
    assert set(answers) == {"application/json", "application/x-pem-file"}


def summary(signed: SignedCheckpoint) -> dict[str, object]:
    body = signed.checkpoint
    return {"number": body.number, "tree_size": body.tree_size, "root": body.root}


def two_checkpoints(api: Api) -> tuple[SignedCheckpoint, SignedCheckpoint]:
    api.new_job()
    first = checkpoints(api).write().newest
    api.new_job("3 + 4")
    second = checkpoints(api).write().newest
    assert (first.checkpoint.number, second.checkpoint.number) == (1, 2)
    return first, second


def test_every_checkpoint_is_read_by_its_number(api: Api) -> None:
    first, second = two_checkpoints(api)
    for signed in (first, second):
        response = api.get(f"/v1/checkpoints/{signed.checkpoint.number}", "auditor")
        assert response.status_code == 200, response.content
        assert response.content == canonical_json(signed.exported())
    assert_error(api.get("/v1/checkpoints/3", "auditor"), 404, "NOT_FOUND", "no checkpoint 3")
    zero = api.get("/v1/checkpoints/0", "auditor")
    assert_error(zero, 422, "INVALID_INPUT", field="path.number")


def test_a_consistency_proof_holds_from_an_older_checkpoint_to_a_newer(api: Api) -> None:
    first, second = two_checkpoints(api)
    response = api.get(f"{CONSISTENCY}?old=1&new=2", "auditor")
    assert response.status_code == 200, response.content
    body = response.json()
    proof = [bytes.fromhex(node) for node in body["proof"]]
    assert body["ok"] is True and proof
    assert body["old"] == {
        "number": 1,
        "tree_size": first.checkpoint.tree_size,
        "root": first.checkpoint.root,
    }
    assert body["new"]["root"] == second.checkpoint.root
    # The proof is the RFC 9162 one: it checks against both signed roots with nothing else.
    assert verify_consistency(
        first.checkpoint.tree_size,
        second.checkpoint.tree_size,
        bytes.fromhex(first.checkpoint.root),
        bytes.fromhex(second.checkpoint.root),
        proof,
    )
    refused = assert_error(api.get(f"{CONSISTENCY}?old=2&new=1", "admin"), 422, "INVALID_INPUT")
    assert "name the older one first" in refused
    assert_error(
        api.get(f"{CONSISTENCY}?old=1&new=7", "admin"), 404, "NOT_FOUND", "no checkpoint 7"
    )


def test_verify_checks_the_whole_ledger_and_that_it_extends_the_witness(api: Api) -> None:
    first, second = two_checkpoints(api)
    plain = api.post(VERIFY, {}, "auditor")
    assert plain.status_code == 200, plain.content
    assert plain.json()["ok"] is True and plain.json()["checkpoints"] == 2
    witnessed = api.post(VERIFY, {"witness": first.exported()}, "admin").json()
    assert witnessed["ok"] is True and witnessed["error_code"] is None
    assert witnessed["extends"] == {
        "number": 1,
        "tree_size": first.checkpoint.tree_size,
        "root": first.checkpoint.root,
    }
    assert witnessed["checkpointed"] == second.checkpoint.tree_size


def test_verify_says_a_store_rolled_back_below_the_witness_is_not_ok(
    api: Api, settings: Settings
) -> None:
    _, second = two_checkpoints(api)
    RawTable(settings).forget_checkpoints()  # as a copy restored from before any checkpoint
    verdict = api.post(VERIFY, {"witness": second.exported()}, "auditor").json()
    assert verdict["ok"] is False and verdict["error_code"] == "INTEGRITY_FAILURE"
    assert "does not extend checkpoint 2 of the witness in the request body" in verdict["message"]
    assert "rolled back" in verdict["message"]


def test_verify_refuses_a_witness_the_ledger_did_not_sign(api: Api) -> None:
    first, _ = two_checkpoints(api)
    forged = first.exported() | {"signature": base64.b64encode(bytes(64)).decode()}
    verdict = api.post(VERIFY, {"witness": forged}, "auditor").json()
    assert verdict["ok"] is False and verdict["error_code"] == "INTEGRITY_FAILURE"
    assert (
        "the witness in the request body: checkpoint 1: the Ed25519 signature" in verdict["message"]
    )
    shapeless = api.post(VERIFY, {"witness": {"algorithm": "ed25519"}}, "auditor")
    assert_error(shapeless, 422, "INVALID_INPUT", field="body.witness.key_id")


def test_only_admins_and_auditors_verify(api: Api) -> None:
    for who in SINGLE_ROLES:
        response = api.post(VERIFY, {}, who)
        if who in READERS:
            assert response.status_code == 200, (who, response.content)
        else:
            assert_error(response, 403, "ACCESS_DENIED")
