"""As-of replay of one job (issue 31 point 2, seed 003 ``--as-of``/``--compare-to``), on SQLite
and PostgreSQL, through the use case (`ledger.whatif_as_of.run`) on stores left checkpointed as
every CLI write leaves them: a job whose retrieval was served from the tenant's memories is served
again from the memory log as it stood at a checkpoint or a log position; a memory added and one
forgotten between two points show as the hits added and removed; recorded, never authoritative;
bad points are one line, exit 2, nothing recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.hand_written_runs import (
    ANA,
    as_auditor,
    math_iteration,
    run_file,
    with_brainstates,
)
from support.ledger_fixtures import RawTable, run

from domain.as_of import LogPoint, parse_point
from domain.canonical import canonical_json
from domain.errors import InvalidInput
from domain.events import hash_of
from domain.job import Job
from domain.memories import MemoryLog
from domain.run_file import parse_run
from domain.whatif_record import CounterfactualRecord
from infrastructure.application.ledger import Ledger
from infrastructure.application.whatif_as_of import AsOfResult
from infrastructure.storage.settings import Settings

QUERY = "when is the launch"
TEXTS = ("the launch moved to friday", "lunch is at noon", "the launch needs a review")


def hit(memory: dict[str, Any], rank: int, score: float) -> dict[str, Any]:
    return {
        "uri": f"mace://default/memory/{memory['memory_id']}",
        "score": score,
        "explain": {"rank": rank, "position": memory["position"]},
    }


def retrieval(position: int, hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    request = {
        "type": "RetrievalRequest",
        "request_id": "r1",
        "query": QUERY,
        "request_hash": hash_of(QUERY),
        "memory_position": position,
    }
    response = {
        "type": "RetrievalResponse",
        "request_id": "r1",
        "hits": hits,
        "response_hash": hash_of(hits),
    }
    return [request, response]


def record(settings: Settings, tmp_path: Path, job_id: str, body: list[dict[str, Any]]) -> None:
    """The run recorded as ``mace ingest`` records it, the store checkpointed as it closes."""
    ids = _ids(settings)
    path = run_file(tmp_path, job_id, ids, with_brainstates(body), "2 + 3 = 5")
    with Ledger.open(settings) as ledger:
        ledger.run_imports.record_once(parse_run(Path(path).read_bytes().split(b"\n")))


def _ids(settings: Settings) -> dict[str, str]:
    with Ledger.open(settings) as ledger:
        return ledger.snapshots.default_ids()


def newest_checkpoint(settings: Settings) -> int:
    with Ledger.open(settings) as ledger:
        newest = ledger.checkpoints.newest()
    assert newest is not None
    return newest.checkpoint.number


def as_of(settings: Settings, job_id: str, point: str, compare_to: str | None = None) -> AsOfResult:
    with Ledger.open(settings) as ledger:
        return ledger.whatif_as_of.run(
            job_id,
            parse_point(point, "--as-of"),
            ANA,
            compare_to=None if compare_to is None else parse_point(compare_to, "--compare-to"),
        )


@pytest.fixture
def churned(cli_env: Settings, tmp_path: Path) -> dict[str, Any]:
    """Three episodes remembered, checkpoint ``before``; a job whose retrieval was served from
    them; then a memory added and one forgotten, checkpoint ``after``."""
    with Ledger.open(cli_env) as ledger:
        remember = ledger.memories.remember_episode
        memories = [
            orjson.loads(canonical_json(remember("default", text, [], ANA, None).as_json()))
            for text in TEXTS
        ]
    moved, lunch, review = memories
    hits = [hit(review, 1, 2.0), hit(moved, 2, 2.0), hit(lunch, 3, 1.0)]
    body = [*math_iteration(0, "2 + 3", 5), *retrieval(review["position"], hits)]
    record(cli_env, tmp_path, "launch", body)
    before = newest_checkpoint(cli_env)
    with Ledger.open(cli_env) as ledger:
        added = ledger.memories.remember_episode("default", "the launch is on", [], ANA, None)
        ledger.memories.forget("default", moved["memory_id"], "moved again", ANA)
    after = newest_checkpoint(cli_env)
    assert after > before
    return {
        "before": before,
        "after": after,
        "served_at": review["position"],
        "moved": f"mace://default/memory/{moved['memory_id']}",
        "added": f"mace://default/memory/{added.memory_id}",
    }


def test_as_of_the_checkpoint_the_job_was_recorded_under_serves_the_same_hits(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    result = as_of(cli_env, "launch", f"checkpoint:{churned['before']}")
    report = result.report
    assert (report["kind"], report["verdict"], report["authoritative"]) == (
        "as_of",
        "unchanged",
        False,
    )
    assert report["served"] == {"retrievals": 1, "sem_reads": 0}
    assert report["data_drift"] == [] and report["consequences"] == []
    assert report["policy_drift"]["differences"] == []
    # The memory log as the checkpoint covers it is where the retrieval was served from.
    assert report["as_of"]["memory_version"] == churned["served_at"]


def test_memories_added_and_forgotten_since_show_as_data_drift_at_the_later_point(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    result = as_of(cli_env, "launch", str(churned["after"]))
    report = result.report
    assert report["verdict"] == "changed"
    assert report["as_of"]["checkpoint"] == churned["after"]
    assert report["as_of"]["memory_version"] == churned["served_at"] + 2  # one added, one gone
    (drift,) = report["data_drift"]
    assert drift["field"] == "event 5 RetrievalResponse hits"
    served = [h["uri"] for h in drift["replayed"]]
    assert churned["added"] in served and churned["moved"] not in served
    assert report["policy_drift"]["differences"] == []
    assert report["first_change"] == drift


def test_compare_to_diffs_the_hit_sets_of_two_points(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    result = as_of(
        cli_env, "launch", f"checkpoint:{churned['before']}", f"checkpoint:{churned['after']}"
    )
    report = result.report
    assert (report["kind"], report["verdict"], report["authoritative"]) == (
        "compare",
        "changed",
        False,
    )
    (drift,) = report["data_drift"]
    assert drift["field"] == "event 5 RetrievalResponse hits"
    assert [h["uri"] for h in drift["hits"]["added"]] == [churned["added"]]
    assert [h["uri"] for h in drift["hits"]["removed"]] == [churned["moved"]]
    assert drift["hits"]["common"] == 2
    assert report["policy_drift"]["differences"] == []
    # The same point twice: nothing drifts.
    same = as_of(cli_env, "launch", str(churned["after"]), str(churned["after"])).report
    assert (same["verdict"], same["data_drift"]) == ("unchanged", [])


def test_a_log_position_is_a_point_too(cli_env: Settings, churned: dict[str, Any]) -> None:
    at = head(cli_env)
    report = as_of(cli_env, "launch", f"position:{at}").report
    assert report["as_of"]["log_position"] == at
    assert report["verdict"] == "changed"


def test_every_as_of_is_recorded_signed_and_never_authoritative(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    result = as_of(cli_env, "launch", str(churned["before"]), str(churned["after"]))
    with Ledger.open(cli_env) as ledger:
        stored = ledger.whatif.get(result.record_id)
        assert ledger.governance.record("job:launch") is None  # the job's replays untouched
    assert isinstance(stored, CounterfactualRecord)
    assert (stored.kind, stored.kind_version, stored.authoritative) == ("compare", 1, False)
    assert stored.parameters == {
        "job_id": "launch",
        "as_of": {"checkpoint": churned["before"]},
        "compare_to": {"checkpoint": churned["after"]},
    }
    assert stored.outcome == "changed"


def test_a_job_that_read_nothing_from_memory_says_so(cli_env: Settings, tmp_path: Path) -> None:
    record(cli_env, tmp_path, "sum", math_iteration(0, "2 + 3", 5))
    report = as_of(cli_env, "sum", "1").report
    assert report["verdict"] == "unchanged"
    assert report["served"] == {"retrievals": 0, "sem_reads": 0}
    assert report["nothing_read"] == "nothing read from memory: as of the point, nothing differs"


def mace_run(capsys: pytest.CaptureFixture[str], text: str, seed: str) -> str:
    """``mace run TEXT --user u1 --json`` (a CLI write: the store checkpointed), its job id."""
    code, out, err = run(capsys, "run", text, "--seed", seed, "--user", "u1", "--json")
    assert (code, err) == (0, ""), err
    job_id: str = orjson.loads(out)["job_id"]
    return job_id


def test_a_sem_read_is_served_as_the_key_stood_at_the_point(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    mace_run(capsys, "my favorite color is blue", "s1")
    blue = newest_checkpoint(cli_env)
    asked = mace_run(capsys, "what is my favorite color", "s2")
    mace_run(capsys, "my favorite color is red", "s3")
    red = newest_checkpoint(cli_env)
    same = as_of(cli_env, asked, str(blue)).report
    assert (same["verdict"], same["served"]["sem_reads"]) == ("unchanged", 1), same
    later = as_of(cli_env, asked, str(red)).report
    assert later["verdict"] == "changed"
    (drift,) = later["data_drift"]
    assert drift["field"] == "sem_read user/person/u1/favorite_color"
    assert (drift["recorded"]["value"], drift["replayed"]["value"]) == ("blue", "red")
    # What the job answered on it follows from the drift: listed apart, never policy drift.
    assert later["consequences"] and later["policy_drift"]["differences"] == []
    compared = as_of(cli_env, asked, str(blue), str(red)).report
    (between,) = compared["data_drift"]
    assert (between["as_of"]["value"], between["compare_to"]["value"]) == ("blue", "red")


def test_an_as_of_over_a_tampered_job_fails_closed_before_any_point(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    table = RawTable(cli_env)
    stream = Job.id_for("launch")
    state = table.state(stream, 2)
    table.set_column(stream, 2, "state", state.replace(b"2 + 3", b"2 + 4"))
    report = as_of(cli_env, "launch", str(churned["after"])).report
    assert (report["verdict"], report["error"]["code"]) == ("failed", "INTEGRITY_FAILURE")
    assert report["data_drift"] == [] and report["first_change"] is None


def test_a_memory_log_edited_after_the_job_fails_closed(
    cli_env: Settings, churned: dict[str, Any]
) -> None:
    # The forgetting is edited in the memory log: the log does not verify, and nothing is
    # served from it as of any point.
    table = RawTable(cli_env)
    stream = MemoryLog.id_for("default")
    version = churned["served_at"] + 2
    state = table.state(stream, version)
    table.set_column(stream, version, "state", state.replace(b"moved again", b"moved later"))
    report = as_of(cli_env, "launch", str(churned["after"])).report
    assert (report["verdict"], report["error"]["code"]) == ("failed", "INTEGRITY_FAILURE")
    assert report["data_drift"] == [] and report["first_change"] is None


def head(settings: Settings) -> int:
    """The log's head: bad input writes nothing, so leaves it where it was."""
    with Ledger.open(settings, create=False) as ledger:
        return ledger.checkpoints.head()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--as-of", "checkpoint:99"], "--as-of checkpoint 99: no such checkpoint"),
        (["--as-of", "position:100000"], "--as-of log position 100000: beyond the log"),
        (["--compare-to", "1"], "--compare-to needs --as-of"),
        (["--as-of", "position:x"], "--as-of 'position:x': expected"),
        (["--as-of", "1", "--with", "router=" + "ab" * 32], "it takes no --with"),
    ],
)
def test_bad_points_are_one_line_exit_2_and_nothing_recorded(
    cli_env: Settings,
    churned: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    expected: str,
) -> None:
    as_auditor(cli_env, monkeypatch)
    before = head(cli_env)
    code, out, err = run(capsys, "replay", "launch", *argv)
    assert code == 2, (out, err)
    assert expected in err and err.count("\n") == 1, err
    assert head(cli_env) == before


