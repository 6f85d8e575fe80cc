"""``GET /v1/checkpoints/newest`` and ``GET /v1/checkpoints/public-key``, on both stores: the
newest checkpoint in the export format, checkable with the public key alone; admin and auditor
only; 404 before the first; a checkpoint edited in the store is 500 ``INTEGRITY_FAILURE``."""

from __future__ import annotations

import base64

import pytest
from support.api_support import SINGLE_ROLES, Api, assert_error, auth
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, RawTable, store_of

from domain.canonical import canonical_json
from domain.checkpoint import CHECKPOINT_STREAM
from infrastructure.storage.checkpoints.chain import Checkpoints
from infrastructure.storage.keys.checkpoint_key import PublicCheckpointKey, read_checkpoint_key
from infrastructure.storage.settings import Settings

NEWEST = "/v1/checkpoints/newest"
PUBLIC_KEY = "/v1/checkpoints/public-key"
READERS = ("admin", "auditor")


def checkpoints(api: Api) -> Checkpoints:
    written = store_of(api.ledger).checkpoints
    assert written is not None
    return written


def test_before_the_first_checkpoint_newest_is_not_found(api: Api) -> None:
    for who in READERS:
        assert_error(api.get(NEWEST, who), 404, "NOT_FOUND", "no checkpoint yet")


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


@pytest.mark.parametrize("path", [NEWEST, PUBLIC_KEY])
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
