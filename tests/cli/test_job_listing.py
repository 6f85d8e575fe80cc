"""``mace jobs`` lists as ``GET /v1/jobs`` does: one canonical JSON document, the same page and
filter, and in text a header row and a line saying what the page left out."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.api_support import Api
from support.cli_output import assert_usage_error, canonical_line
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, run

from infrastructure.storage.settings import Settings

HEADER = "JOB ID  STATUS  REPLAYABLE  TENANT"


def _as_cli(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    """The environment ``mace`` sees: the service's store and keys."""
    monkeypatch.setenv("MACE_STORE", settings.store)
    assert settings.signing_keys is not None
    monkeypatch.setenv("MACE_SIGNING_KEYS", settings.signing_keys.get_secret_value())
    monkeypatch.setenv("MACE_ACTIVE_KEY_ID", "k1")
    monkeypatch.setenv("MACE_CHECKPOINT_KEY", str(TEST_CHECKPOINT_KEY))


def test_json_is_the_http_listing_page_for_page(
    api: Api,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ids = [api.new_job(f"{n} + 1", f"s{n}", capture_mode="full_io") for n in range(3)]
    ids.append(api.new_job("9 + 1", "s9"))  # prompts_only: not replayable in production
    failed = api.replay(ids[3], mode="production").json()["error"]["code"]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    _as_cli(monkeypatch, settings)
    # A store as CLI writes leave it: checkpointed.
    assert run(capsys, "checkpoint", "--json")[0] == 0
    for query, argv in (
        ("", []),
        ("?limit=2", ["--limit", "2"]),
        ("?limit=2&offset=3", ["--limit", "2", "--offset", "3"]),
        ("?offset=9", ["--offset", "9"]),
        ("?non_replayable=true", ["--non-replayable"]),
        # The dashboard's filters, as flags and as query parameters, before the page.
        (f"?job={ids[2]}", ["--job", ids[2]]),
        (
            "?replayable=yes&limit=2&offset=1",
            ["--replayable", "yes", "--limit", "2", "--offset", "1"],
        ),
        ("?replayable=no&status=sealed", ["--replayable", "no", "--status", "sealed"]),
        (
            f"?error={failed}&from={today}&to={today}",
            ["--error", failed, "--from", today, "--to", today],
        ),
        ("?to=2000-01-01", ["--to", "2000-01-01"]),
    ):
        code, out, err = run(capsys, "jobs", "--tenant", "acme", *argv, "--json")
        assert (code, err) == (0, ""), err
        listing = canonical_line(out)  # one document, canonical, on one line
        assert listing == api.get(f"/v1/jobs{query}").json(), argv
    code, out, _ = run(capsys, "jobs", "--error", failed, "--json")
    assert [job["job_id"] for job in canonical_line(out)["jobs"]] == ids[3:]
    code, out, _ = run(capsys, "jobs", "--replayable", "yes", "--limit", "2", "--json")
    assert canonical_line(out)["total"] == 3
    assert [job["job_id"] for job in canonical_line(out)["jobs"]] == ids[:2]
    code, out, _ = run(
        capsys, "jobs", "--tenant", "acme", "--limit", "2", "--offset", "1", "--json"
    )
    assert canonical_line(out)["total"] == 4
    assert [job["job_id"] for job in canonical_line(out)["jobs"]] == ids[1:3]


def test_text_has_a_header_and_says_what_the_page_left_out(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for n in range(3):
        code, out, err = run(capsys, "run", f"{n} + 1", "--seed", f"s{n}", "--json")
        assert code == 0, err
        ids.append(canonical_line(out)["job_id"])
    code, out, err = run(capsys, "jobs", "--limit", "1", "--offset", "1")
    assert (code, err) == (0, "")
    header, line, *rest = out.splitlines()
    assert header.split() == ["JOB", "ID", "STATUS", "REPLAYABLE", "TENANT"]
    assert line.split()[:4] == [ids[1], "sealed", "no", "default"]
    assert rest[-1] == "jobs 2-2 of 3; the next page: --offset 2"

    code, out, _ = run(capsys, "jobs", "--offset", "2")
    assert out.splitlines()[-1] == "jobs 3-3 of 3"
    code, out, _ = run(capsys, "jobs", "--tenant", "nobody")
    assert out == "no jobs\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--limit", "0"], "limit must be from 1 to 1000, got 0"),
        (["--limit", "1001"], "limit must be from 1 to 1000, got 1001"),
        (["--limit", "ten"], "argument --limit: invalid int value: 'ten'"),
        (["--offset", "-1"], "offset must be from 0 to 10000000, got -1"),
        (["--offset", "10000001"], "offset must be from 0 to 10000000, got 10000001"),
    ],
)
def test_a_page_out_of_bounds_is_one_line_exit_2(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    for json in ([], ["--json"]):
        code, out, err = run(capsys, "jobs", *argv, *json)
        assert_usage_error(code, out, err, message)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("status", "done", "status: 'done' is not one of open, completed, sealed, abandoned"),
        ("replayable", "maybe", "replayable: 'maybe' is not one of yes, no, open"),
        ("error", "OOPS", "error: 'OOPS' is not one of "),
        ("from", "yesterday", "from: 'yesterday' is not a UTC date or time (expected YYYY-MM-DD"),
        ("job", "a b", "job: 'a b' is not the start of a job id (expected up to 128 letters"),
    ],
)
def test_a_bad_filter_is_one_line_exit_2_and_a_422(
    api: Api,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flag: str,
    value: str,
    message: str,
) -> None:
    api.new_job("2 + 3", "s1")
    _as_cli(monkeypatch, settings)
    before = api.position()
    code, out, err = run(capsys, "jobs", f"--{flag}", value)
    assert_usage_error(code, out, err, f"--{message}")  # the line names the flag
    answer = api.get(f"/v1/jobs?{flag}={value}")
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "INVALID_INPUT"
    assert error["message"].startswith(message)
    assert api.position() == before  # nothing written
