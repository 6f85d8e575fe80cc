"""Every job records the rules it was recorded under (seed 000 sections 3 and 5): the serializer
and its numeric rules, and each id generator with its seed. On SQLite and PostgreSQL, through
the use cases ``mace run`` and ``mace ingest`` call."""

from __future__ import annotations

from typing import Any

import orjson

from domain.run_file import parse_run
from infrastructure.application.ledger import Ledger

NUMERIC = {
    "precision": 9,
    "epsilon": "1e-9",
    "rounding": "half_even",
    "floats": "shortest_round_trip",
    "negative_zero": "written_as_0.0",
    "non_finite": "refused",
    "integers": "signed_64_bit",
    "unicode": "not_normalised",
    "keys": "sorted_by_code_point",
}
DERIVED = {
    "function": "hmac_sha256(key=seed, msg=namespace:payload:counter)",
    "seed": "job_seed",
    "namespace": "job",
}


def started(ledger: Ledger, job_id: str) -> dict[str, Any]:
    first = ledger.jobs.stream(job_id)[0]
    assert first["event_type"] == "JobStarted"
    payload = first["payload"]
    assert isinstance(payload, dict)
    return payload


def test_a_job_run_here_records_its_serializer_numeric_rules_and_id_generators(
    ledger: Ledger,
) -> None:
    provenance = started(ledger, ledger.jobs.run("2 + 3", "p1").job_id)["provenance"]
    assert provenance == {
        "serializer": "mace-canonical-json/1",
        "numeric": NUMERIC,
        "id_generators": {
            "job_id": DERIVED,
            "event_id": {
                "function": "sha256(job_seed:sequence_index:event_type)",
                "seed": "job_seed",
            },
            "wm_id": {"function": "sha256(job_seed:wm_counter)", "seed": "job_seed"},
            "snapshot_id": {
                "function": "sha256(config_hash:schema_version:seed_namespace)",
                "seed": "each snapshot's seed_namespace (its generator metadata)",
            },
        },
    }


def test_a_named_job_and_an_ingested_run_say_how_their_ids_came_about(ledger: Ledger) -> None:
    ledger.jobs.run("2 + 3", "p1", job_id="mine")
    generators = started(ledger, "mine")["provenance"]["id_generators"]
    assert generators["job_id"] == {"function": "named by the caller"}

    lines = [
        {"type": "RunStarted", "seed": "r1", "input": "look it up"},
        {"type": "RunCompleted", "final_output": "done"},
    ]
    log, _ = ledger.run_imports.record_once(parse_run(orjson.dumps(line) for line in lines))
    provenance = started(ledger, log.job_id)["provenance"]
    assert (provenance["serializer"], provenance["numeric"]) == ("mace-canonical-json/1", NUMERIC)
    assert provenance["id_generators"]["job_id"] == DERIVED
