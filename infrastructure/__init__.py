"""How MACE Ledger is stored, signed and served, in four rooms that import downwards only.

``storage`` (adapters: store settings, keys, the signed record, the event store, integrity) is
below ``application`` (the use cases, one class per concern, assembled as `Ledger`), which is below
``bundles`` (run bundles: export, import, replay anywhere); the entry points ``api`` (HTTP),
``cli`` (``mace``) and ``tooling`` (bench, demo, load test) sit on top and never import each other.
``lint-imports`` (contracts in ``pyproject.toml``) checks this in CI.
"""
