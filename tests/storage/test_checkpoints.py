"""The checkpoint writer (issue 15 points 1-2), on SQLite and PostgreSQL.

Every checkpoint is held to what anyone with the raw rows can recompute: its tree size is the
number of stored events but the checkpoints, its root is the RFC 9162 root over their leaves in
notification order, its chain links each checkpoint to the digest of the one before, and its
signature verifies under the checkpoint key (`support.checkpoint_chain.chain` checks every one).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest
from support.checkpoint_chain import assert_covers_every_event, chain, stored_leaves, writer
from support.ledger_fixtures import RawTable, mace_process, run, subprocess_env
from support.receipt_examples import BUNDLE
from support.replay_cli import ROUTER_ID, act, new_job, write_run_file

from domain.errors import IntegrityFailure
from domain.merkle import EMPTY_ROOT
from domain.sem import SemEntry
from infrastructure.application.ledger import Ledger
from infrastructure.storage.checkpoints import chain as checkpoints_module
from infrastructure.storage.settings import Settings

Capsys = pytest.CaptureFixture[str]


# --- the first checkpoint and the chain -----------------------------------------------------------


def test_the_first_checkpoint_of_an_empty_store_is_empty_and_has_no_previous(
    ledger: Ledger,
) -> None:
    written = writer(ledger).write()
    first = written.newest.checkpoint
    assert written.written == 1
    assert (first.number, first.tree_size, first.root, first.previous) == (
        1,
        0,
        EMPTY_ROOT.hex(),
        None,
    )
    assert first.last_notification_id == 0
    # Saving the first checkpoint recorded the check record of the key that MACs it: the next
    # checkpoint covers that, and then there is nothing new to checkpoint.
    second = writer(ledger).write().newest.checkpoint
    assert (second.number, second.tree_size, second.previous) == (2, 1, first.digest())
    again = writer(ledger).write()
    assert (again.written, again.newest.checkpoint) == (0, second)


def test_each_writing_command_extends_one_chain_over_every_event(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    act(monkeypatch, "ana", "operator,admin")
    sizes = []
    for text in ("2 + 3", "4 * 5", "hello there"):
        new_job(capsys, text)
        sizes.append(assert_covers_every_event(cli_env).tree_size)
    assert sizes == sorted(set(sizes))  # each run added events, and a checkpoint over them
    assert len(chain(cli_env)) == 3


# --- every writing command ends with a checkpoint; reading commands write none --------------------

INGESTED = [
    {
        "type": "RunStarted",
        "job_id": "ext-1",
        "seed": "ing-1",
        "input": "say hello",
        "capture_mode": "full_io",
    },
    {"type": "StageTransition", "to_stage": "answer"},
    {"type": "RunCompleted", "final_output": "hi there"},
]


ROUTER = '{"rules": [{"rule_id": "R4", "pattern": ".*", "agent": "generic_agent", "why": "w"}]}'


def write_file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# Each makes what its command needs (a job, a file), then gives the command under test.
WRITING: dict[str, Callable[[Capsys, Path], list[str]]] = {
    "run": lambda capsys, tmp_path: ["run", "2 + 3", "--seed", "s1"],
    "ingest": lambda capsys, tmp_path: ["ingest", write_run_file(tmp_path, INGESTED)],
    "sem put": lambda capsys, tmp_path: ["sem", "put", "world/country/fr/capital", '"Paris"'],
    "snapshot put": lambda capsys, tmp_path: [
        "snapshot",
        "put",
        "--kind",
        "router",
        write_file(tmp_path, "router.json", ROUTER),
    ],
    "governance halt": lambda capsys, tmp_path: [
        "governance",
        "halt",
        ROUTER_ID,
        "--reason",
        f"incident after job {new_job(capsys)}",  # the job stored the default snapshots
    ],
    "memories add": lambda capsys, tmp_path: [
        "memories",
        "add",
        "--fact",
        "user/customer/alice/plan",
        '"gold"',
    ],
    "policy set": lambda capsys, tmp_path: [
        "policy",
        "set",
        write_file(tmp_path, "bundle.yaml", BUNDLE),
        "--global",
    ],
    "context": lambda capsys, tmp_path: ["context", "alice"],
    "replay": lambda capsys, tmp_path: ["replay", new_job(capsys)],
    "import": lambda capsys, tmp_path: ["import", exported_bundle(capsys, tmp_path)],
}


def exported_bundle(capsys: Capsys, tmp_path: Path) -> str:
    """A bundle of a job recorded in another store of its own (so importing it writes)."""
    other = f"sqlite:///{tmp_path}/exported.db"
    path = str(tmp_path / "bundle.json")
    with pytest.MonkeyPatch.context() as elsewhere:
        elsewhere.setenv("MACE_STORE", other)
        job_id = new_job(capsys, "6 * 7", "elsewhere")
        assert run(capsys, "export", job_id, "-o", path)[0] == 0
    return path


@pytest.mark.parametrize("command", sorted(WRITING))
def test_a_writing_command_ends_with_a_checkpoint_over_every_event(
    command: str,
    cli_env: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Capsys,
) -> None:
    act(monkeypatch, "ana", "operator,admin,auditor")
    assert run(capsys, "init")[0] == 0
    argv = WRITING[command](capsys, tmp_path)
    before = len(stored_leaves(cli_env))
    numbers = len(chain(cli_env))
    code, _, err = run(capsys, *argv)
    assert (code, err) == (0, ""), err
    assert len(stored_leaves(cli_env)) > before  # the command wrote
    assert len(chain(cli_env)) == numbers + 1
    newest = assert_covers_every_event(cli_env)
    assert newest.last_notification_id == stored_leaves(cli_env)[-1][0]


READING = [
    ["jobs"],
    ["verify", "--all"],
    ["sem", "get", "world/country/fr/capital"],
    ["governance", "log"],
    ["snapshot", "show", ROUTER_ID],
    ["checkpoint", "public-key"],
]


def test_reading_commands_write_no_checkpoint(
    cli_env: Settings, monkeypatch: pytest.MonkeyPatch, capsys: Capsys
) -> None:
    act(monkeypatch, "ana", "operator,admin,auditor")
    assert run(capsys, "sem", "put", "world/country/fr/capital", '"Paris"')[0] == 0
    assert run(capsys, "run", "2 + 3", "--seed", "s1")[0] == 0
    written = chain(cli_env)
    for argv in READING:
        code, _, err = run(capsys, *argv)
        assert (code, err) == (0, ""), (argv, err)
    assert chain(cli_env) == written


# --- racing writers never fork the chain ----------------------------------------------------------


def record_and_checkpoint(settings: Settings, worker: int, rounds: int) -> None:
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        for n in range(rounds):
            ledger.sem.put(f"world/country/c{worker}x{n}/capital", f"city {n}")
            writer(ledger).write()


@pytest.mark.empty_store
def test_threads_racing_to_checkpoint_never_fork_the_chain(settings: Settings) -> None:
    """From an empty store, so that the races to set it up and for the first checkpoint are run
    too; a writer that read while another's checkpoint was committing starts again, it reports
    nothing."""
    with ThreadPoolExecutor(4) as pool:
        racing = [pool.submit(record_and_checkpoint, settings, worker, 6) for worker in range(4)]
        for outcome in racing:
            outcome.result()  # a writer's failure is raised here
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        writer(ledger).write()
    assert len(chain(settings)) > 1
    assert_covers_every_event(settings)


def test_processes_racing_to_checkpoint_never_fork_the_chain(settings: Settings) -> None:
    with Ledger.open(settings) as ledger:  # the tables made before the race
        ledger.sem.put("world/country/fr/capital", "Paris")
    spawn = multiprocessing.get_context("spawn")
    workers = [
        spawn.Process(target=record_and_checkpoint, args=(settings, worker, 3))
        for worker in range(2)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(120)
        assert process.exitcode == 0
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        writer(ledger).write()
    assert_covers_every_event(settings)


def test_a_writer_behind_by_more_than_a_window_writes_several_checkpoints(
    ledger: Ledger, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(7):
        ledger.sem.put(f"world/country/c{n}/capital", f"city {n}")
    events = len(stored_leaves(settings))
    monkeypatch.setattr(checkpoints_module, "WINDOW", 3)
    written = writer(ledger).write()
    assert written.written == -(-events // 3)  # ceil: full windows, then the rest
    sizes = [s.checkpoint.tree_size for s in chain(settings)]
    assert sizes == [min(3 * n, events) for n in range(1, written.written + 1)]
    assert_covers_every_event(settings)


# --- tampering below the head fails closed --------------------------------------------------------


def test_an_event_altered_after_the_newest_checkpoint_stops_the_next_one(
    ledger: Ledger, settings: Settings
) -> None:
    writer(ledger).write()
    ledger.sem.put("world/country/fr/capital", "Paris")
    stream = SemEntry.id_for("world/country/fr/capital")
    raw = RawTable(settings)
    raw.set_column(stream, 1, "state", raw.state(stream, 1).replace(b"Paris", b"Lyon!"))
    with pytest.raises(IntegrityFailure, match=f"stream {stream} version 1: MAC mismatch"):
        writer(ledger).write()
    assert len(chain(settings)) == 1


def test_a_command_whose_checkpoint_fails_warns_in_one_line_and_keeps_its_exit_code(
    settings: Settings, store_url: str
) -> None:
    env = subprocess_env(store_url)
    put = mace_process(env, "sem", "put", "world/country/fr/capital", '"Paris"')
    assert (put.returncode, put.stderr) == (0, "")
    with Ledger.open(settings, checkpoint_on_close=False) as ledger:
        ledger.sem.put("world/country/es/capital", "Madrid")  # saved, not yet checkpointed
    spain = SemEntry.id_for("world/country/es/capital")
    raw = RawTable(settings)
    raw.set_column(spain, 1, "state", raw.state(spain, 1).replace(b"Madrid", b"Sevill"))
    put = mace_process(env, "sem", "put", "world/country/it/capital", '"Rome"')
    assert put.returncode == 0 and put.stdout != ""
    assert put.stderr == (
        f"mace: warning: no checkpoint written: INTEGRITY_FAILURE: stream {spain} version 1:"
        " MAC mismatch\n"
    )
    asked = mace_process(env, "checkpoint")
    assert (asked.returncode, asked.stdout) == (1, "")
    assert asked.stderr == f"mace: INTEGRITY_FAILURE: stream {spain} version 1: MAC mismatch\n"
    assert len(chain(settings)) == 1


def test_an_edited_head_index_row_makes_the_next_checkpoint_refuse(
    ledger: Ledger, settings: Settings
) -> None:
    ledger.sem.put("world/country/fr/capital", "Paris")
    writer(ledger).write()
    ledger.sem.put("world/country/fr/capital", "Lyon")  # the stream moves on: its bucket is read
    stream = SemEntry.id_for("world/country/fr/capital")
    table = "mace_head_buckets"
    entries = orjson.dumps([[str(stream), 5]])
    RawTable(settings).execute(f"UPDATE {table} SET entries = %s", (entries,))
    with pytest.raises(IntegrityFailure, match="the head index disagrees with checkpoint 1"):
        writer(ledger).write()
    assert len(chain(settings)) == 1
