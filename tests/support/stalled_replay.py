"""A `mace`-like process that replays one job and stalls once its REPLAY_REQUEST is stored.

``python stalled_replay.py TENANT JOB_ID`` (store and keys from the environment, as for ``mace``):
it prints ``requested`` when the request is stored and the replay is about to run, then waits
on its standard input. A test kills it there with SIGKILL, mid-replay, at a known point (no
clock is involved), or writes ``go`` to let the replay run on and record its result.
"""

from __future__ import annotations

import sys
from typing import Any

from domain.governance import Actor
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayService
from infrastructure.storage.settings import Settings

RUN_REPLAY = ReplayService._run_replay


def stall(self: ReplayService, source: Any, request: Any) -> Any:
    print("requested", flush=True)  # noqa: T201 - the test reads it from the pipe
    if sys.stdin.readline() == "go\n":
        return RUN_REPLAY(self, source, request)
    raise SystemExit("stalled replay let go instead of being killed")


def main(tenant: str, job_id: str) -> None:
    ReplayService._run_replay = stall  # type: ignore[method-assign]
    with Ledger.open(Settings(), create=False) as ledger:
        ledger.replays.run(job_id, ReplayMode.AUDIT, Actor.of("kim", ["auditor"]), tenant=tenant)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
