"""``mace follow`` keeps the read models current on both stores, the embedded SQLite default too.

It says where it starts once it has caught up, and each position it reaches as commits arrive,
so an operator (and this test) sees it work without waiting on a clock.
"""

from __future__ import annotations

import pytest
from support.ledger_fixtures import interrupted, mace_to_interrupt, run, store_of

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings


def test_follow_applies_each_commit_and_stops_on_ctrl_c(
    cli_env: Settings, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A store as CLI writes leave it: a job recorded, checkpointed as the command closed.
    assert run(capsys, "run", "what is 2 + 3?", "--seed", "before")[0] == 0
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        head = store_of(ledger).recorder.max_notification_id() or 0
    with mace_to_interrupt(store_url, "follow") as follower:
        assert follower.stderr is not None
        where = store_url if store_url.startswith("sqlite") else "postgresql://"
        first = follower.stderr.readline()
        assert first.startswith(f"following {where}"), first
        assert first.endswith(f" from notification {head}; Ctrl-C stops\n"), first

        # One commit (a CLI write would add its checkpoint in a second, perhaps seen apart).
        before = head
        with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
            ledger.jobs.run("what is 3 + 4?", "after")
            head = store_of(ledger).recorder.max_notification_id() or 0
        assert follower.stderr.readline() == f"read models current to notification {head}\n"
        with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
            # The follower applied the job's events (reading the position catches nothing up).
            assert before < ledger.read_models.position() <= head

        assert interrupted(follower) == (130, "", "mace: interrupted\n")
