"""The tamper matrix: every kind of stream the ledger holds, every edit an attacker with write
access to the database can make, on SQLite and PostgreSQL; the ledger fails closed on each.

One store is recorded per backend with every kind of stream (`support.tamper_scenario`), ends
with a checkpoint (every writing command does), and its newest checkpoint is exported, as an
operator keeps one elsewhere. Each case copies that store, makes one edit with plain SQL, and
asks ``mace verify --all`` (and ``--checkpoint`` with the exported one): exit 1 and
``INTEGRITY_FAILURE``. A rollback to an older copy of the whole store, checkpoints and all, is the
one attack the store alone cannot see: it passes ``verify --all`` (the documented limit) and fails
against the exported checkpoint.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from support.ledger_fixtures import RawTable, run, settings_for, subprocess_env
from support.postgres_server import PostgresServer, drop_database, fresh_database
from support.store_copies import copy_store
from support.tamper_scenario import KINDS, record_everything, stream_kinds

from infrastructure.cli import main

# Streams that hold one event by design: "the middle one" is no attack on them.
SINGLE_EVENT = {"witnesses", "snapshots", "receipts", "key checks", "what-if records"}
SHORT = {"SEM entries"}  # two events: a first and a last, no middle
ATTACKS = (
    "delete first",
    "delete middle",
    "delete last",
    "delete stream",
    "alter a byte",
    "swap two rows",
    "reorder",
    "change topic",
    "change version",
    "insert forged",
    "insert copied",
)
STORES = ("sqlite", "postgres")


@dataclass(frozen=True)
class Scenario:
    store: str
    url: str  # the store every case copies (never edited itself)
    older_url: str  # a copy taken before the last command: a backup to roll back to
    exported: Path  # the newest checkpoint, exported after the last command
    server: PostgresServer | None


def _cases() -> Iterator[Any]:
    for kind, _ in KINDS:
        for attack in ATTACKS:
            if attack == "delete middle" and kind in SINGLE_EVENT | SHORT:
                continue
            yield pytest.param(kind, attack, id=f"{kind}-{attack}")


def _mace(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    for name, value in env.items():
        if name.startswith("MACE_"):
            monkeypatch.setenv(name, value)

    def mace(actor: str, roles: str, *argv: str) -> str:
        monkeypatch.setenv("MACE_ACTOR", actor)
        monkeypatch.setenv("MACE_ROLES", roles)
        # Text streams over bytes, as a terminal's are: JSON output is written to the bytes.
        out, err = io.TextIOWrapper(io.BytesIO()), io.TextIOWrapper(io.BytesIO())
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
        out.flush()
        err.flush()
        assert code == 0, (argv, err.buffer.getvalue())
        return out.buffer.getvalue().decode()

    return mace


@pytest.fixture(scope="module", params=STORES)
def scenario(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scenario]:
    """The recorded store of one backend, its older copy and its exported newest checkpoint."""
    store = request.param
    directory = tmp_path_factory.mktemp(f"tamper-{store}")
    server: PostgresServer | None = None
    if store == "sqlite":
        url = f"sqlite:///{directory}/pristine.db"
    else:
        server = request.getfixturevalue("postgres_server")
        url = fresh_database(server, f"mace_tamper_{os.getpid()}")
    exported = directory / "newest.json"
    older_name = f"mace_tamper_older_{os.getpid()}"
    with pytest.MonkeyPatch.context() as monkeypatch:
        mace = _mace(subprocess_env(url), monkeypatch)
        job_id = record_everything(mace, directory / "bundle.yaml")
        older = copy_store(server, url, older_name, directory)
        mace("ana", "admin,auditor", "replay", job_id)
        mace("ana", "auditor", "checkpoint", "export", "-o", str(exported))
    yield Scenario(store, url, older, exported, server)
    if server is not None:
        drop_database(server, url.rsplit("/", 1)[1])
        drop_database(server, older_name)


@pytest.fixture
def case_url(scenario: Scenario, tmp_path: Path) -> Iterator[str]:
    """A copy of the scenario's store for one attack."""
    name = f"mace_tamper_case_{os.getpid()}"
    yield copy_store(scenario.server, scenario.url, name, tmp_path)
    if scenario.server is not None:
        drop_database(scenario.server, name)


def _verify(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, url: str, *extra: str
) -> tuple[int, str]:
    monkeypatch.setenv("MACE_STORE", url)
    code, _, err = run(capsys, "verify", "--all", *extra)
    return code, err


