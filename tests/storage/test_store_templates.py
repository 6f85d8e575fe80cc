"""Every test's store is a copy of one its worker set up (`support.store_templates`): set up as
``mace init`` leaves a store, holding nothing a key signed, apart from every other copy; a test
marked ``empty_store`` gets a store with no tables instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.ledger_fixtures import settings_for
from support.postgres_server import MEMORY_PER_CLUSTER, cluster_parent
from support.store_templates import prove_holds_nothing

from domain.errors import NotFoundError
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.key_checks import KeyStatus
from infrastructure.storage.store import LedgerStore


def test_a_tests_store_is_set_up_and_holds_nothing_signed(store_url: str) -> None:
    settings = settings_for(store_url, "k1", "k2")
    prove_holds_nothing(settings)
    # A reader finds the tables (it would refuse a store that is not set up), and no key check
    # and no event to hold any of the test's keys against.
    store = LedgerStore.open(settings, create=False)
    try:
        assert store.schema.missing() == []
        assert store.key_checks.status() == {"k1": KeyStatus.UNRECORDED, "k2": KeyStatus.UNRECORDED}
        assert store.recorder.max_notification_id() in (None, 0)
    finally:
        store.close()


@pytest.mark.empty_store
def test_a_test_marked_empty_store_gets_a_store_with_no_tables(store_url: str) -> None:
    with pytest.raises(NotFoundError, match="no ledger at"):
        Ledger.open(settings_for(store_url), create=False)


def test_a_store_holding_a_row_is_no_template(store_url: str) -> None:
    settings = settings_for(store_url)
    with Ledger.open(settings) as ledger:
        ledger.jobs.run("2 + 3", "s1")
    with pytest.raises(AssertionError, match="these hold rows"):
        prove_holds_nothing(settings)


def test_copies_of_the_template_are_apart(store_url: str, other_store: str) -> None:
    assert other_store != store_url
    with Ledger.open(settings_for(store_url)) as ledger:
        ledger.jobs.run("2 + 3", "s1")
    prove_holds_nothing(settings_for(other_store))


# --- where a throwaway cluster lives (pure) ----------------------------------------------------


def test_a_cluster_lives_in_memory_when_there_is_room_for_every_workers(tmp_path: Path) -> None:
    assert cluster_parent(tmp_path, {"PYTEST_XDIST_WORKER_COUNT": "2"}, room=1024) == tmp_path
    assert cluster_parent(tmp_path, {}, room=1024) == tmp_path


def test_a_cluster_lives_in_the_temporary_directory_otherwise(tmp_path: Path) -> None:
    assert cluster_parent(tmp_path / "absent", {}, room=1024) is None
    workers = str(2 * (1 << 60) // MEMORY_PER_CLUSTER)  # room for them: two exbibytes
    assert cluster_parent(tmp_path, {"PYTEST_XDIST_WORKER_COUNT": workers}) is None
