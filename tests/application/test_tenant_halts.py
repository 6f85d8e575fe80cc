"""A halt belongs to the tenant that set it, on SQLite and PostgreSQL, over HTTP and the CLI.

The attack: an auditor of tenant ``acme`` halts a snapshot every tenant's jobs declare. Beta's
replays must go on, and beta's governance log and dashboard must not show acme's actor or
reason; acme's replays stop with FORCE_HALT_REPLAY until acme's council clears it (beta's
council cannot). A halt for every tenant exists only for a ``store_operator``; halts recorded
before halts were scoped (``snapshot:<id>``, no tenant) stay in force for every tenant.
"""

from __future__ import annotations

from typing import Any

import pytest
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import get_topic
from support.api_support import CALLERS, Api, assert_error, auth
from support.cli_output import assert_failure_line, assert_usage_error, canonical_line
from support.ledger_fixtures import RawTable, run, store_of
from support.replay_cli import ROUTER_ID, act, replay_json, written_state

from domain.canonical import canonical_json
from domain.governance import Actor, Governance, HaltCause
from domain.replay_access import ReplayMode
from domain.snapshot import Snapshot
from infrastructure.application.ledger import Ledger
from infrastructure.storage.records.signed_record import sign_record
from infrastructure.storage.settings import Settings
from projections.read_model_rows import HALTED_SNAPSHOTS

REASON = "acme key leaked"
ACME_SCOPE = f"tenant-snapshot:acme|{ROUTER_ID}"
OWN_HALTS = f"tenant-snapshot:{ROUTER_ID}"
"""A tenant's own halts, as the tenant sees them in its jobs' governance logs."""
STORE_SCOPE = f"snapshot:{ROUTER_ID}"
ACME_HALTED = (
    f"router snapshot {ROUTER_ID} is halted (SECURITY_INCIDENT: {REASON}) until the council"
    " appends FORCE_HALT_CLEAR"
)
ANA = Actor.of("ana", ["admin", "auditor"])


def dashboard(api: Api, who: str) -> str:
    with api.unchecked() as client:
        page = client.get("/dashboard", headers=auth(who))
    assert page.status_code == 200, page.text
    return str(page.text)


def replay_error(api: Api, job_id: str, who: str) -> Any:
    body = api.replay(job_id, "audit", who).json()
    return body["error"]


# --- over HTTP ----------------------------------------------------------------------------------


def test_an_acme_auditors_halt_stops_acme_only(api: Api) -> None:
    acme_job = api.new_job(who="operator")
    beta_job = api.new_job("3 + 4", who="beta_operator")
    halted = api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {"reason": REASON}, "auditor")
    assert halted.status_code == 201
    assert halted.json()["tenant"] == "acme"

    # Beta: not halted, and nothing of acme's halt in its log or on its dashboard.
    assert replay_error(api, beta_job, "beta_admin_auditor") is None
    beta_log = api.governance(beta_job, "beta_operator")
    assert [e for e in beta_log if e["event"].startswith("FORCE_HALT")] == []
    assert all(e["scope"] not in {ACME_SCOPE, OWN_HALTS} for e in beta_log)
    assert REASON not in str(beta_log) and CALLERS["auditor"].actor_id not in str(beta_log)
    beta_page = dashboard(api, "beta_operator")
    assert REASON not in beta_page and ROUTER_ID not in beta_page.split('id="halted"')[1]
    assert "No snapshot is halted." in beta_page

    # Acme: halted, in its log, on its dashboard and in the halted-snapshots read model.
    assert replay_error(api, acme_job, "admin_auditor") == {
        "code": "FORCE_HALT_REPLAY",
        "message": ACME_HALTED,
    }
    acme_log = [e for e in api.governance(acme_job) if e["scope"] == OWN_HALTS]
    assert [(e["event"], e.get("actor_id"), e.get("reason")) for e in acme_log] == [
        ("GOVERNANCE_OPENED", None, None),
        ("FORCE_HALT_REPLAY", "aude", REASON),
    ]
    assert acme_log[1]["tenant"] == "acme"
    assert REASON in dashboard(api, "operator")
    (row,) = api.ledger.read_models.rows(HALTED_SNAPSHOTS)
    assert (row["snapshot_id"], row["tenant"], row["actor_id"]) == (ROUTER_ID, "acme", "aude")

    # Beta's council cannot clear acme's halt (there is none in beta): 422, nothing written.
    before = api.position()
    assert_error(
        api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, "beta_council"),
        422,
        "INVALID_INPUT",
        f"snapshot {ROUTER_ID} is not halted in scope tenant-snapshot:beta|{ROUTER_ID}",
    )
    assert api.position() == before
    assert replay_error(api, acme_job, "admin_auditor")["code"] == "FORCE_HALT_REPLAY"

    # Beta may halt the same snapshot for itself: its own halt, independent of acme's.
    assert api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {"reason": "b"}, "beta_operator").json()[
        "tenant"
    ] == ("beta")
    assert replay_error(api, beta_job, "beta_admin_auditor")["code"] == "FORCE_HALT_REPLAY"

    # Acme's council clears acme's halt; beta's stays.
    cleared = api.post(f"/v1/snapshots/{ROUTER_ID}/clear", None, "council")
    assert cleared.status_code == 200 and cleared.json()["tenant"] == "acme"
    assert replay_error(api, acme_job, "admin_auditor") is None
    assert replay_error(api, beta_job, "beta_admin_auditor")["code"] == "FORCE_HALT_REPLAY"
    (row,) = api.ledger.read_models.rows(HALTED_SNAPSHOTS)
    assert (row["tenant"], row["reason"]) == ("beta", "b")


