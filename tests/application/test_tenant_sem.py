"""Stage-0 semantic memory (SEM) belongs to a tenant, on SQLite and PostgreSQL.

The attack: tenant ``acme`` runs "my favorite color is blue" for user ``u1``; tenant ``beta``
asks "what is my favorite color" for its own ``u1`` and must not hear "blue"; beta's "my
favorite color is red" must not change acme's answer. Through ``mace run --tenant``/``mace sem
--tenant``, through HTTP (the token's tenant), through replay (the job's own tenant's memory,
as it saw it) and bundles. The default tenant keeps the stream names SEM always had, so every
entry stored before is the default tenant's, byte for byte.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.api_support import Api, assert_error
from support.cli_output import assert_usage_error, canonical_line, event_count
from support.ledger_fixtures import RawTable, run
from support.replay_cli import act, replay_json

from domain.governance import Actor
from domain.job import DEFAULT_TENANT, CaptureMode
from domain.naming import aggregate_id
from domain.replay_access import ReplayMode
from domain.sem import SemEntry, SemKeyError, validate_key
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.bundles.export import export_bundle
from infrastructure.storage.settings import Settings
from projections.job_summaries import run_report

KEY = "user/person/u1/favorite_color"
BLUE = "Your favorite color is blue."
RED = "Your favorite color is red."
UNKNOWN = "I don\u2019t have this information stored yet."
ANA = Actor.of("ana", ["admin", "auditor"])


def answer(capsys: pytest.CaptureFixture[str], text: str, seed: str, *options: str) -> Any:
    """``mace run TEXT --user u1 [--tenant T] [--capture MODE] --json``: the recorded report."""
    code, out, err = run(capsys, "run", text, "--seed", seed, "--user", "u1", *options, "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def sem_get(capsys: pytest.CaptureFixture[str], *tenant: str) -> Any:
    code, out, err = run(capsys, "sem", "get", KEY, *tenant, "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def stored_state(entry: SemEntry) -> dict[str, Any]:
    (created,) = entry.collect_events()
    assert isinstance(created, SemEntry.Stored)
    return created.model_dump(mode="json")


# --- naming -------------------------------------------------------------------------------------


def test_the_default_tenant_keeps_the_names_sem_always_had() -> None:
    assert SemEntry.id_in(DEFAULT_TENANT, KEY) == aggregate_id(f"sem:{KEY}")
    assert SemEntry.id_in(DEFAULT_TENANT, KEY) == SemEntry.id_for(KEY)


def test_another_tenants_entry_is_never_a_default_key_or_another_tenants() -> None:
    tenants = ("default", "acme", "beta", "acme.beta", "a-b")
    assert len({SemEntry.id_in(tenant, KEY) for tenant in tenants}) == 5
    assert SemEntry.id_in("acme", KEY) == aggregate_id(f"sem:acme|{KEY}")
    # No default-tenant key can spell another tenant's name: S1 allows no "|" in a key.
    with pytest.raises(SemKeyError, match="rule S2"):
        validate_key(f"acme|{KEY}")


def test_a_tenants_entry_records_its_tenant_and_its_clock_follows_its_name() -> None:
    default = SemEntry.first_write(DEFAULT_TENANT, KEY, "blue", "t")
    acme = SemEntry.first_write("acme", KEY, "blue", "t")
    assert (default.clock_seed, acme.clock_seed) == (f"sem:{KEY}", f"sem:acme|{KEY}")
    assert default.read().last_updated != acme.read().last_updated
    default_stored, acme_stored = (stored_state(e) for e in (default, acme))
    # The default tenant's event is what it always was: no tenant field at all.
    assert "tenant" not in default_stored
    assert acme_stored["tenant"] == "acme"


# --- the acme/beta scenario through the CLI ------------------------------------------------------


def test_cli_sem_is_scoped_by_tenant(cli_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    acme, beta = ("--tenant", "acme"), ("--tenant", "beta")
    assert answer(capsys, "my favorite color is blue", "s1", *acme)["sem_writes"][0]["key"] == KEY

    asked = answer(capsys, "what is my favorite color", "s2", *beta)
    assert asked["final_output"] == UNKNOWN
    assert asked["sem_reads"] == [
        {"exists": False, "key": KEY, "last_updated": None, "value": None}
    ]

    answer(capsys, "my favorite color is red", "s3", *beta)
    assert answer(capsys, "what is my favorite color", "s4", *acme)["final_output"] == BLUE
    assert answer(capsys, "what is my favorite color", "s5", *beta)["final_output"] == RED
    # The default tenant (no --tenant) saw none of it.
    assert answer(capsys, "what is my favorite color", "s6")["final_output"] == UNKNOWN

    assert sem_get(capsys, *acme)["value"] == "blue"
    assert sem_get(capsys, *beta)["value"] == "red"
    assert sem_get(capsys)["exists"] is False
    assert sem_get(capsys, "--tenant", "default")["exists"] is False


def test_cli_sem_put_writes_one_tenants_fact(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "sem", "put", KEY, '"green"', "--tenant", "beta")
    assert (code, err) == (0, "")
    assert answer(capsys, "what is my favorite color", "s1", "--tenant", "beta")[
        "final_output"
    ] == ("Your favorite color is green.")
    assert answer(capsys, "what is my favorite color", "s2", "--tenant", "acme")[
        "final_output"
    ] == (UNKNOWN)
    assert sem_get(capsys, "--tenant", "acme")["exists"] is False


@pytest.mark.parametrize(
    "argv",
    [
        ["sem", "put", KEY, '"blue"', "--tenant", "Acme"],
        ["sem", "put", KEY, '"blue"', "--tenant", ""],
        ["sem", "get", KEY, "--tenant", "acme|beta"],
        ["run", "my favorite color is blue", "--seed", "s1", "--tenant", "-acme"],
    ],
    ids=["uppercase", "empty", "separator", "leading-dash"],
)
def test_a_bad_tenant_is_a_usage_error_and_writes_nothing(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    run(capsys, "sem", "put", KEY, '"blue"', "--tenant", "acme")
    before = event_count(cli_env)
    code, out, err = run(capsys, *argv)
    assert_usage_error(code, out, err, "--tenant")
    assert event_count(cli_env) == before


def test_the_default_tenant_reads_entries_stored_before_sem_was_scoped(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """An entry stored under ``sem:<key>`` (as every entry was before) is the default tenant's."""
    code, _, err = run(capsys, "sem", "put", KEY, '"teal"')
    assert (code, err) == (0, "")
    stream = aggregate_id(f"sem:{KEY}")
    (row,) = RawTable(cli_env).rows(stream)
    assert b'"tenant"' not in row[2]
    for tenant in ([], ["--tenant", "default"]):
        assert answer(capsys, "what is my favorite color", f"s-{len(tenant)}", *tenant)[
            "final_output"
        ] == ("Your favorite color is teal.")
    assert answer(capsys, "what is my favorite color", "s9", "--tenant", "acme")[
        "final_output"
    ] == (UNKNOWN)


