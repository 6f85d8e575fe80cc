"""``MACE_READ_STORE``: ``mace verify`` (every form) and ``mace rebuild`` read a replica or copy
of the ledger, name it, and write nothing to it; a bad read store is one line, nothing written.

The primary (``MACE_STORE``) is recorded through ``mace``, then copied to a second database
(PostgreSQL: ``CREATE DATABASE ... TEMPLATE``; SQLite: the backup API), as a replica holds it.
Tampering with one of the two shows which one a command read. Both stores, every test.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from eventsourcing.persistence import PersistenceError
from support.ledger_fixtures import RawTable, run, settings_for
from support.stalled_replays import stalled_replay
from support.store_copies import SQLITE_COMPANIONS, copy_store, fingerprint
from support.tamper_scenario import stream_kinds

from domain.snapshot import Snapshot
from infrastructure.storage.settings import Settings, parse_store
from infrastructure.storage.store import LedgerStore

VERIFY_FORMS = (("verify", "--all"), ("verify", "--all", "--json"))


@pytest.fixture
def primary(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> str:
    """The primary's URL, holding two sealed jobs, its read models caught up (``mace jobs``)."""
    for seed in ("7", "8"):
        code, _, err = run(capsys, "run", "What is the capital of France?", "--seed", seed)
        assert code == 0, err
    assert run(capsys, "jobs")[0] == 0
    return cli_env.store


