"""Witnessing per c2sp.org/tlog-witness, on SQLite and PostgreSQL, on stores as ``mace`` leaves
them (checkpointed on every write): ``mace checkpoint witness URL...`` against a witness that
follows the spec (`support.witness_server`), each of its answers, the cosignatures kept beside
the checkpoint, and ``mace verify --all --policy FILE``, which a store rolled back, or whose tail
was deleted, after a witnessed checkpoint fails naming the size the witness cosigned.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import canonical_line
from support.go_note_verifier import GoNoteVerifier
from support.ledger_fixtures import RawTable, run
from support.replay_cli import new_job
from support.store_backups import roll_back, save
from support.witness_server import SpecWitness, serving

from domain.checkpoint import CHECKPOINT_STREAM
from domain.checkpoint_note import VerifierKey, parse_note, parse_vkey
from domain.cosignature import cosignature_problem
from infrastructure.storage.settings import Settings, SQLiteStore


def log_vkey(capsys: pytest.CaptureFixture[str]) -> VerifierKey:
    code, out, err = run(capsys, "checkpoint", "public-key", "--vkey")
    assert (code, err) == (0, ""), err
    return parse_vkey(out)


def witness(capsys: pytest.CaptureFixture[str], *urls: str) -> tuple[int, str, str]:
    return run(capsys, "checkpoint", "witness", *urls)


def exported_note(capsys: pytest.CaptureFixture[str], path: Path) -> bytes:
    code, _, err = run(capsys, "checkpoint", "export", "--note", "-o", str(path))
    assert (code, err) == (0, ""), err
    return path.read_bytes()


def write_policy(path: Path, log: VerifierKey, quorum: int, *witnesses: str) -> Path:
    lines = [f"log {log.encoded()}", *witnesses, f"quorum {quorum}  # at least this many"]
    path.write_text("# the ledger and who witnesses it\n" + "\n".join(lines) + "\n")
    return path


def one_witness_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], w: SpecWitness, url: str
) -> Path:
    """A policy of the test store's log, ``w`` at ``url`` its one witness, quorum 1."""
    line = f"witness w1 {w.vkey.encoded()} {url}"
    return write_policy(tmp_path / "p.policy", log_vkey(capsys), 1, line)


def rolled_back(url: str, cosigned: int, older: dict[str, Any]) -> str:
    """What ``verify --all --policy`` says of a store whose newest checkpoint is ``older`` while
    the witness at ``url`` cosigned ``cosigned`` events of the log."""
    return (
        f"mace: INTEGRITY_FAILURE: stream {CHECKPOINT_STREAM} version {older['number']}: witness"
        f" {url} has cosigned tree size {cosigned} of this log, but the store's newest checkpoint"
        f" covers {older['tree_size']} events: the store was rolled back or its tail deleted\n"
    )


@pytest.fixture
def spec_witness(
    cli_env: Settings, capsys: pytest.CaptureFixture[str]
) -> Iterator[tuple[SpecWitness, str]]:
    """A witness that trusts the test store's log key, answering at its URL; one job recorded."""
    new_job(capsys)
    w = SpecWitness("witness.example/w1")
    w.trust(log_vkey(capsys))
    with serving(w) as url:
        yield w, url


def test_a_witness_cosigns_the_newest_checkpoint_and_the_note_carries_its_cosignature(
    spec_witness: tuple[SpecWitness, str],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    go_note_verifier: GoNoteVerifier,
) -> None:
    w, url = spec_witness
    code, out, err = witness(capsys, url)
    assert (code, err) == (0, ""), err
    note = parse_note(exported_note(capsys, tmp_path / "note"))
    # Go's verifier, holding the log's key alone, ignores the cosignature line as the spec says.
    vkey = log_vkey(capsys).encoded()
    assert go_note_verifier.verify(vkey, tmp_path / "note")[0] == 0
    size = int(note.text.split("\n")[1])
    assert out.startswith(f"witness {url} cosigned checkpoint ")
    assert f"({size} events, root " in out
    assert out.endswith(" from size 0: 1 cosignature(s) kept\n")
    log, cosignature = note.signatures
    assert cosignature_problem(note.text, cosignature, w.vkey) is None
    assert w.latest[log.name][0] == size

    new_job(capsys, "3 + 4", "s2")
    code, out, err = run(capsys, "checkpoint", "witness", url, "--json")
    assert (code, err) == (0, ""), err
    answer = canonical_line(out)
    # From the size the witness cosigned last (kept beside that checkpoint): no 409 on the way.
    assert answer["witnesses"] == [{"url": url, "old_size": size, "cosignatures": 1}]
    assert w.requests == [(0, 200), (size, 200)]
    assert w.latest[log.name][0] == answer["tree_size"] > size


