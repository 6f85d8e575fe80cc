"""A process proves its signing keys against the store before it writes anything.

The attack: a process configured with another secret under a key id the store was signed with
(`{"k1": "<wrong>"}`) would sign events that verify for it alone, and the store would fail
verification for good. It is refused at start and before every write, with one line naming the
key id, and nothing is written; on stores of any age, through the CLI, the Python API and HTTP.
"""

from __future__ import annotations

import base64
from pathlib import Path
from uuid import UUID

import orjson
import pytest
from pydantic import SecretStr
from support.api_support import Api, assert_error, checked_client
from support.ledger_fixtures import (
    TEST_CHECKPOINT_KEY,
    TEST_SECRETS,
    RawTable,
    run,
    settings_for,
    store_of,
)

from domain.checkpoint import CHECKPOINT_STREAM
from domain.key_check import KeyCheck
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints.tables import TABLES
from infrastructure.storage.records.key_checks import CHECK_TOPIC, KeyMismatch
from infrastructure.storage.settings import Settings

WRONG = b"\x33" * 32
MISMATCH = (
    "MACE_SIGNING_KEYS key {key} does not match the key {key} this store was signed with:"
    " configure the store's secret for {key}"
)
ATTACKS = (
    ("memories", "add", "--tenant", "other", "--fact", "user/customer/bob/plan", '"silver"'),
    ("run", "2 + 3", "--seed", "s9"),
    ("sem", "put", "world/country/france/capital", '"Paris"'),
)


def keys_json(keys: dict[str, bytes]) -> str:
    return orjson.dumps({k: base64.b64encode(v).decode() for k, v in keys.items()}).decode()


def use_keys(monkeypatch: pytest.MonkeyPatch, active: str = "k1", **keys: bytes) -> None:
    """The keys the next ``mace`` command is configured with."""
    monkeypatch.setenv("MACE_SIGNING_KEYS", keys_json(keys))
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", active)


def wrong_settings(store_url: str) -> Settings:
    return Settings(
        store=store_url,
        signing_keys=SecretStr(keys_json({"k1": WRONG})),
        checkpoint_key=TEST_CHECKPOINT_KEY,
    )


def stored_rows(raw: RawTable) -> int:
    return int(raw.execute("SELECT count(*) FROM {table}")[0][0])


def check_records(raw: RawTable) -> list[bytes]:
    rows = raw.execute("SELECT state FROM {table} WHERE topic = %s", (CHECK_TOPIC,))
    return sorted(bytes(state) for (state,) in rows)


@pytest.fixture
def actor(cli_env: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "operator,admin")
    return cli_env


def remember(capsys: pytest.CaptureFixture[str], key: str = "user/customer/alice/plan") -> None:
    code, _, err = run(capsys, "memories", "add", "--fact", key, '"gold"')
    assert (code, err) == (0, "")


