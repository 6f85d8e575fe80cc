"""The one tenancy rule: a tenant holds its own jobs, runs, receipts and memories, and no other's.

Ids are scoped by tenant in storage; where a record could still sit under a bare id (recorded
before ids were scoped), the tenant it records decides. Either way another tenant's record is
answered exactly as one that does not exist, ``NotFoundError("no job X")``, so that an id tells one
tenant nothing about another. Every use case that looks a record up by id asks here; the HTTP API
through FastAPI dependencies (`infrastructure.api.context`), the command line through the use
cases it calls with ``--tenant``.
"""

from __future__ import annotations

from domain.errors import NotFoundError


def holds(tenant: str, owner: str | None) -> bool:
    """Whether ``tenant`` holds a record recorded for ``owner`` (None: there is no record)."""
    return owner is not None and owner == tenant


def require_holder(tenant: str, owner: str | None, what: str) -> None:
    """`NotFoundError` ("no <what>") unless ``tenant`` holds the record, as if there were none."""
    if not holds(tenant, owner):
        raise NotFoundError(f"no {what}")