def test_only_a_store_operator_halts_for_every_tenant(api: Api) -> None:
    acme_job = api.new_job(who="operator")
    beta_job = api.new_job("3 + 4", who="beta_operator")
    before = api.position()
    ask = {"reason": "store key leaked", "store_wide": True}
    for who in ("auditor", "admin_auditor", "council", "beta_operator"):
        caller = CALLERS[who]
        assert_error(
            api.post(f"/v1/snapshots/{ROUTER_ID}/halt", ask, who),
            403,
            "ACCESS_DENIED",
            "only the store_operator role may halt a snapshot for every tenant;"
            f" {caller.actor_id} holds {list(caller.roles)}",
        )
    assert_error(
        api.post(f"/v1/snapshots/{ROUTER_ID}/halt", {**ask, "store_wide": "yes"}, "auditor"),
        422,
        "INVALID_INPUT",
        field="body.store_wide",
    )
    assert api.position() == before

    halted = api.post(f"/v1/snapshots/{ROUTER_ID}/halt", ask, "store_operator")
    assert halted.status_code == 201 and halted.json()["tenant"] is None
    store_wide = (
        f"router snapshot {ROUTER_ID} is halted (store-wide halt: SECURITY_INCIDENT: store key"
        " leaked) until the council appends FORCE_HALT_CLEAR"
    )
    for job, who in ((acme_job, "admin_auditor"), (beta_job, "beta_admin_auditor")):
        assert replay_error(api, job, who) == {"code": "FORCE_HALT_REPLAY", "message": store_wide}
    for job, who in ((acme_job, "operator"), (beta_job, "beta_operator")):
        assert STORE_SCOPE in {e["scope"] for e in api.governance(job, who)}
        assert "store key leaked" in dashboard(api, who)

    # A tenant's council cannot lift it; a council member who is a store operator can.
    before = api.position()
    for who in ("council", "beta_council"):
        caller = CALLERS[who]
        assert_error(
            api.post(f"/v1/snapshots/{ROUTER_ID}/clear", {"store_wide": True}, who),
            403,
            "ACCESS_DENIED",
            f"only the store_operator role may clear a store-wide halt; {caller.actor_id} holds"
            f" {list(caller.roles)}",
        )
    assert api.position() == before
    cleared = api.post(f"/v1/snapshots/{ROUTER_ID}/clear", {"store_wide": True}, "store_council")
    assert cleared.status_code == 200 and cleared.json()["tenant"] is None
    assert replay_error(api, acme_job, "admin_auditor") is None
    assert replay_error(api, beta_job, "beta_admin_auditor") is None


# --- halts recorded before halts were scoped by tenant --------------------------------------------


