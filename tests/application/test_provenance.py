"""Every job records the rules it was recorded under (seed 000 sections 3 and 5): the serializer
and its numeric rules, and each id generator with its seed. On SQLite and PostgreSQL, through
``mace run`` and ``mace ingest``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.ledger_fixtures import run

from infrastructure.storage.settings import Settings

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


def started(capsys: pytest.CaptureFixture[str], job_id: str) -> dict[str, Any]:
    code, out, _ = run(capsys, "events", job_id, "--json")
    assert code == 0
    first = orjson.loads(out.splitlines()[0])
    assert first["event_type"] == "JobStarted"
    payload = first["payload"]
    assert isinstance(payload, dict)
    return payload


def test_a_job_run_here_records_its_serializer_numeric_rules_and_id_generators(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "run", "2 + 3", "--seed", "p1", "--json")
    assert code == 0
    provenance = started(capsys, orjson.loads(out)["job_id"])["provenance"]
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


def test_a_named_job_and_an_ingested_run_say_how_their_ids_came_about(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run(capsys, "run", "2 + 3", "--seed", "p1", "--job-id", "mine")[0] == 0
    generators = started(capsys, "mine")["provenance"]["id_generators"]
    assert generators["job_id"] == {"function": "named by the caller"}

    lines = [
        {"type": "RunStarted", "seed": "r1", "input": "look it up"},
        {"type": "RunCompleted", "final_output": "done"},
    ]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    code, out, err = run(capsys, "ingest", str(path), "--json")
    assert (code, err) == (0, "")
    provenance = started(capsys, orjson.loads(out)["job_id"])["provenance"]
    assert (provenance["serializer"], provenance["numeric"]) == ("mace-canonical-json/1", NUMERIC)
    assert provenance["id_generators"]["job_id"] == DERIVED
