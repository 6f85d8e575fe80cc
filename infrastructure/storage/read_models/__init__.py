"""The read models' tables and tracking, on SQLite and PostgreSQL, and an in-memory twin for a
bundle's ledger."""