# --- replay and bundles read the job's own tenant's memory ---------------------------------------


def test_a_beta_jobs_production_replay_reads_betas_memory(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    beta = ("--tenant", "beta")
    answer(capsys, "my favorite color is red", "s1", *beta)
    # full_io: a production replay needs the job's agent responses.
    asked = answer(capsys, "what is my favorite color", "s2", *beta, "--capture", "full_io")
    assert asked["final_output"] == RED
    # Later writes, in beta and in acme under the same key, are not what the job saw.
    answer(capsys, "my favorite color is blue", "s3", "--tenant", "acme")
    answer(capsys, "my favorite color is green", "s4", *beta)

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, asked["job_id"], "--mode", "production", *beta)
    assert (code, err) == (0, ""), report
    assert (report["ok"], report["authoritative"]) == (True, True)

    path = tmp_path / "beta.json"
    code, _, err = run(
        capsys, "export", asked["job_id"], *beta, "-o", str(path), "--include-full-io"
    )
    assert (code, err) == (0, ""), err
    manifest = orjson.loads(path.read_bytes())["manifest"]
    sem = [s["name"] for s in manifest["streams"] if s["role"] == "sem"]
    assert sem == [f"sem:beta|{KEY}"]
    code, out, err = run(capsys, "replay", "--bundle", str(path), "--mode", "production", "--json")
    assert (code, err) == (0, ""), out
    assert canonical_line(out)["ok"] is True


