"""Storage adapters, and nothing else: where and how the ledger's bytes are kept and checked.

Store settings (``MACE_STORE``) and the connection to SQLite or PostgreSQL; the keyring and its
key checks; the HTTP service's bearer-tokens file; the signed record (the one parser of the
stored format), the signing mapper, the verifying event store and repository; stream, seal and
witness integrity; the whole-store scan and verification; the read-model tables;
`LedgerStore` (``store.py``), the eventsourcing Application that wires them together and offers
save, typed reads and retries; and the one error table (``error_table.py``: every error's code,
HTTP status and exit code), lowest where all errors are seen, so that ``mace`` answers by it
without loading a use case. No use case lives here: a module of this package never decides
what a job, a replay or a receipt means, it stores and proves bytes.
"""
