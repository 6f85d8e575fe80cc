"""Storage adapters, and nothing else: where and how the ledger's bytes are kept and checked.

In rooms: ``keys/`` (the keyring, the checkpoint key, the receipt signer, development key files),
``records/`` (the signed record and its one envelope parser, the signing mapper, the verifying
event store, the repository every aggregate is read through, stream integrity, key checks),
``backends/`` (SQLite and PostgreSQL connections and recorders, the schema, replay leases),
``checkpoints/`` (the signed checkpoint chain, its tables, proofs and the head check),
``verification/`` (the whole-ledger scan and checks) and ``read_models/`` (their tables). Beside
them: the settings (``MACE_STORE``), the ops clock, and `LedgerStore` (``store.py``), the
eventsourcing Application that wires them together, plumbing only.

No use case lives here, and nothing above the application layer reaches in: a module of this
package never decides what a job, a replay or a receipt means, it stores and proves bytes.
"""
