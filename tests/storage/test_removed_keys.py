"""A key retired and then removed from the keyring is named as missing, never taken for tampering;
a record re-wrapped under an invented key id is still tampering.

The key id in a record's envelope is not under its MAC (it picks the key the MAC is checked
with), but it is in the stored bytes a checkpoint's Merkle leaf covers, and the checkpoint writer
checked the record's MAC before it covered it. So a record signed under a key id the keyring
lacks is the store's own, unaltered, when the newest checkpoint includes it as stored; and the
key id is one of the store's keys when that checkpoint includes the key's check record (the
first write under a key records one, signed by it). Then the keyring lacks a key: KEY_MISMATCH,
exit 2, naming it (a replay records no result and sets no halt). Otherwise (an invented key id, a
record the checkpoint holds other bytes for) it is INTEGRITY_FAILURE. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import pytest
from support.ledger_fixtures import RawTable, run, settings_for, signing_keys, store_of

from domain.errors import IntegrityFailure
from domain.governance import Actor
from domain.job import CaptureMode, Job
from domain.replay_access import ReplayMode
from infrastructure.application.errors import failure_of
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.key_checks import MissingSigningKey
from infrastructure.storage.settings import Settings

ADMIN_AUDITOR = Actor.of("ana", ["admin", "auditor"])
FORGED_MAC = b"0" * 64


def rotated_store(store_url: str) -> None:
    """Job ``old`` signed by k1, then k2 made the signing key and job ``new`` signed by it; every
    write checkpointed as the CLI's are. Job ``late`` (k2) is left after the newest checkpoint."""
    with Ledger.open(settings_for(store_url, "k1")) as ledger:
        ledger.jobs.run("2 + 3", "s1", job_id="old", capture_mode=CaptureMode.FULL_IO)
    with Ledger.open(settings_for(store_url, "k1", "k2", active="k2")) as ledger:
        ledger.jobs.run("2 + 4", "s1", job_id="new", capture_mode=CaptureMode.FULL_IO)
    keys = settings_for(store_url, "k1", "k2", active="k2")
    with Ledger.open(keys, checkpoint_on_close=False) as ledger:
        ledger.jobs.run("2 + 5", "s1", job_id="late", capture_mode=CaptureMode.FULL_IO)


def rewrap(raw: RawTable, job_id: str, version: int, key_id: str) -> None:
    """The record re-wrapped under ``key_id`` with a made-up MAC, as someone with database access
    could do after editing it (the body is edited too)."""
    state = raw.state(Job.id_for(job_id), version)
    _, _, _, body = state.split(b".", 3)
    forged = b".".join((b"mace1", key_id.encode(), FORGED_MAC, body.replace(b"2 + ", b"3 + ")))
    raw.set_column(Job.id_for(job_id), version, "state", forged)


def test_a_removed_retired_key_is_named_as_missing_not_as_tampering(store_url: str) -> None:
    rotated_store(store_url)
    with Ledger.open(settings_for(store_url, "k2", active="k2")) as ledger:
        before = store_of(ledger).recorder.max_notification_id()
        with pytest.raises(MissingSigningKey) as missing:
            ledger.jobs.verify("old")
        failure = failure_of(missing.value)
        assert failure is not None
        assert (failure.code, failure.exit_code, failure.status) == ("KEY_MISMATCH", 2, 503)
        assert failure.message.startswith("MACE_SIGNING_KEYS lacks key k1, which signed stream ")
        assert "the key is missing, not the record altered" in failure.message
        # A replay is refused as a configuration error: nothing is written for the job it
        # cannot read; for one it can (its snapshots it cannot), the request is recorded as
        # abandoned. Neither sets a halt or records an integrity failure.
        with pytest.raises(MissingSigningKey):
            ledger.replays.run("old", ReplayMode.AUDIT, ADMIN_AUDITOR)
        assert store_of(ledger).recorder.max_notification_id() == before
        with pytest.raises(MissingSigningKey):
            ledger.replays.run("new", ReplayMode.AUDIT, ADMIN_AUDITOR)
    topics = RawTable(settings_for(store_url)).execute("SELECT topic FROM {table}")
    assert not [t for (t,) in topics if "HaltSet" in t or "ReplayResulted" in t]


def test_mace_verify_names_the_missing_key_with_exit_2(
    store_url: str,
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rotated_store(store_url)
    monkeypatch.setenv("MACE_SIGNING_KEYS", signing_keys("k2").get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k2")
    code, out, err = run(capsys, "verify", "old")
    assert (code, out) == (2, "")
    assert err.startswith("mace: KEY_MISMATCH: MACE_SIGNING_KEYS lacks key k1, which signed ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("job_id", "why"),
    [
        # Below the newest checkpoint: its tree holds other bytes for the record.
        ("old", "not included in checkpoint"),
        # After it: nothing shows the store ever used the key id.
        ("late", "'kX'.* no checkpoint the keyring can read shows this store ever used"),
    ],
)
def test_a_record_rewrapped_under_an_invented_key_id_is_tampering(
    store_url: str, job_id: str, why: str
) -> None:
    rotated_store(store_url)
    rewrap(RawTable(settings_for(store_url)), job_id, 2, "kX")
    with (
        Ledger.open(settings_for(store_url, "k1", "k2", active="k2")) as ledger,
        pytest.raises(IntegrityFailure, match=why) as altered,
    ):
        ledger.jobs.verify(job_id)
    assert not isinstance(altered.value, MissingSigningKey)


def test_an_unchecked_record_rewrapped_under_the_retired_key_fails_once_the_key_is_back(
    store_url: str,
) -> None:
    """Told the key is missing, the operator adds it back, and the MAC is checked: an edit is
    never passed off as "cannot be checked" for good."""
    rotated_store(store_url)
    rewrap(RawTable(settings_for(store_url)), "late", 2, "k1")
    with (
        Ledger.open(settings_for(store_url, "k2", active="k2")) as ledger,
        pytest.raises(MissingSigningKey),
    ):
        ledger.jobs.verify("late")
    with (
        Ledger.open(settings_for(store_url, "k1", "k2", active="k2")) as ledger,
        pytest.raises(IntegrityFailure, match="MAC mismatch"),
    ):
        ledger.jobs.verify("late")