def test_mace_replay_as_of_prints_what_was_served_and_exits_1_on_drift(
    cli_env: Settings,
    churned: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    as_auditor(cli_env, monkeypatch)
    before, after = str(churned["before"]), str(churned["after"])
    code, out, _ = run(capsys, "replay", "launch", "--as-of", before, "--compare-to", after)
    assert code == 1
    assert out.startswith(
        f"compare: CHANGED, NON-AUTHORITATIVE; job launch as of checkpoint {before}"
    )
    assert f"added: {churned['added']}" in out and f"removed: {churned['moved']}" in out
    assert "policy drift: none" in out
    code, out, _ = run(capsys, "replay", "launch", "--as-of", before, "--json")
    assert code == 0
    assert orjson.loads(out)["verdict"] == "unchanged"


@pytest.mark.parametrize(
    ("text", "point"),
    [
        ("3", LogPoint(3, None)),
        ("checkpoint:3", LogPoint(3, None)),
        ("position:17", LogPoint(None, 17)),
    ],
)
def test_points_parse(text: str, point: LogPoint) -> None:
    assert parse_point(text, "--as-of") == point


@pytest.mark.parametrize("text", ["0", "-1", "position:0", "tree:3", "", "checkpoint:"])
def test_bad_points_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(InvalidInput) as bad:
        parse_point(text, "--as-of")
    assert "\n" not in str(bad.value)
    assert "expected N or checkpoint:N (a checkpoint number) or position:N" in str(bad.value)
