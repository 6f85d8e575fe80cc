"""Aggregate ids are UUIDv5 of stable names, so recording the same thing twice collides.

Creating `job:<job_id>` a second time is then an integrity conflict in the event log rather than
a silent duplicate, and any process can compute where a job, snapshot or seal lives.
"""

from __future__ import annotations

from uuid import UUID, uuid5

# Fixed forever: changing it would move every aggregate of every existing ledger.
MACE_NAMESPACE = UUID("8f0e4c2a-6b1d-5e37-9a58-2d4c61f0b7e3")


def aggregate_id(stable_name: str) -> UUID:
    """The id of the aggregate with this stable name, e.g. ``job:42`` or ``snapshot:<sha256>``."""
    return uuid5(MACE_NAMESPACE, stable_name)


DEFAULT_TENANT = "default"
"""Whose job it is: jobs recorded without a tenant (the CLI, the Python API) belong here."""
TENANT_SEPARATOR = "|"
"""In no tenant name, job id, run id or SEM key: a scoped name splits back in exactly one way."""


def tenant_scoped(tenant: str, key: str) -> str:
    """A tenant's ``key`` as named among every tenant's: ids are scoped by tenant in storage.

    The default tenant's name is the key itself (every name recorded before tenants existed stays
    where it is); any other tenant's is ``<tenant>|<key>``. No valid key holds ``|``, so another
    tenant's name never collides with a default-tenant key, and the same key in two tenants names
    two different aggregates.
    """
    return key if tenant == DEFAULT_TENANT else f"{tenant}{TENANT_SEPARATOR}{key}"


def tenant_and_key(scoped: str) -> tuple[str, str]:
    """The tenant and key a `tenant_scoped` name was made from."""
    tenant, separator, key = scoped.partition(TENANT_SEPARATOR)
    return (tenant, key) if separator else (DEFAULT_TENANT, scoped)
