"""Whole-ledger verification: the one-pass scan of the log, every stream's MACs, versions and
seals, and the checkpoint chain checked against the log it signed."""
