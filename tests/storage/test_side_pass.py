"""A whole-ledger check forks a child only where no other thread runs: a lock another thread
held at the fork would stay held in the child for good."""

from __future__ import annotations

import threading

from infrastructure.storage.verification.side_pass import may_fork


def test_no_fork_while_another_thread_runs() -> None:
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not may_fork()
    finally:
        release.set()
        other.join()
