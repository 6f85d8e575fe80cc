"""Stage-0 rules (seed 004): router, agents and replies, all pure and deterministic."""