def record_legacy_halt(ledger: Ledger, snapshot_id: str, reason: str) -> None:
    """Store a halt as it was recorded before: scope ``snapshot:<id>``, a version 1 HaltSet
    (no tenant), set by a tenant's auditor (any role could halt then)."""
    record = Governance.open(f"snapshot:{snapshot_id}")
    store_operator = Actor.of("sol", ["store_operator"])
    record.halt(snapshot_id, HaltCause.SECURITY_INCIDENT, reason, store_operator, "then")
    opened, halt = record.collect_events()
    assert isinstance(halt, Governance.HaltSet)
    topic = get_topic(Governance.HaltSet)
    state = halt.model_dump(mode="json", exclude={"originator_id", "originator_version"})
    del state["tenant"]
    state |= {"class_version": 1, "actor_id": "aude", "roles": ["auditor"]}
    body = canonical_json(state)
    signed = sign_record(store_of(ledger).keyring, record.id, 2, topic, body)
    store_of(ledger).recorder.insert_events(
        [store_of(ledger).mapper.to_stored_event(opened), StoredEvent(record.id, 2, topic, signed)]
    )


def test_a_halt_recorded_before_tenants_stays_in_force_for_every_tenant(ledger: Ledger) -> None:
    acme = ledger.jobs.run("2 + 3", "s1", tenant="acme").job_id
    beta = ledger.jobs.run("3 + 4", "s2", tenant="beta").job_id
    record_legacy_halt(ledger, ROUTER_ID, "old incident")
    for job_id, tenant in ((acme, "acme"), (beta, "beta")):
        result = ledger.replays.run(job_id, ReplayMode.AUDIT, ANA, tenant=tenant)
        assert result.outcome.error_code is not None
        assert result.outcome.error_code.value == "FORCE_HALT_REPLAY"
        assert "store-wide halt: SECURITY_INCIDENT: old incident" in str(
            result.outcome.error_message
        )
    (row,) = ledger.read_models.rows(HALTED_SNAPSHOTS)
    assert (row["tenant"], row["actor_id"]) == (None, "aude")
    # Its council is a store operator's: a tenant's council cannot lift it, nor halt it again.
    with pytest.raises(Exception, match="only the store_operator role may clear a store-wide halt"):
        ledger.governance.clear_halt(ROUTER_ID, Actor.of("cleo", ["council"]), None)
    ledger.governance.clear_halt(ROUTER_ID, Actor.of("sue", ["council", "store_operator"]), None)
    assert ledger.replays.run(acme, ReplayMode.AUDIT, ANA, tenant="acme").outcome.ok
    assert ledger.read_models.rows(HALTED_SNAPSHOTS) == []


# --- the automatic halt of a failed signature check -----------------------------------------------


def test_a_failed_signature_check_halts_the_replaying_tenant_only(
    ledger: Ledger, raw_table: RawTable
) -> None:
    acme = ledger.jobs.run("2 + 3", "s1", tenant="acme").job_id
    beta = ledger.jobs.run("3 + 4", "s2", tenant="beta").job_id
    stream = Snapshot.id_for(ROUTER_ID)
    original = raw_table.state(stream, 1)
    raw_table.set_column(stream, 1, "state", original.replace(b"R1", b"R9"))

    tampered = ledger.replays.run(acme, ReplayMode.AUDIT, ANA, tenant="acme").outcome
    assert tampered.error_code is not None and tampered.error_code.value == "INTEGRITY_FAILURE"
    record = ledger.governance.record(ACME_SCOPE)
    assert record is not None and ROUTER_ID in record.halted
    assert ledger.governance.record(STORE_SCOPE) is None
    # Beta's replay of the tampered snapshot fails its own check (and halts beta's replays).
    beta_sees = ledger.replays.run(beta, ReplayMode.AUDIT, ANA, tenant="beta").outcome
    assert beta_sees.error_code is not None and beta_sees.error_code.value == "INTEGRITY_FAILURE"
    raw_table.set_column(stream, 1, "state", original)
    for job_id, tenant in ((acme, "acme"), (beta, "beta")):
        stopped = ledger.replays.run(job_id, ReplayMode.AUDIT, ANA, tenant=tenant).outcome
        assert stopped.error_code is not None
        assert stopped.error_code.value == "FORCE_HALT_REPLAY"
        assert f"replay {job_id}#" in str(stopped.error_message)  # the tenant's own replay
        log = ledger.governance.log(job_id, tenant=tenant)
        assert [e["tenant"] for e in log if e["event"] == "FORCE_HALT_REPLAY"] == [tenant]


# --- through the CLI ----------------------------------------------------------------------------


def tenant_log(capsys: pytest.CaptureFixture[str], job_id: str, tenant: str) -> list[Any]:
    code, out, err = run(capsys, "governance", "log", job_id, "--tenant", tenant, "--json")
    assert (code, err) == (0, ""), err
    return [canonical_line(line + "\n") for line in out.splitlines()]