@pytest.mark.parametrize(("kind", "attack"), list(_cases()))
def test_every_attack_on_every_stream_kind_fails_closed(
    kind: str,
    attack: str,
    scenario: Scenario,
    case_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = case_url
    for name, value in subprocess_env(url).items():
        if name.startswith("MACE_"):
            monkeypatch.setenv(name, value)
    table = RawTable(settings_for(url))
    assert _verify(capsys, monkeypatch, url) == (0, "")

    _attack(table, kind, attack)

    code, err = _verify(capsys, monkeypatch, url)
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err
    code, err = _verify(capsys, monkeypatch, url, "--checkpoint", str(scenario.exported))
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err


def test_a_store_rolled_back_whole_is_caught_by_an_exported_checkpoint_only(
    scenario: Scenario, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in subprocess_env(scenario.older_url).items():
        if name.startswith("MACE_"):
            monkeypatch.setenv(name, value)

    # The older copy is consistent in itself, checkpoints and head index included.
    assert _verify(capsys, monkeypatch, scenario.older_url)[0] == 0
    exported = str(scenario.exported)
    code, err = _verify(capsys, monkeypatch, scenario.older_url, "--checkpoint", exported)
    assert (code, err.split(":")[:2]) == (1, ["mace", " INTEGRITY_FAILURE"]), err


# --- the attacks, in plain SQL -----------------------------------------------------------------


def _attack(table: RawTable, kind: str, attack: str) -> None:
    kinds = stream_kinds(table)
    stream, length = kinds[kind][0]
    others = [s for streams in kinds.values() for s, _ in streams if s != stream]
    last = length
    middle = length // 2 + 1
    if attack == "delete first":
        table.delete(stream, 1)
    elif attack == "delete middle":
        table.delete(stream, middle)
    elif attack == "delete last":
        table.delete(stream, last)
    elif attack == "delete stream":
        table.execute("DELETE FROM {table} WHERE originator_id = %s", (table.key(stream),))
    elif attack == "alter a byte":
        state = bytearray(table.state(stream, middle))
        state[-2] ^= 0x01
        table.set_column(stream, middle, "state", bytes(state))
    elif attack == "swap two rows":
        other, other_version = (stream, 2) if length > 1 else (others[0], 1)
        _swap_contents(table, (stream, 1), (other, other_version))
    elif attack == "reorder":
        other, other_version = (stream, 2) if length > 1 else (others[0], 1)
        _swap_positions(table, (stream, 1), (other, other_version))
    elif attack == "change topic":
        # Another kind's topic: another stream of the same kind has the very same one, and
        # writing a row's own topic back is no attack (which stream comes first varies).
        own = table.rows(stream)[middle - 1][1]
        topic = next(t for t in (table.rows(o)[0][1] for o in others) if t != own)
        table.set_column(stream, middle, "topic", topic)
    elif attack == "change version":
        table.set_column(stream, last, "originator_version", last + 1)
    elif attack == "insert forged":
        forged = b"mace1.k1." + b"0" * 64 + b'.{"class_version":1}'
        _insert(table, stream, last + 1, table.rows(stream)[-1][1], forged)
    elif attack == "insert copied":
        _, topic, copied = table.rows(others[0])[0]
        _insert(table, stream, last + 1, topic, copied)
    else:  # pragma: no cover - the parametrisation names every attack
        raise AssertionError(attack)


def _insert(table: RawTable, stream: UUID, version: int, topic: str, state: bytes) -> None:
    table.execute(
        "INSERT INTO {table} (originator_id, originator_version, topic, state)"
        " VALUES (%s, %s, %s, %s)",
        (table.key(stream), version, topic, state),
    )


def _swap_contents(table: RawTable, a: tuple[UUID, int], b: tuple[UUID, int]) -> None:
    (_, topic_a, state_a), (_, topic_b, state_b) = (table.rows(s)[v - 1] for s, v in (a, b))
    for (stream, version), topic, state in ((a, topic_b, state_b), (b, topic_a, state_a)):
        table.set_column(stream, version, "topic", topic)
        table.set_column(stream, version, "state", state)


def _swap_positions(table: RawTable, a: tuple[UUID, int], b: tuple[UUID, int]) -> None:
    """Swap two rows' places in notification (commit) order, their contents untouched."""
    column = "rowid" if table.table == "stored_events" else "notification_id"
    position = {
        key: table.execute(
            f"SELECT {column} FROM {{table}} WHERE originator_id = %s AND originator_version = %s",
            (table.key(key[0]), key[1]),
        )[0][0]
        for key in (a, b)
    }
    parked = -1
    for (stream, version), value in ((a, parked), (b, position[a]), (a, position[b])):
        table.execute(
            f"UPDATE {{table}} SET {column} = %s WHERE originator_id = %s"
            " AND originator_version = %s",
            (value, table.key(stream), version),
        )
