"""Shared test helpers: stores, ledgers, the HTTP client, PostgreSQL, examples and attacks."""