def new_tenant_job(capsys: pytest.CaptureFixture[str], tenant: str, text: str) -> str:
    code, out, err = run(capsys, "run", text, "--seed", "s1", "--tenant", tenant, "--json")
    assert (code, err) == (0, ""), err
    job_id = canonical_line(out)["job_id"]
    assert isinstance(job_id, str)
    return job_id


def test_cli_halts_are_the_named_tenants(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = new_tenant_job(capsys, "acme", "2 + 3")
    beta = new_tenant_job(capsys, "beta", "3 + 4")
    act(monkeypatch, "aude", "auditor")
    code, out, err = run(
        capsys, "governance", "halt", ROUTER_ID, "--reason", REASON, "--tenant", "acme"
    )
    assert (code, err) == (0, ""), err
    assert out == f"FORCE_HALT_REPLAY set on snapshot {ROUTER_ID} for tenant acme by aude\n"

    # A store-wide halt is refused to an auditor, and a bad choice of tenant is bad usage.
    before = written_state(cli_env, capsys)
    code, out, err = run(capsys, "governance", "halt", ROUTER_ID, "--reason", "x", "--store-wide")
    assert (code, out) == (1, "")
    assert_failure_line(
        err,
        "ACCESS_DENIED",
        "only the store_operator role may halt a snapshot for every tenant; aude holds ['auditor']",
    )
    for whose in (["--tenant", "Acme"], ["--tenant", "acme", "--store-wide"]):
        code, out, err = run(capsys, "governance", "halt", ROUTER_ID, "--reason", "x", *whose)
        assert_usage_error(code, out, err, "--tenant")
    assert written_state(cli_env, capsys) == before

    act(monkeypatch, "ana", "admin,auditor")
    code, report, err = replay_json(capsys, beta, "--tenant", "beta")
    assert (code, report["ok"]) == (0, True), err
    beta_log = tenant_log(capsys, beta, "beta")
    assert REASON not in str(beta_log) and "aude" not in str(beta_log)
    code, report, err = replay_json(capsys, acme, "--tenant", "acme")
    assert code == 1
    assert_failure_line(err, "FORCE_HALT_REPLAY", ACME_HALTED)
    acme_halts = [e for e in tenant_log(capsys, acme, "acme") if e["scope"] == OWN_HALTS]
    assert [(e["event"], e.get("actor_id")) for e in acme_halts] == [
        ("GOVERNANCE_OPENED", None),
        ("FORCE_HALT_REPLAY", "aude"),
    ]

    # Clearing: the default tenant has no such halt; acme's council lifts acme's.
    act(monkeypatch, "cleo", "council")
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID)
    assert_usage_error(code, out, err, f"is not halted in scope tenant-snapshot:{ROUTER_ID}")
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID, "--tenant", "acme")
    assert (code, out, err) == (
        0,
        f"FORCE_HALT_CLEAR on snapshot {ROUTER_ID} for tenant acme by cleo\n",
        "",
    )
    act(monkeypatch, "ana", "admin,auditor")
    assert replay_json(capsys, acme, "--tenant", "acme")[0] == 0


def test_cli_store_wide_halt_by_a_store_operator(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    acme = new_tenant_job(capsys, "acme", "2 + 3")
    beta = new_tenant_job(capsys, "beta", "3 + 4")
    act(monkeypatch, "sol", "store_operator")
    code, out, err = run(capsys, "governance", "halt", ROUTER_ID, "--reason", "r", "--store-wide")
    assert (code, out, err) == (
        0,
        f"FORCE_HALT_REPLAY set on snapshot {ROUTER_ID} for every tenant by sol\n",
        "",
    )
    act(monkeypatch, "ana", "admin,auditor")
    for job_id, tenant in ((acme, "acme"), (beta, "beta")):
        code, _, err = replay_json(capsys, job_id, "--tenant", tenant)
        assert code == 1
        assert_failure_line(err, "FORCE_HALT_REPLAY")
        assert "store-wide halt" in err
    act(monkeypatch, "sue", "council,store_operator")
    code, out, err = run(capsys, "governance", "clear", ROUTER_ID, "--store-wide")
    assert (code, err) == (0, ""), err
    act(monkeypatch, "ana", "admin,auditor")
    assert replay_json(capsys, beta, "--tenant", "beta")[0] == 0
