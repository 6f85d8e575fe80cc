"""The ledger's configuration, as the entry points take it: read from the environment
(``MACE_*``) and handed to `Ledger.open`. Parsing it is storage's
(`infrastructure.storage.settings`: the one URL that chooses where the ledger lives); the entry
points reach it only here."""

from infrastructure.storage.settings import (
    DEFAULT_STORE,
    PostgresStore,
    Settings,
    SettingsError,
    SQLiteStore,
    Store,
)

__all__ = ["DEFAULT_STORE", "PostgresStore", "SQLiteStore", "Settings", "SettingsError", "Store"]