def test_a_wrong_secret_under_the_store_key_id_is_refused_and_writes_nothing(
    actor: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    remember(capsys)
    raw = RawTable(actor)
    rows = stored_rows(raw)
    (check,) = check_records(raw)
    secret = TEST_SECRETS["k1"]
    assert secret not in check and base64.b64encode(secret) not in check  # its MAC is the proof
    assert orjson.loads(check.split(b".", 3)[3])["statement"] == KeyCheck.STATEMENT

    use_keys(monkeypatch, k1=WRONG)
    for attack in ATTACKS:
        assert run(capsys, *attack) == (2, "", f"mace: KEY_MISMATCH: {MISMATCH.format(key='k1')}\n")
    assert stored_rows(raw) == rows

    use_keys(monkeypatch, k1=TEST_SECRETS["k1"])
    verified = (  # the checkpoint `memories add` ended with is one event and stream of these
        "ok: 4 events in 3 streams verified (0 jobs, 0 sealed); checkpoints: 1 verified,"
        " the newest covers 3 events; not yet checkpointed: 0\n"
        "replay requests without a result: 0 abandoned, 0 running\n"
    )
    assert run(capsys, "verify", "--all") == (0, verified, "")
    for attack in ATTACKS:  # the right key writes as before, and records no second check
        assert run(capsys, *attack)[0] == 0
    assert len(check_records(raw)) == 1
    assert run(capsys, "verify", "--all")[0] == 0


def test_the_service_refuses_to_start_with_a_wrong_key(
    actor: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    remember(capsys)
    tokens = tmp_path / "tokens.json"
    assert (
        run(capsys, "token", "new", "--actor", "ana", "--roles", "operator", "--file", str(tokens))[
            0
        ]
        == 0
    )
    monkeypatch.setenv("MACE_TOKENS_FILE", str(tokens))
    use_keys(monkeypatch, k1=WRONG)
    assert run(capsys, "serve", "--port", "1") == (
        2,
        "",
        f"mace: KEY_MISMATCH: {MISMATCH.format(key='k1')}\n",
    )


def test_a_store_written_before_key_checks_is_protected_by_its_events(
    actor: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    remember(capsys)
    raw = RawTable(actor)
    # What a store written before key checks holds: the same events, no check record (and no
    # checkpoint, which came later still).
    raw.execute("DELETE FROM {table} WHERE topic = %s", (CHECK_TOPIC,))
    raw.execute("DELETE FROM {table} WHERE originator_id = %s", (raw.key(CHECKPOINT_STREAM),))
    for checkpoint_table in TABLES:
        raw.execute(f"DELETE FROM {checkpoint_table}")
    rows = stored_rows(raw)

    use_keys(monkeypatch, k1=WRONG)
    for attack in ATTACKS:
        assert run(capsys, *attack) == (2, "", f"mace: KEY_MISMATCH: {MISMATCH.format(key='k1')}\n")
    assert stored_rows(raw) == rows

    use_keys(monkeypatch, "k2", k1=WRONG, k2=TEST_SECRETS["k2"])  # wrong, though retired
    assert run(capsys, *ATTACKS[0]) == (2, "", f"mace: KEY_MISMATCH: {MISMATCH.format(key='k1')}\n")
    assert stored_rows(raw) == rows

    use_keys(monkeypatch, k1=TEST_SECRETS["k1"])
    remember(capsys, "user/customer/bob/plan")
    (check,) = check_records(raw)
    assert check.startswith(b"mace1.k1.")
    assert run(capsys, "verify", "--all")[0] == 0


def test_a_regenerated_development_keyring_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("MACE_SIGNING_KEYS", "MACE_ACTIVE_KEY_ID", "MACE_KEYRING_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/mace.db")
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "operator")
    remember(capsys)
    keyring_file = tmp_path / "mace.db.keys.json"
    keyring_file.unlink()  # lost; the next command makes a new one, with a new secret
    code, out, err = run(capsys, *ATTACKS[0])
    assert (code, out) == (2, "")
    assert err.endswith(
        f"mace: KEY_MISMATCH: keyring file {keyring_file} key dev-1 does not match the key dev-1"
        " this store was signed with: configure the store's secret for dev-1\n"
    )


def test_rotation_records_the_new_key_and_checks_the_retired_one(
    actor: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    remember(capsys)
    raw = RawTable(actor)
    use_keys(monkeypatch, "k2", k1=TEST_SECRETS["k1"], k2=TEST_SECRETS["k2"])
    remember(capsys, "user/customer/bob/plan")
    k1_check, k2_check = check_records(raw)
    assert (k1_check[:9], k2_check[:9]) == (b"mace1.k1.", b"mace1.k2.")
    assert run(capsys, "verify", "--all")[0] == 0
    rows = stored_rows(raw)

    for wrong in ("k1", "k2"):  # a retired key is held to the store as much as the active one
        use_keys(monkeypatch, "k2", **{**TEST_SECRETS, wrong: WRONG})
        refused = run(capsys, "sem", "put", "world/country/spain/capital", '"Madrid"')
        assert refused == (2, "", f"mace: KEY_MISMATCH: {MISMATCH.format(key=wrong)}\n")
    assert stored_rows(raw) == rows


def test_first_writers_racing_agree_and_a_wrong_one_loses_without_writing(
    store_url: str,
) -> None:
    right = settings_for(store_url)
    with (
        Ledger.open(right) as first,
        Ledger.open(right) as second,
        Ledger.open(wrong_settings(store_url)) as wrong,
    ):
        # All three opened an empty store: nothing contradicted any of them yet.
        first.sem.put("world/country/france/capital", "Paris")
        second.sem.put("world/country/spain/capital", "Madrid")  # its key check lost the race
        head = store_of(first).recorder.max_notification_id()
        with pytest.raises(KeyMismatch, match=MISMATCH.format(key="k1")):
            wrong.sem.put("world/country/italy/capital", "Rome")
        assert store_of(first).recorder.max_notification_id() == head
        assert len(check_records(RawTable(right))) == 1
        assert store_of(first).verify_all().events == head


def test_an_altered_check_record_is_an_integrity_failure_not_a_wrong_key(
    actor: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    remember(capsys)
    raw = RawTable(actor)
    stream = KeyCheck.id_for("k1")
    raw.set_column(stream, 1, "state", raw.state(stream, 1).replace(b"MACE key", b"MACE kez"))
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    assert err == (
        f"mace: INTEGRITY_FAILURE: stream {stream} version 1: key check of k1 does not verify,"
        " though events signed by it do\n"
    )


@pytest.mark.parametrize("edit", ["topic", "text state"])
def test_a_check_record_moved_out_of_its_kind_is_an_integrity_failure_not_a_wrong_key(
    actor: Settings, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    """The record given another event's topic, or its state turned into text (what SQL's
    ``replace()`` does to a blob): the key still verifies other events, so it is the record."""
    remember(capsys)
    raw = RawTable(actor)
    stream = KeyCheck.id_for("k1")
    raw.forget_checkpoints()  # what is tested here needs none (they would name it first)
    if edit == "topic":
        raw.set_column(stream, 1, "topic", raw.rows(raw_first_other(raw, stream))[0][1])
        reason = "key check of k1 does not verify, though events signed by it do"
    elif raw.table == "stored_events":
        raw.set_column(stream, 1, "state", raw.state(stream, 1).decode())
        reason = "key check of k1 is not signed by k1"
    else:
        pytest.skip("a PostgreSQL bytea column turns the text back into the same bytes")
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    assert err == f"mace: INTEGRITY_FAILURE: stream {stream} version 1: {reason}\n"


def raw_first_other(raw: RawTable, stream: UUID) -> UUID:
    """A stream other than ``stream``, with at least one event."""
    for (other,) in raw.execute("SELECT DISTINCT originator_id FROM {table}"):
        candidate = other if isinstance(other, UUID) else UUID(other)
        if candidate != stream:
            return candidate
    raise AssertionError("the store holds one stream only")


def test_a_service_the_store_contradicts_is_not_ready_and_writes_nothing(store_url: str) -> None:
    wrong = wrong_settings(store_url)
    with Ledger.open(wrong) as ledger, checked_client(wrong, ledger) as client:
        api = Api(client, ledger)
        ready = api.get("/readyz", "admin")  # the details are for admins
        assert (ready.status_code, ready.json()["keys"]) == (200, {"k1": "unrecorded"})

        with Ledger.open(settings_for(store_url)) as right:  # the store's first writer
            right.sem.put("world/country/france/capital", "Paris")
        head = api.position()

        assert_error(api.get("/readyz", None), 503, "NOT_READY", "not ready")
        reason = f"not ready: {MISMATCH.format(key='k1')}"
        assert_error(api.get("/readyz", "admin"), 503, "NOT_READY", reason)
        refused = api.post("/v1/jobs", {"input": "2 + 3", "seed": "s1"})
        assert_error(refused, 503, "KEY_MISMATCH", MISMATCH.format(key="k1"))
        assert api.position() == head


def test_a_service_with_the_store_keys_is_ready_and_says_so(
    settings: Settings, ledger: Ledger
) -> None:
    with checked_client(settings, ledger) as client:
        api = Api(client, ledger)
        api.new_job()
        assert api.get("/readyz", None).json() == {"status": "ready"}
        assert api.get("/readyz", "admin").json()["keys"] == {"k1": "verified"}
