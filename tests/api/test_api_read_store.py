"""The HTTP service with ``MACE_READ_STORE``: reading routes read the replica, writing routes the
primary, and nothing is written to the replica; a read store that cannot be opened stops
``mace serve`` before it starts. Both stores.

The primary is recorded through the Python API, closed, and copied to a second database
(PostgreSQL: ``CREATE DATABASE ... TEMPLATE``; SQLite: the backup API), as a replica holds it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import uvicorn
from support.api_support import Api, assert_error, checked_client
from support.ledger_fixtures import RawTable, run, settings_for
from support.store_copies import fingerprint

from domain.errors import IntegrityFailure
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings, parse_store

ROUTER = {"rules": [{"rule_id": "R1", "pattern": "x", "agent": "generic_agent", "why": "only"}]}
OTHER_ROUTER = {"rules": [{"rule_id": "R2", "pattern": "y", "agent": "generic_agent", "why": "z"}]}


@dataclass(frozen=True)
class Served:
    api: Api  # the service over the primary, its reading routes over the replica
    replica: str
    snapshot_id: str  # recorded before the copy: in both
    job_id: str  # of tenant acme, recorded before the copy: in both


@pytest.fixture
def served(settings: Settings, store_copy: Callable[[], str]) -> Iterator[Served]:
    with Ledger.open(settings) as ledger:
        snapshot, _ = ledger.snapshots.put(Snapshot.declare("router", ROUTER))
        job_id = ledger.jobs.run("2 + 3", "s1", tenant="acme").job_id
    replica = store_copy()  # nothing is connected to the primary while it is copied
    reading = settings.model_copy(update={"read_store": replica})
    with Ledger.open(settings) as ledger, checked_client(reading, ledger) as client:
        yield Served(Api(client, ledger), replica, snapshot.snapshot_id, job_id)


def head(api: Api) -> dict[str, int]:
    ready = api.get("/readyz", "admin").json()
    return {"primary": ready["log_position"], "read store": ready["read_store"]["log_position"]}


def test_reading_routes_read_the_read_store_and_writing_routes_the_primary(
    served: Served,
) -> None:
    api, replica = served.api, served.replica
    before = fingerprint(replica)
    ready = api.get("/readyz", "admin").json()
    assert ready["read_store"]["store"] == parse_store(replica).describe()
    assert head(api)["read store"] == head(api)["primary"]
    assert api.get(f"/v1/snapshots/{served.snapshot_id}").status_code == 200
    assert api.get(f"/v1/jobs/{served.job_id}/governance").status_code == 200

    # Written through the service: on the primary, not on the read store the reads go to.
    stored = api.post("/v1/snapshots", {"kind": "router", "payload": OTHER_ROUTER}, "operator")
    assert stored.status_code == 201, stored.content
    new_snapshot = stored.json()["snapshot_id"]
    assert api.ledger.snapshots.get(new_snapshot).snapshot_id == new_snapshot
    assert_error(
        api.get(f"/v1/snapshots/{new_snapshot}"), 404, "NOT_FOUND", f"no snapshot {new_snapshot}"
    )
    new_job = api.new_job("4 + 4", "s2")
    assert api.get(f"/v1/jobs/{new_job}").status_code == 200  # a job's log: the primary's route
    assert_error(api.get(f"/v1/jobs/{new_job}/governance"), 404, "NOT_FOUND")
    assert head(api)["primary"] > head(api)["read store"]
    assert fingerprint(replica) == before


def test_a_tampered_read_store_answers_500_and_a_tampered_primary_is_not_seen(
    served: Served, settings: Settings
) -> None:
    api, stream = served.api, Snapshot.id_for(served.snapshot_id)
    path = f"/v1/snapshots/{served.snapshot_id}"
    primary_table, replica_table = RawTable(settings), RawTable(settings_for(served.replica))

    primary_table.set_column(stream, 1, "state", altered(primary_table.state(stream, 1)))
    with pytest.raises(IntegrityFailure):
        api.ledger.snapshots.get(served.snapshot_id)
    assert api.get(path).status_code == 200  # the read store's copy is intact

    replica_table.set_column(stream, 1, "state", altered(replica_table.state(stream, 1)))
    assert_error(api.get(path), 500, "INTEGRITY_FAILURE")


def altered(state: bytes) -> bytes:
    changed = bytearray(state)
    changed[-2] ^= 0x01
    return bytes(changed)


def test_serve_refuses_a_read_store_without_a_ledger_before_it_starts(
    cli_env: Settings,
    make_postgres_database: Callable[[], str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tokens = tmp_path / "tokens.json"
    argv = ("token", "new", "--actor", "ana", "--roles", "admin", "--file", str(tokens))
    assert run(capsys, *argv)[0] == 0
    monkeypatch.setenv("MACE_TOKENS_FILE", str(tokens))
    empty = make_postgres_database()
    monkeypatch.setenv("MACE_READ_STORE", empty)

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the service started")

    monkeypatch.setattr(uvicorn, "run", started)
    code, out, err = run(capsys, "serve", "--port", "8765")
    assert (code, out) == (2, "")
    assert err.startswith(f"mace: NOT_FOUND: no ledger at {parse_store(empty).describe()}: ")
    assert err.count("\n") == 1
    assert fingerprint(empty) == ("postgresql", {})
