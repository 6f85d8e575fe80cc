"""SQLite and PostgreSQL: connections, the ledger's recorders, the schema, replay leases, and the
tally of rows read and written."""
