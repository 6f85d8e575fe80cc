"""Whether a whole-ledger check may run part of its work in a forked child.

A fork copies only the thread that calls it: a lock another thread held at that instant stays
held in the child for good (a connection pool's threads hold libpq's and OpenSSL's). So a check
forks only where this process runs one thread (the ``mace`` command on SQLite; PostgreSQL's
pool runs threads); anywhere else its parts start afresh (`mace audit`'s workers:
`infrastructure.application.audit_workers`) or run in this process (`verify --all`'s row checks:
`row_checks`).
"""

from __future__ import annotations

import os
import threading


def may_fork() -> bool:
    """Whether a pass can run in a forked child: the platform forks and no other thread runs."""
    return hasattr(os, "fork") and threading.active_count() == 1
