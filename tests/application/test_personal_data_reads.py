"""Events that carry personal data are shown in full only to admins, and each such read is logged.

Seed 000 section 10. The job below tried to remember a password: its record holds the refusal
mark (a keyed digest of the secret) in its input, prompt, memory write and trace. Operators,
auditors and the council read those events redacted, and nothing is written when they do; an
admin reads them in full, and the read is first appended, signed, to the tenant's access log.
Through the real HTTP app and the CLI, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import re

import pytest
from support.api_support import Api, assert_error, not_found_body
from support.ledger_fixtures import RawTable, run, store_of

from domain.personal_data_access import PersonalDataAccessLog
from infrastructure.application.ledger import Ledger
from infrastructure.storage.settings import Settings
from projections.redaction import PII_MARK

SECRET = "hunter2"
SENSITIVE = "remember my password is " + SECRET
MARK_OPENING = b"[refused:password:hmac-sha256:"
WHEN = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def reads(api: Api) -> list[dict[str, object]]:
    response = api.get("/v1/personal-data/reads", "auditor")
    assert response.status_code == 200, response.content
    found: list[dict[str, object]] = response.json()["reads"]
    return found


@pytest.mark.parametrize("path", ["/v1/jobs/{}/events", "/v1/jobs/{}"])
def test_only_an_admin_reads_personal_data_in_full_and_the_read_is_recorded(
    api: Api, path: str
) -> None:
    job_id = api.new_job(SENSITIVE)
    url = path.format(job_id)
    before = api.position()
    for who in ("operator", "auditor", "council"):
        response = api.get(url, who)
        assert response.status_code == 200, response.content
        assert SECRET.encode() not in response.content
        assert b"[refused:" not in response.content
        assert PII_MARK.encode() in response.content
        personal = response.json()["personal_data"]
        assert personal["redacted"] is True
        assert 1 in personal["versions"]  # the job input
    assert api.position() == before  # a redacted read writes nothing
    assert reads(api) == []

    response = api.get(url, "admin")
    assert response.status_code == 200, response.content
    assert SECRET.encode() not in response.content  # never stored in clear at all
    assert MARK_OPENING in response.content
    assert response.json()["personal_data"]["redacted"] is False
    versions = response.json()["personal_data"]["versions"]
    assert api.position() > before
    (read,) = reads(api)
    assert read["actor"] == {"actor_id": "adam", "roles": ["admin"]}
    assert (read["job_id"], read["versions"], read["channel"]) == (job_id, versions, "http")
    assert WHEN.fullmatch(str(read["accessed_at"]))
    theirs = api.get("/v1/personal-data/reads", "beta_admin_auditor")
    assert (theirs.status_code, theirs.json()) == (200, {"reads": []})  # the log is acme's

    # Another tenant's admin: the job does not exist for them, and nothing is recorded.
    position = api.position()
    other = api.get(url, "beta_admin_auditor")
    assert other.status_code == 404
    assert other.content == not_found_body(f"job {job_id}")
    assert api.position() == position


def test_events_without_personal_data_are_shown_to_all_and_an_admin_read_writes_nothing(
    api: Api,
) -> None:
    job_id = api.new_job("my favorite color is Blue")
    before = api.position()
    for who in ("operator", "admin"):
        response = api.get(f"/v1/jobs/{job_id}/events", who)
        assert response.status_code == 200
        assert b"Blue" in response.content
        assert response.json()["personal_data"] == {"versions": [], "redacted": False}
    assert api.position() == before


def test_the_access_log_is_signed_an_edited_entry_fails_closed(
    api: Api, raw_table: RawTable
) -> None:
    job_id = api.new_job(SENSITIVE)
    assert api.get(f"/v1/jobs/{job_id}/events", "admin").status_code == 200
    every_state = raw_table.execute("SELECT state FROM {table}")
    assert not any(SECRET.encode() in bytes(state) for (state,) in every_state)
    store_of(api.ledger).verify_all()
    log = PersonalDataAccessLog.id_for("acme")
    rows = raw_table.rows(log)
    assert [v for v, _, _ in rows] == [1, 2]
    assert all(state.startswith(b"mace1.k1.") for _, _, state in rows)
    forged = rows[1][2].replace(b'"adam"', b'"mallory"')
    assert forged != rows[1][2]
    raw_table.set_column(log, 2, "state", forged)
    assert_error(api.get("/v1/personal-data/reads", "auditor"), 500, "INTEGRITY_FAILURE")


def test_only_admin_auditor_and_council_read_the_access_log(api: Api) -> None:
    assert_error(api.get("/v1/personal-data/reads", "operator"), 403, "ACCESS_DENIED")


def test_mace_events_follows_the_same_rule(
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run(capsys, "run", SENSITIVE, "--seed", "s1", "--json")
    assert code == 0, err
    job_id = re.search(r'"job_id":"([0-9a-f]{64})"', out)
    assert job_id is not None
    with Ledger.open(cli_env) as ledger:
        position = store_of(ledger).recorder.max_notification_id()

    for roles in (None, "operator,auditor"):
        if roles is not None:
            monkeypatch.setenv("MACE_ACTOR", "olga")
            monkeypatch.setenv("MACE_ROLES", roles)
        code, out, err = run(capsys, "events", job_id[1], "--json")
        assert code == 0, err
        assert "[refused:" not in out and SECRET not in out and PII_MARK in out
        assert "redacted: only admin reads it in full" in err

    with Ledger.open(cli_env) as ledger:
        assert store_of(ledger).recorder.max_notification_id() == position
    monkeypatch.setenv("MACE_ACTOR", "ana")
    monkeypatch.setenv("MACE_ROLES", "admin")
    code, out, err = run(capsys, "events", job_id[1], "--type", "SemWrite")
    assert code == 0, err
    assert MARK_OPENING.decode() in out and SECRET not in out
    assert "your read of personal data (versions 4) was recorded" in err
    with Ledger.open(cli_env) as ledger:
        (read,) = ledger.personal_data.accesses("default")
    assert read["actor"] == {"actor_id": "ana", "roles": ["admin"]}
    assert (read["job_id"], read["versions"], read["channel"]) == (job_id[1], [4], "cli")

    monkeypatch.setenv("MACE_ROLES", "wizard")
    code, out, err = run(capsys, "events", job_id[1])
    assert (code, out) == (2, "")
    assert err.startswith("mace: INVALID_INPUT: MACE_ACTOR/MACE_ROLES: unknown role")


def test_the_dashboard_job_page_follows_the_same_rule(api: Api) -> None:
    job_id = api.new_job(SENSITIVE)
    with api.unchecked():
        page = api.get(f"/dashboard/jobs/{job_id}", "operator")
        assert page.status_code == 200
        assert b"[refused:" not in page.content and PII_MARK.encode() in page.content
        assert reads(api) == []
        page = api.get(f"/dashboard/jobs/{job_id}", "admin")
        assert page.status_code == 200
        assert MARK_OPENING in page.content
    (read,) = reads(api)
    assert (read["job_id"], read["channel"]) == (job_id, "http")
