"""The first CLI verbs, end to end on SQLite and PostgreSQL, including bad input and tampering."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from support.ledger_fixtures import RawTable, run

from domain.checkpoint import CHECKPOINT_STREAM
from domain.snapshot import Snapshot
from infrastructure.storage.settings import Settings

ROUTER = {
    "rules": [
        {"rule_id": "R4", "pattern": ".*", "agent": "generic_agent", "why": "matched_R4_fallback"}
    ]
}


def write_json(tmp_path: Path, data: object, name: str = "snapshot.json") -> str:
    path = tmp_path / name
    path.write_bytes(orjson.dumps(data))
    return str(path)


def test_the_same_working_memory_in_another_order_is_one_snapshot(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seed 000 section 4: decision arrays are sorted before serialisation, so the same nodes
    given in another order are the same content, with one id, stored in the reducer's order."""
    nodes = [
        {"node_id": "wm-b", "kind": "fact", "label": "b", "apt": 0.5},
        {"node_id": "wm-c", "kind": "fact", "label": "c", "apt": 0.9},
        {"node_id": "wm-a", "kind": "fact", "label": "a", "apt": 0.5},
    ]
    ids = []
    for n, order in enumerate([nodes, nodes[::-1], [nodes[2], nodes[0], nodes[1]]]):
        config = {"working_memory": {"capacity": 5, "nodes": order}}
        source = write_json(tmp_path, config, f"brainstate-{n}.json")
        code, out, err = run(capsys, "snapshot", "put", "--kind", "brainstate", source, "--json")
        assert (code, err) == (0, "")
        ids.append(orjson.loads(out)["snapshot_id"])
    assert ids[0] == ids[1] == ids[2]

    code, out, _ = run(capsys, "snapshot", "show", ids[0], "--json")
    stored = orjson.loads(out)["payload"]["working_memory"]["nodes"]
    assert [node["node_id"] for node in stored] == ["wm-c", "wm-a", "wm-b"]
    code, _, err = run(capsys, "verify", "--all")
    assert (code, err) == (0, "")


