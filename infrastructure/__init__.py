"""How MACE Ledger is stored, signed and served: eventsourcing wiring, keys, CLI."""
