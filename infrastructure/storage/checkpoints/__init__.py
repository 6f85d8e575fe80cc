"""Signed checkpoints: the chain of Ed25519-signed Merkle tree heads over the whole log, its
tables (leaves, heads), consistency and inclusion proofs, and the head check that holds every
stream read to the newest checkpoint."""
