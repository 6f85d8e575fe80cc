"""What a ledger use case raises when the request, not the store, is at fault."""

from __future__ import annotations

# How an entry point (``mace`` and the commands beside the service and the tools) ends:
# 0 success; 1 the operation ran and failed; 2 bad usage or input, nothing written.
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # what a shell reports for a command Ctrl-C stopped (128 + SIGINT)


class UsageError(Exception):
    """Bad usage or input: exit 2, nothing written."""


class NotFoundError(LookupError):
    """The named job, snapshot or other record is not in the ledger."""


class ConflictError(ValueError):
    """The record already exists, or changed underneath this command."""


class SnapshotError(ValueError):
    """A snapshot named for a job is absent, of the wrong kind, or unusable for its kind."""


class StoreBusyError(Exception):
    """Other writers kept winning the race for the same records: nothing was written; try again."""
