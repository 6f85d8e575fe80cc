"""A `mace`-like process that replays one job and stalls once its REPLAY_REQUEST is stored.

``python stalled_replay.py TENANT JOB_ID`` (store and keys from the environment, as for ``mace``):
it prints ``requested`` when the request is stored and the replay is about to run, then waits
for its standard input to close. A test kills it there with SIGKILL, mid-replay, at a known
point: no clock is involved.
"""

from __future__ import annotations

import sys
from typing import Any

from domain.governance import Actor
from domain.replay_access import ReplayMode
from infrastructure.application.ledger import Ledger
from infrastructure.application.replays import ReplayService
from infrastructure.storage.settings import Settings


def stall(self: ReplayService, source: Any, request: Any) -> Any:
    print("requested", flush=True)  # noqa: T201 - the test reads it from the pipe
    sys.stdin.read()
    raise SystemExit("stalled replay let go instead of being killed")


def main(tenant: str, job_id: str) -> None:
    ReplayService._run_replay = stall  # type: ignore[method-assign]
    with Ledger.open(Settings(), create=False) as ledger:
        ledger.replays.run(job_id, ReplayMode.AUDIT, Actor.of("kim", ["auditor"]), tenant=tenant)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
