"""The ops clock: wall-clock time for human actions and replay time caps, never for decisions.

Governance events carry when a person acted (``recorded_at``); a replay stops when it has run
longer than its governance snapshot allows. Both are operations facts. Nothing a job decides, and
nothing a replay compares, is read from here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime


def recorded_at() -> str:
    """Now, as ISO-8601 UTC to the second: when a person (or their replay request) acted."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def stopwatch() -> Callable[[], float]:
    """A function giving the seconds elapsed since this call, by a monotonic clock."""
    started = time.monotonic()
    return lambda: time.monotonic() - started