@pytest.fixture
def replica(primary: str, store_copy: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> str:
    """A copy of the primary as it stands, set as MACE_READ_STORE."""
    url = store_copy()
    monkeypatch.setenv("MACE_READ_STORE", url)
    return url


def read_store_line(url: str, head: int) -> str:
    store = parse_store(url).describe()
    return f"read store (MACE_READ_STORE): {store}, its head at notification {head}"


def head(url: str) -> int:
    table = RawTable(settings_for(url))
    column = "rowid" if table.table == "stored_events" else "notification_id"
    return int(table.execute(f"SELECT max({column}) FROM {{table}}")[0][0])


def delete_a_job_event(url: str) -> None:
    """What an attacker with write access to that database alone does: a job loses an event."""
    table = RawTable(settings_for(url))
    stream, length = stream_kinds(table)["jobs"][0]
    table.delete(stream, length // 2 + 1)


def test_verify_all_reads_the_read_store_and_names_it(
    primary: str, replica: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(replica)
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == read_store_line(replica, head(replica))
    assert lines[1].startswith("ok: ")
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out)["read_store"] == {
        "store": parse_store(replica).describe(),
        "head": head(replica),
    }
    assert fingerprint(replica) == before


def test_a_tampered_read_store_fails_while_the_primary_is_intact(
    primary: str,
    replica: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delete_a_job_event(replica)
    for form in VERIFY_FORMS:
        code, out, err = run(capsys, *form)
        assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err
    # Named with the verdict: the failing database is the read store, not the primary.
    assert out and orjson.loads(out)["read_store"]["store"] == parse_store(replica).describe()

    monkeypatch.delenv("MACE_READ_STORE")
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    assert out.startswith("ok: ")


def test_tampering_with_the_primary_alone_is_not_seen_on_the_read_store(
    primary: str,
    replica: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    delete_a_job_event(primary)
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == read_store_line(replica, head(replica))

    monkeypatch.setenv("MACE_READ_STORE", "")  # empty is unset: MACE_STORE answers
    code, _, err = run(capsys, "verify", "--all")
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err


def test_verify_a_job_and_against_a_checkpoint_read_the_read_store(
    cli_env: Settings,
    store_copy: Callable[[], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run(capsys, "run", "2 + 3", "--seed", "1", "--json")
    assert code == 0, err
    job_id = orjson.loads(out)["job_id"]
    exported = tmp_path / "checkpoint.json"
    assert run(capsys, "checkpoint", "export", "-o", str(exported))[0] == 0
    replica = store_copy()
    monkeypatch.setenv("MACE_READ_STORE", replica)
    before = fingerprint(replica)

    code, out, err = run(capsys, "verify", job_id)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == read_store_line(replica, head(replica))
    assert out.splitlines()[1].startswith(f"ok: job {job_id}: ")
    code, out, err = run(capsys, "verify", "--all", "--checkpoint", str(exported))
    assert (code, err) == (0, "")
    assert "the store extends checkpoint" in out

    # The primary goes on; a checkpoint exported from it now is ahead of the copy, which does
    # not extend it: a lagging replica is held to what it holds, never vouched for beyond.
    assert run(capsys, "run", "4 + 4", "--seed", "2")[0] == 0
    newer = tmp_path / "newer.json"
    monkeypatch.delenv("MACE_READ_STORE")
    assert run(capsys, "checkpoint", "export", "-o", str(newer))[0] == 0
    monkeypatch.setenv("MACE_READ_STORE", replica)
    code, _, err = run(capsys, "verify", "--all", "--checkpoint", str(newer))
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err

    delete_a_job_event(replica)
    code, _, err = run(capsys, "verify", job_id)
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err
    monkeypatch.delenv("MACE_READ_STORE")
    assert run(capsys, "verify", job_id)[0] == 0
    assert fingerprint(replica) != before  # the test's own deletion, and only it, changed it


def test_rebuild_compares_the_read_stores_views_and_writes_nothing(
    primary: str,
    replica: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before, primary_before = fingerprint(replica), fingerprint(primary)
    code, out, err = run(capsys, "rebuild", "--json")
    assert (code, err) == (0, "")
    answer = orjson.loads(out)
    assert answer["ok"] is True
    assert answer["read_store"]["store"] == parse_store(replica).describe()
    job_index = next(v for v in answer["views"] if v["view"] == "job_index")
    assert job_index["rows"] == 2
    assert (fingerprint(replica), fingerprint(primary)) == (before, primary_before)

    # A view row edited in the copy: the comparison there finds it; the primary's views match.
    table = RawTable(settings_for(replica))
    table.execute(
        "UPDATE mace_read_models SET row_json = replace(row_json, '\"sealed\"', '\"open\"')"
        " WHERE view = 'job_index'"
    )
    edited = fingerprint(replica)
    code, out, err = run(capsys, "rebuild")
    assert (code, err) == (1, "")
    assert (
        "job_index: 2 rows" in out and "DIFFERS from the read store's view (compared only)" in out
    )
    assert out.splitlines()[-1].endswith("nothing written")
    assert fingerprint(replica) == edited

    monkeypatch.delenv("MACE_READ_STORE")
    code, out, err = run(capsys, "rebuild")
    assert (code, err) == (0, "")
    assert "DIFFERS" not in out


def test_nothing_is_made_for_a_read_store_and_its_keys_are_the_primarys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A development primary (keys made beside its SQLite file): the read store is read with
    those keys, and no keyring or checkpoint key is made beside the copy."""
    for name in [name for name in os.environ if name.startswith("MACE_")]:
        monkeypatch.delenv(name)
    primary = tmp_path / "primary" / "mace.db"
    primary.parent.mkdir()
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{primary}")
    assert run(capsys, "run", "2 + 3", "--seed", "1")[0] == 0
    copies = tmp_path / "copies"
    copies.mkdir()
    replica = copy_store(None, f"sqlite:///{primary}", "mace", copies)
    monkeypatch.setenv("MACE_READ_STORE", replica)
    before = fingerprint(replica)

    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    assert out.splitlines()[1].startswith("ok: ")
    assert [p.name for p in copies.iterdir() if not p.name.endswith(SQLITE_COMPANIONS)] == [
        "mace.db"
    ]
    assert fingerprint(replica) == before

    # Without the primary's development checkpoint key, the read store is refused, none made.
    checkpoint_key = primary.with_name("mace.db.checkpoint-key.pem")
    checkpoint_key.unlink()
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: INVALID_INPUT: no checkpoint key: {checkpoint_key} does not")
    assert not checkpoint_key.exists()
    assert fingerprint(replica) == before


EXPECTED = "expected sqlite:///path/to/file.db or postgresql://user:password@host:port/db"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db", f"MACE_READ_STORE has unsupported scheme 'mysql': {EXPECTED}"),
        ("sqlite:///", f"MACE_READ_STORE 'sqlite:///' names no database file: {EXPECTED}"),
        (
            "postgresql://db.example/ledger",
            "MACE_READ_STORE 'postgresql://db.example/ledger' needs a user, a host and a"
            f" database name: {EXPECTED}",
        ),
    ],
)
def test_a_malformed_read_store_is_one_line_exit_2_and_nothing_is_written(
    primary: str,
    url: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MACE_READ_STORE", url)
    before = fingerprint(primary)
    # Every command loads the settings first: a writer refuses it too, before it writes.
    for argv in (("verify", "--all"), ("rebuild",), ("run", "2 + 3", "--seed", "9")):
        assert run(capsys, *argv) == (2, "", f"mace: INVALID_INPUT: {message}\n")
    assert fingerprint(primary) == before


def test_an_unreachable_read_store_is_store_unavailable_naming_it(
    primary: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MACE_READ_STORE", "postgresql://mace:secret@127.0.0.1:1/ledger")
    code, out, err = run(capsys, "verify", "--all")
    assert (code, out) == (1, "")
    prefix = (
        "mace: STORE_UNAVAILABLE: store unavailable: cannot connect to"
        " postgresql://mace@127.0.0.1:1/ledger (MACE_READ_STORE): "
    )
    assert err.startswith(prefix) and err.count("\n") == 1 and "secret" not in err


def test_a_read_store_without_a_ledger_is_refused_and_left_as_it_was(
    primary: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if primary.startswith("sqlite"):
        missing = tmp_path / "missing.db"
        empty = tmp_path / "empty.db"
        empty.touch()
        bare = tmp_path / "bare.db"  # a SQLite database in WAL mode, without a table
        sqlite3.connect(bare, isolation_level=None).execute("PRAGMA journal_mode=WAL").close()
        refusals = {
            f"sqlite:///{missing}": f"no ledger at sqlite:///{missing} (set MACE_READ_STORE)",
            f"sqlite:///{empty}": f"no ledger at sqlite:///{empty}: a ledger MACE wrote is in"
            " write-ahead-log mode and this file is not (point MACE_READ_STORE at a copy of"
            " the ledger)",
            f"sqlite:///{bare}": NO_TABLES.format(
                where=f"sqlite:///{bare}", events="stored_events", tracking="tracking"
            ),
        }
    else:
        url = request.getfixturevalue("make_postgres_database")()
        where = parse_store(url).describe()
        refusals = {
            url: NO_TABLES.format(where=where, events="ledger_events", tracking="ledger_tracking")
        }
    for url, message in refusals.items():
        monkeypatch.setenv("MACE_READ_STORE", url)
        before = None if url.endswith("missing.db") else fingerprint(url)
        for argv in (("verify", "--all"), ("rebuild",)):
            assert run(capsys, *argv) == (2, "", f"mace: NOT_FOUND: {message}\n")
        assert (None if url.endswith("missing.db") else fingerprint(url)) == before
    assert not (tmp_path / "missing.db").exists()


NO_TABLES = (
    "no ledger at {where}: its tables are not set up (missing {events}, mace_log_nodes,"
    " mace_log_leaves, mace_head_buckets, mace_head_nodes, mace_cosignatures, {tracking},"
    " mace_read_models; point"
    " MACE_READ_STORE at a replica or copy of the ledger)"
)


def test_the_read_store_refuses_writes_itself(
    primary: str, replica: str, cli_env: Settings
) -> None:
    """Code that reads is what keeps the read store unwritten; its database says so too: a
    save through the read store's own connections fails, and the copy is unchanged."""
    before = fingerprint(replica)
    settings = cli_env.model_copy(update={"read_store": replica})
    store = LedgerStore.open_read_store(settings)
    try:
        with pytest.raises(PersistenceError, match=r"read-?only"):
            store.save(Snapshot.declare("router", {"rules": []}, 1, "mace/router"))
    finally:
        store.close()
    assert fingerprint(replica) == before


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_replay_running_on_the_primary_is_running_on_the_read_store(
    cli_env: Settings,
    store_copy: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replays hold their leases on the primary, so a read store asks the primary whether one
    still runs. SQLite only: PostgreSQL copies a database only while no one is connected to it,
    and the running replay is."""
    code, out, err = run(capsys, "run", "2 + 3", "--seed", "1", "--json")
    assert code == 0, err
    job_id = orjson.loads(out)["job_id"]
    with stalled_replay("default", job_id) as process:
        monkeypatch.setenv("MACE_READ_STORE", store_copy())
        code, out, err = run(capsys, "verify", "--all")
        assert (code, err) == (0, "")
        assert out.splitlines()[2] == "replay requests without a result: 0 abandoned, 1 running"
        process.send_signal(signal.SIGKILL)
        assert process.wait() == -signal.SIGKILL
    # The copy was taken before the kill: whether a result came after its head, it cannot tell.
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    assert out.splitlines()[2] == (
        "replay requests without a result: 0 abandoned, 0 running, 1 unresolved (no result in"
        " the read store and no lease held on the primary: abandoned, or answered after the"
        " read store's head)"
    )
    assert out.splitlines()[3].startswith(f"unresolved: job {job_id} attempt 1 ")
    monkeypatch.delenv("MACE_READ_STORE")
    code, out, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")
    assert "replay requests without a result: 1 abandoned, 0 running" in out.splitlines()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_replay_answered_after_the_copy_is_not_called_abandoned_on_it(
    cli_env: Settings,
    store_copy: Callable[[], str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy holds the request, the primary its result too: the lagging copy must not call
    the replay abandoned. SQLite only, as above."""
    code, out, err = run(capsys, "run", "2 + 3", "--seed", "1", "--json")
    assert code == 0, err
    job_id = orjson.loads(out)["job_id"]
    with stalled_replay("default", job_id) as process:
        copy = store_copy()
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.close()
        assert process.wait() == 0
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert (code, err) == (0, "")
    assert orjson.loads(out)["unresolved_replays"] == []
    assert orjson.loads(out)["abandoned_replays"] == []  # answered on the primary

    monkeypatch.setenv("MACE_READ_STORE", copy)
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert (code, err) == (0, "")
    verdict = orjson.loads(out)
    assert (verdict["abandoned_replays"], verdict["running_replays"]) == ([], [])
    assert [r["attempt"] for r in verdict["unresolved_replays"]] == [1]