def test_a_409_names_the_witness_size_and_the_request_is_made_again_from_it(
    spec_witness: tuple[SpecWitness, str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    w, url = spec_witness
    assert witness(capsys, url)[0] == 0
    ((size, _),) = w.latest.values()
    # The store forgets what the witness cosigned (a lost table): it asks from 0 and is told.
    RawTable(cli_env).execute("DELETE FROM mace_cosignatures")
    new_job(capsys, "3 + 4", "s2")
    code, out, err = witness(capsys, url)
    assert (code, err) == (0, ""), err
    assert out.endswith(f" from size {size}: 1 cosignature(s) kept\n")
    assert w.requests == [(0, 200), (0, 409), (size, 200)]


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (
            "unknown origin",
            "it does not know the log's origin (404): add the origin and vkey to it",
        ),
        (
            "unknown key",
            "it does not trust the log's key for this origin (403): add the log's vkey",
        ),
        ("bad proof", "the consistency proof does not hold against the tree it cosigned (422)"),
    ],
)
def test_a_refusing_witness_is_one_line_naming_it_and_nothing_is_kept(
    spec_witness: tuple[SpecWitness, str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    case: str,
    reason: str,
) -> None:
    w, url = spec_witness
    (origin,) = w.logs
    if case == "unknown origin":
        w.logs.clear()
    elif case == "unknown key":
        other = SpecWitness("another/key").vkey
        w.logs[origin] = VerifierKey.ed25519(origin, other.public_key)
    else:
        # The witness cosigned a tree of one event with another root: no proof from it holds.
        w.latest[origin] = (1, b"\x07" * 32)
    code, out, err = witness(capsys, url)
    assert (code, out) == (1, "")
    assert err == f"mace: WITNESS_FAILED: witness {url} refused the checkpoint: {reason}\n"
    assert RawTable(cli_env).execute("SELECT count(*) FROM mace_cosignatures") == [(0,)]


def test_a_witness_that_cannot_be_reached_or_does_not_answer_is_named_never_a_hang(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    new_job(capsys)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{closed.getsockname()[1]}"
    code, out, err = witness(capsys, gone)
    assert (code, out) == (1, "")
    assert err.startswith(f"mace: WITNESS_FAILED: witness {gone} cannot be reached: ")
    assert err.count("\n") == 1

    monkeypatch.setenv("MACE_WITNESS_TIMEOUT", "0.2")
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        mute = f"http://127.0.0.1:{silent.getsockname()[1]}"
        code, out, err = witness(capsys, mute)
    assert (code, out) == (1, "")
    assert err == f"mace: WITNESS_FAILED: witness {mute} did not answer within 0.2 s\n"


def test_verify_all_policy_requires_a_quorum_of_valid_cosignatures(
    spec_witness: tuple[SpecWitness, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    w, url = spec_witness
    log = log_vkey(capsys)
    absent = SpecWitness("witness.example/w2")  # listed, never reached: no URL
    listed = [f"witness w1 {w.vkey.encoded()} {url}", f"witness w2 {absent.vkey.encoded()}"]
    one = write_policy(tmp_path / "one.policy", log, 1, *listed)
    code, out, err = run(capsys, "verify", "--all", "--policy", str(one))
    assert (code, err) == (0, ""), err
    assert f"witness policy {one}: checkpoint " in out
    assert "is cosigned by w1 (quorum 1); no listed witness holds a larger tree" in out
    code, out, err = run(capsys, "verify", "--all", "--policy", str(one), "--json")
    answer = canonical_line(out)
    assert (code, err, answer["ok"]) == (0, "", True)
    assert answer["witnessed"] == {
        "number": answer["checkpoints"],
        "tree_size": answer["checkpointed"],
        "cosigners": ["w1"],
        "quorum": 1,
        "witnesses_asked": True,
    }

    two = write_policy(tmp_path / "two.policy", log, 2, *listed)
    code, out, err = run(capsys, "verify", "--all", "--policy", str(two))
    assert (code, out) == (1, "")
    assert err.startswith("mace: WITNESS_FAILED: checkpoint ")
    assert "is cosigned by 1 of the policy's witnesses (w1), below its quorum of 2\n" in err

    # Another log's key in the policy: the store's note is not that log's.
    other = VerifierKey.ed25519(log.name, absent.vkey.public_key)
    wrong = write_policy(tmp_path / "wrong.policy", other, 1, *listed)
    code, out, err = run(capsys, "verify", "--all", "--policy", str(wrong))
    assert code == 1
    assert err.startswith("mace: INTEGRITY_FAILURE: the store's newest checkpoint, against the")


def test_a_bad_policy_line_is_one_line_naming_it_exit_2(
    cli_env: Settings, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    new_job(capsys)
    path = tmp_path / "bad.policy"
    path.write_text(f"log {log_vkey(capsys).encoded()}\nquorum two\n")
    code, out, err = run(capsys, "verify", "--all", "--policy", str(path))
    assert (code, out) == (2, "")
    where = f"witness policy {path} line 2"
    assert err == f"mace: INVALID_INPUT: {where}: quorum 'two' is not a whole number\n"


def test_a_store_restored_from_before_a_witnessed_checkpoint_fails_naming_the_cosigned_size(
    spec_witness: tuple[SpecWitness, str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    w, url = spec_witness
    policy = one_witness_policy(tmp_path, capsys, w, url)
    assert witness(capsys, url)[0] == 0
    older = canonical_line(run(capsys, "checkpoint", "--json")[1])
    backup, head = save(cli_env, tmp_path)
    new_job(capsys, "3 + 4", "s2")
    assert witness(capsys, url)[0] == 0
    ((cosigned, _),) = w.latest.values()

    roll_back(cli_env, backup, head, older["number"])
    assert run(capsys, "verify", "--all")[0] == 0  # intact on its own: the documented limit
    code, out, err = run(capsys, "verify", "--all", "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err == rolled_back(url, cosigned, older)


def test_a_kept_cosigned_note_holds_the_store_to_it_with_no_witness_asked(
    spec_witness: tuple[SpecWitness, str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """``verify --all --checkpoint NOTE --policy``: a given checkpoint, as an auditor kept its
    cosigned note, must carry the quorum itself, and the store must hold it and extend it."""
    w, url = spec_witness
    older = canonical_line(run(capsys, "checkpoint", "--json")[1])
    backup, head = save(cli_env, tmp_path)
    new_job(capsys, "3 + 4", "s2")
    assert witness(capsys, url)[0] == 0
    note = tmp_path / "kept.note"
    exported_note(capsys, note)
    asked = len(w.requests)
    policy = one_witness_policy(tmp_path, capsys, w, url)
    given = ("verify", "--all", "--checkpoint", str(note), "--policy")
    code, out, err = run(capsys, *given, str(policy))
    assert (code, err) == (0, ""), err
    assert f"is cosigned by w1 (quorum 1); as {note} carries them (no witness asked)" in out
    assert len(w.requests) == asked

    absent = SpecWitness("witness.example/w2")
    listed = [f"witness w1 {w.vkey.encoded()} {url}", f"witness w2 {absent.vkey.encoded()}"]
    two = write_policy(tmp_path / "two.policy", log_vkey(capsys), 2, *listed)
    code, out, err = run(capsys, *given, str(two))
    assert (code, out) == (1, "")
    assert err == (
        f"mace: WITNESS_FAILED: checkpoint note {note}'s checkpoint is cosigned by 1 of the"
        " policy's witnesses (w1), below its quorum of 2\n"
    )

    roll_back(cli_env, backup, head, older["number"])
    code, out, err = run(capsys, *given, str(policy))
    assert (code, out) == (1, "")
    assert err.startswith(f"mace: INTEGRITY_FAILURE: stream {CHECKPOINT_STREAM} version ")
    assert "but the store holds no checkpoint of that size and root (its newest covers" in err
    assert err.endswith("the store was rolled back, its tail deleted or its log rewritten\n")


def test_a_tail_deleted_after_a_witnessed_checkpoint_fails_naming_the_cosigned_size(
    spec_witness: tuple[SpecWitness, str],
    cli_env: Settings,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    w, url = spec_witness
    policy = one_witness_policy(tmp_path, capsys, w, url)
    older = canonical_line(run(capsys, "checkpoint", "--json")[1])
    raw = RawTable(cli_env)
    column = "rowid" if isinstance(cli_env.parsed_store(), SQLiteStore) else "notification_id"
    ((head,),) = raw.execute(f"SELECT max({column}) FROM {{table}}")
    new_job(capsys, "3 + 4", "s2")
    assert witness(capsys, url)[0] == 0
    ((cosigned, _),) = w.latest.values()
    # The tail goes: the second job's events and the checkpoints that covered them.
    raw.execute(f"DELETE FROM {{table}} WHERE {column} > %s", (head,))
    code, out, err = run(capsys, "verify", "--all", "--policy", str(policy))
    assert (code, out) == (1, "")
    assert err == rolled_back(url, cosigned, older)
