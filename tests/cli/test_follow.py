"""``mace follow`` keeps the read models current on both stores, the embedded SQLite default too.

It says where it starts once it has caught up, and each position it reaches as commits arrive,
so an operator (and this test) sees it work without waiting on a clock.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest
from support.ledger_fixtures import MACE_WITH_CTRL_C, run, store_of, subprocess_env

from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings

GUARD_SECONDS = 120.0
"""Far beyond what a catch-up takes: a follower silent that long is killed, and the test fails."""


def test_follow_applies_each_commit_and_stops_on_ctrl_c(
    cli_env: Settings, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A store as CLI writes leave it: a job recorded, checkpointed as the command closed.
    assert run(capsys, "run", "what is 2 + 3?", "--seed", "before")[0] == 0
    with Ledger.open(cli_env, checkpoint_on_close=False) as ledger:
        head = store_of(ledger).recorder.max_notification_id() or 0
    follower = subprocess.Popen(
        [sys.executable, "-c", MACE_WITH_CTRL_C, "follow"],
        env=subprocess_env(store_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    guard = threading.Timer(GUARD_SECONDS, follower.kill)
    guard.start()
    try:
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

        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=GUARD_SECONDS)
    finally:
        guard.cancel()
        follower.kill()
        follower.communicate()
    assert (follower.returncode, out, err) == (130, "", "mace: interrupted\n")