def test_replay_reads_the_jobs_tenant_not_the_default_one(ledger: Ledger) -> None:
    """A beta job read beta's fact; its replay folds beta's entry, never the default tenant's."""
    ledger.sem.put(KEY, "red", tenant="beta")
    ledger.sem.put(KEY, "blue")
    full_io = CaptureMode.FULL_IO  # a production replay needs the job's agent responses
    log = ledger.jobs.run(
        "what is my favorite color", "s1", user="u1", tenant="beta", capture_mode=full_io
    )
    (read,) = run_report(log)["sem_reads"]
    beta = ledger.sem.get(KEY, tenant="beta")[1]
    assert (read["value"], read["last_updated"]) == ("red", beta.last_updated)
    result = ledger.replays.run(log.job_id, ReplayMode.PRODUCTION, ANA, tenant="beta")
    assert (result.outcome.ok, result.outcome.authoritative) == (True, True)


# --- through HTTP: the token's tenant ------------------------------------------------------------


def http_answer(api: Api, text: str, seed: str, who: str, **extra: Any) -> Any:
    response = api.post("/v1/jobs", {"input": text, "seed": seed, "user": "u1", **extra}, who)
    assert response.status_code == 201, response.content
    return response.json()


def test_http_sem_is_the_tokens_tenants(api: Api) -> None:
    http_answer(api, "my favorite color is blue", "s1", "operator")  # acme
    asked = http_answer(api, "what is my favorite color", "s2", "beta_operator")
    assert asked["final_output"] == UNKNOWN
    http_answer(api, "my favorite color is red", "s3", "beta_operator")
    # full_io: both reads are replayed in production below.
    mine = http_answer(api, "what is my favorite color", "s4", "operator", capture_mode="full_io")
    assert mine["final_output"] == BLUE
    theirs = http_answer(
        api, "what is my favorite color", "s5", "beta_operator", capture_mode="full_io"
    )
    assert theirs["final_output"] == RED
    assert api.ledger.sem.get(KEY, tenant="acme")[1].value == "blue"
    assert api.ledger.sem.get(KEY, tenant="beta")[1].value == "red"
    assert api.ledger.sem.get(KEY)[1].exists is False

    # Each tenant's production replay of its read reproduces its own answer.
    for job, who in ((mine, "admin_auditor"), (theirs, "beta_admin_auditor")):
        replayed = api.replay(job["job_id"], "production", who).json()
        assert (replayed["ok"], replayed["authoritative"]) == (True, True), replayed


def test_http_refused_job_writes_no_sem(api: Api) -> None:
    before = api.position()
    refused = api.post(
        "/v1/jobs",
        {"input": "my favorite color is blue", "seed": "s1", "user": "u1", "job_id": "bad id"},
        "beta_operator",
    )
    assert_error(refused, 422, "INVALID_INPUT", field="body.job_id")
    assert api.position() == before
    assert api.ledger.sem.get(KEY, tenant="beta")[1].exists is False


def test_a_redacted_export_leaves_out_a_tenants_denied_sem_entry(ledger: Ledger) -> None:
    """The SEM stream of a denied attribute is left out of a safe export whatever its tenant."""
    secret = "zq81xvpii"
    ledger.sem.put(KEY, secret, tenant="beta")
    privacy = Snapshot.declare("privacy", {"deny_sem_attributes": ["favorite_color"]})
    ledger.snapshots.put(privacy)
    overrides = {"privacy": privacy.snapshot_id}
    log = ledger.jobs.run(
        "what is my favorite color", "s1", user="u1", tenant="beta", snapshot_ids=overrides
    )
    assert secret in str(run_report(log)["sem_reads"])  # so the search below can fail

    bundle = export_bundle(ledger, log.job_id, tenant="beta", redacted=True)
    assert secret.encode() not in bundle
    manifest = orjson.loads(bundle)["manifest"]
    assert [s["name"] for s in manifest["redaction"]["omitted_streams"]] == [f"sem:beta|{KEY}"]
    assert all(s["role"] != "sem" for s in manifest["streams"])
