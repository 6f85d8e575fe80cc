"""The use cases: what a user can do with the ledger, one module per concern.

Jobs, runs recorded from outside, snapshots, SEM, governance, replays, tenant memories, policy
bundles, receipts and read models. Each is a class that receives the store and the peer use
cases it needs by its constructor; `Ledger` (``application/ledger.py``) is the composition root
that builds them once and offers them as ``ledger.jobs``, ``ledger.replays``, ... The HTTP API,
the command line and the tooling call these and nothing below them; nothing here knows them.
"""