def test_snapshot_put_show_verify(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write_json(tmp_path, ROUTER)
    code, out, _ = run(capsys, "snapshot", "put", "--kind", "router", source, "--json")
    assert code == 0
    put = orjson.loads(out)
    assert set(put) == {"snapshot_id", "kind", "created"}
    assert (put["kind"], put["created"]) == ("router", True)
    assert out == orjson.dumps(put, option=orjson.OPT_SORT_KEYS).decode() + "\n"

    code, out, _ = run(capsys, "snapshot", "put", "--kind", "router", source)
    assert (code, out) == (0, f"{put['snapshot_id']} (already stored)\n")

    code, out, _ = run(capsys, "snapshot", "show", put["snapshot_id"], "--json")
    shown = orjson.loads(out)
    assert code == 0
    assert (shown["payload"], shown["schema_version"], shown["seed_namespace"]) == (
        ROUTER,
        1,
        "mace/router",
    )

    code, out, _ = run(capsys, "verify", "--all")
    # The snapshot, the check record of the key that signed it, and the checkpoint `snapshot put`
    # ended with (the second put stored nothing, so it wrote none).
    assert (code, out) == (
        0,
        "ok: 3 events in 3 streams verified (0 jobs, 0 sealed); checkpoints: 1 verified,"
        " the newest covers 2 events; not yet checkpointed: 0\n"
        "replay requests without a result: 0 abandoned, 0 running\n",
    )


def test_verify_reports_tampering_with_exit_1(
    cli_env: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "snapshot", "put", "--kind", "router", write_json(tmp_path, ROUTER), "--json"
    )
    snapshot_id = orjson.loads(out)["snapshot_id"]
    stream = Snapshot.id_for(snapshot_id)
    table = RawTable(cli_env)
    table.set_column(stream, 1, "state", table.state(stream, 1).replace(b"R4", b"R1"))

    # Below a checkpoint (the put wrote one), the checkpoint that no longer holds is named.
    broken = (
        "checkpoint 1 no longer holds: the log differs from it first at position 1"
        f" (the log now has stream {stream} version 1 there)"
    )
    code, out, err = run(capsys, "verify", "--all", "--json")
    assert code == 1
    assert orjson.loads(out) == {
        "ok": False,
        "error_code": "INTEGRITY_FAILURE",
        "stream": str(CHECKPOINT_STREAM),
        "version": 1,
        "reason": broken,
    }
    assert err == f"mace: INTEGRITY_FAILURE: stream {CHECKPOINT_STREAM} version 1: {broken}\n"

    code, _, err = run(capsys, "snapshot", "show", snapshot_id)
    assert code == 1
    assert err.startswith("mace: INTEGRITY_FAILURE: ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["snapshot", "put", "--kind", "weather", "{file}"], "unknown snapshot kind 'weather'"),
        (["snapshot", "put", "--kind", "router", "{notjson}"], "is not JSON"),
        (["snapshot", "put", "--kind", "router", "{array}"], "must hold a JSON object, not list"),
        (["snapshot", "put", "--kind", "router", "{missing}"], "cannot read"),
        (
            ["snapshot", "put", "--kind", "router", "{file}", "--schema-version", "0"],
            "schema_version must be a positive integer",
        ),
        (["snapshot", "show", "abc"], "invalid snapshot id 'abc'"),
        (["snapshot", "show", "0" * 64], "no snapshot " + "0" * 64),
        (["verify"], "name one JOB_ID or give --all"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    cli_env: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    # A ledger that already holds one snapshot, so "writes nothing" can be checked by counting.
    assert run(capsys, "snapshot", "put", "--kind", "router", write_json(tmp_path, ROUTER))[0] == 0
    paths = {
        "{file}": write_json(tmp_path, {"x": 1}, "other.json"),
        "{array}": write_json(tmp_path, [1, 2], "array.json"),
        "{missing}": str(tmp_path / "absent.json"),
    }
    (tmp_path / "notjson.json").write_text("{nope")
    paths["{notjson}"] = str(tmp_path / "notjson.json")
    code, out, err = run(capsys, *[paths.get(a, a) for a in argv])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("mace: INVALID_INPUT: ")
    assert message in err
    # The snapshot, its signing key's check record, and the checkpoint `snapshot put` ended with.
    assert RawTable(cli_env).execute("SELECT COUNT(*) FROM {table}") == [(3,)]


def test_bad_input_creates_no_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/never.db")
    monkeypatch.delenv("MACE_SIGNING_KEYS", raising=False)
    code, _, err = run(capsys, "snapshot", "put", "--kind", "nope", write_json(tmp_path, ROUTER))
    assert code == 2 and "unknown snapshot kind" in err
    code, _, err = run(capsys, "verify", "--all")
    assert (
        code == 2
        and err == f"mace: NOT_FOUND: no ledger at sqlite:///{tmp_path}/never.db (set MACE_STORE)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["snapshot.json"]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("MACE_STORE", "mysql://db/x", "MACE_STORE has unsupported scheme 'mysql'"),
        ("MACE_STORE", "postgresql://db", "needs a user, a host and a database name"),
        ("MACE_ENV", "staging", "invalid MACE_ENV"),
        ("MACE_CONNECT_TIMEOUT", "0", "invalid MACE_CONNECT_TIMEOUT"),
        ("MACE_CHECKPOINT_INTERVAL", "0", "invalid MACE_CHECKPOINT_INTERVAL"),
        ("MACE_CHECKPOINT_INTERVAL", "nan", "invalid MACE_CHECKPOINT_INTERVAL"),
        ("MACE_SIGNING_KEYS", "{}", "MACE_SIGNING_KEYS must be a non-empty JSON object"),
    ],
)
def test_bad_settings_are_one_line_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    variable: str,
    value: str,
    message: str,
) -> None:
    monkeypatch.setenv("MACE_STORE", f"sqlite:///{tmp_path}/m.db")
    monkeypatch.setenv(variable, value)
    code, _, err = run(capsys, "snapshot", "put", "--kind", "router", write_json(tmp_path, ROUTER))
    assert code == 2
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / "m.db").exists()


def test_console_script_is_installed() -> None:
    mace = shutil.which("mace", path=str(Path(sys.executable).parent))
    assert mace is not None
    result = subprocess.run([mace, "--version"], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout) == (0, "mace 0.1.0\n")
