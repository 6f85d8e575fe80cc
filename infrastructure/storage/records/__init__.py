"""The signed record: its one envelope parser, the signing mapper, the verifying event store, the
repository that reads aggregates through it, and stream integrity (versions, MACs, seals)."""
