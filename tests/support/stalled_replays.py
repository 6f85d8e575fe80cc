"""A replay stalled in a process of its own once its request is stored (`stalled_replay.py`),
for tests of what readers make of a replay still running, or killed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STALLED_REPLAY = Path(__file__).parent / "stalled_replay.py"


@contextmanager
def stalled_replay(tenant: str, job_id: str) -> Iterator[subprocess.Popen[bytes]]:
    """The replaying process, once it says its request is stored; it holds its lease until
    killed (or the block ends and its pipes close)."""
    with subprocess.Popen(
        [sys.executable, str(STALLED_REPLAY), tenant, job_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=os.environ | {"MACE_ACTOR": "kim", "MACE_ROLES": "auditor"},
    ) as process:
        assert process.stdout is not None
        assert process.stdout.readline() == b"requested\n"
        yield process
