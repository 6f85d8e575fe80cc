"""The rules a job is recorded under, recorded with it (seed 000 sections 3 and 5).

A replay re-computes bytes, digests and ids and compares them with the record: that only means
something if it computes them by the rules the job was recorded by. So every job's start names
its serializer and numeric rules and the id generators it used (function and seed), and a replay
refuses a job recorded under rules this ledger does not implement, instead of reporting
divergences that are only a change of rules.
"""

from __future__ import annotations

from typing import Any, Final

from domain.canonical import NUMERIC_PRECISION
from domain.determinism import ID_GENERATORS

SERIALIZER: Final = "mace-canonical-json/1"
"""The one canonical serializer (`domain.canonical`), by name and version."""

NUMERIC_RULES: Final[dict[str, Any]] = {
    "precision": NUMERIC_PRECISION,
    "epsilon": "1e-9",
    "rounding": "half_even",
    "floats": "shortest_round_trip",
    "negative_zero": "written_as_0.0",
    "non_finite": "refused",
    "integers": "signed_64_bit",
    "unicode": "not_normalised",
    "keys": "sorted_by_code_point",
}
NAMED_BY_CALLER: Final = "named by the caller"
JOB_ID_NAMESPACE: Final = "job"
"""The `derive_id` namespace of a job id the ledger derives (seed 004 D3)."""
FORK_ID: Final = "fork-sha256(tenant,job_id,iteration,changes,input)[:40]"
"""How a fork's job id is derived (`domain.fork.fork_job_id`)."""


def job_provenance(
    job_id_derived: bool, forked_from: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The rules a job started now is recorded under; ``forked_from``: a fork's lineage
    (`domain.fork`), whose id the ledger derived from it."""
    job_id: dict[str, str] = (
        {"function": ID_GENERATORS["derive_id"], "seed": "job_seed", "namespace": JOB_ID_NAMESPACE}
        if job_id_derived
        else {"function": NAMED_BY_CALLER}
    )
    if forked_from is not None:
        job_id = {"function": FORK_ID}
    lineage = {} if forked_from is None else {"forked_from": forked_from}
    return lineage | {
        "serializer": SERIALIZER,
        "numeric": dict(NUMERIC_RULES),
        "id_generators": {
            "job_id": job_id,
            "event_id": {"function": ID_GENERATORS["event_id"], "seed": "job_seed"},
            "wm_id": {"function": ID_GENERATORS["wm_id"], "seed": "job_seed"},
            "snapshot_id": {
                "function": ID_GENERATORS["snapshot_id"],
                "seed": "each snapshot's seed_namespace (its generator metadata)",
            },
        },
    }


_KNOWN_FUNCTIONS: Final = frozenset(ID_GENERATORS.values()) | {NAMED_BY_CALLER, FORK_ID}


def unimplemented(provenance: dict[str, Any]) -> str | None:
    """What in a job's recorded rules this ledger does not implement; None when nothing is."""
    if provenance.get("serializer") != SERIALIZER:
        return f"serializer {provenance.get('serializer')!r} (this ledger writes {SERIALIZER!r})"
    numeric = provenance.get("numeric")
    if numeric != NUMERIC_RULES:
        return f"numeric rules {numeric!r} (this ledger's: {NUMERIC_RULES!r})"
    generators = provenance.get("id_generators")
    if not isinstance(generators, dict):
        return "no id generators named"
    for name, generator in sorted(generators.items()):
        function = generator.get("function") if isinstance(generator, dict) else None
        if function not in _KNOWN_FUNCTIONS:
            return f"id generator {name}: {function!r}"
    return None
