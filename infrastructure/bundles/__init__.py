"""Run bundles: one signed file with everything a job's replay reads, and what is done with it.

The bundle format (``mace-bundle/3``), export (whole or redacted), the tlog-proofs that make a
bundle provable offline (and ``mace proof verify``, which checks them with no store), import into
another store byte for byte, replay straight from a bundle with no database, and the pytest
regression test ``mace export-test`` writes. Replay from a bundle goes through the replay use
case's public API, with its access rules, never a copy of them.
"""
