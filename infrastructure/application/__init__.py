"""The use cases: what a user can do with the ledger, one module per concern.

Jobs, runs recorded from outside (imported whole, uploaded in batches, or from the Python API),
snapshots, SEM, governance, replays, tenant memories, policy bundles, receipts, read models,
checkpoints, the store's status and its signed records. Each is a class that receives the store
and the peer use cases it needs by its constructor; `Ledger` (``application/ledger.py``) is the
composition root that builds them once and offers them as ``ledger.jobs``, ``ledger.replays``,
``ledger.checkpoints``, ... Beside them, what every entry point answers through: the settings
(``settings.py``), the one error table (``errors.py``) and the bearer tokens (``tokens.py``).

The HTTP API, the command line, the tooling and the bundles call these and nothing below them
(an import-linter contract); nothing here knows them.
"""
