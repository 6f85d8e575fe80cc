"""``mace checkpoint tiles -o DIR``: the log's tree as C2SP tlog-tiles, on SQLite and PostgreSQL.

A monitor holding only DIR's files and the verifier key checks the note's signature, recomputes
the root from the tiles, verifies the inclusion of events (their leaf hashes recomputed from the
store's rows as the checkpoint writer makes them) and the consistency of a larger export with an
earlier one it kept: the `monitor` below imports nothing of the ledger but the pure Merkle and
note functions. A tile changed on its way finds no root; a log node edited in the database is
refused before it is published. Unusable ``-o`` is one line, exit 2, nothing written.

The stores are in the state CLI writes leave them: the command checkpoints every event first.
"""

from __future__ import annotations

import base64
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from support.checkpoint_chain import stored_leaves
from support.cli_output import assert_failure_line, canonical_line
from support.go_note_verifier import GoTilesVerifier
from support.ledger_fixtures import TEST_CHECKPOINT_KEY, RawTable, run

from domain.checkpoint_note import (
    CheckpointBody,
    NoteSignature,
    SignedNote,
    parse_checkpoint_text,
    parse_note,
    parse_vkey,
)
from domain.merkle import (
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    verify_consistency,
    verify_inclusion,
)
from domain.merkle_tiles import Tile, tile_nodes, tiles_of, tiles_problem
from infrastructure.application.ledger import Ledger
from infrastructure.storage.keys.checkpoint_key import read_checkpoint_key
from infrastructure.storage.settings import Settings

Capsys = pytest.CaptureFixture[str]


@dataclass(frozen=True)
class Monitor:
    """What a monitor knows of a tiles directory it verified: the checkpoint and its tiles."""

    directory: Path
    checkpoint: CheckpointBody

    def read(self, tile: Tile) -> bytes:
        return (self.directory / tile.path).read_bytes()

    def node(self, level: int, index: int) -> bytes:
        return tile_nodes(self.checkpoint.tree_size, self.read)(level, index)


def monitor(directory: Path, vkey: str) -> Monitor:
    """Verify ``directory`` with the verifier key alone: the note's Ed25519 signature by the
    vkey for its origin, then every tile against the note's root."""
    key = parse_vkey(vkey)
    note = parse_note((directory / "checkpoint").read_bytes())
    (line,) = [s for s in note.signatures if s.by(key)]
    Ed25519PublicKey.from_public_bytes(key.public_key).verify(line.signature, note.text.encode())
    body = parse_checkpoint_text(note.text)
    assert body.origin == key.name
    problem = tiles_problem(
        body.tree_size, body.root, lambda tile: (directory / tile.path).read_bytes()
    )
    assert problem is None, problem
    return Monitor(directory, body)


def refused(err: str, code: str, reason: str) -> None:
    assert_failure_line(err, code)
    assert reason in err, err


def published(directory: Path) -> set[str]:
    return {str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()}


def record(settings: Settings, events: int, start: int = 0) -> None:
    with Ledger.open(settings) as ledger:
        for n in range(start, start + events):
            ledger.sem.put(f"world/country/c{n}/capital", f"city {n}")


def tiles(capsys: Capsys, directory: Path) -> dict[str, object]:
    code, out, err = run(capsys, "checkpoint", "tiles", "-o", str(directory), "--json")
    assert (code, err) == (0, ""), err
    return canonical_line(out)


def vkey(capsys: Capsys) -> str:
    code, out, err = run(capsys, "checkpoint", "public-key", "--vkey")
    assert (code, err) == (0, ""), err
    return out.strip()


def test_a_monitor_verifies_inclusion_and_consistency_from_the_tiles_alone(
    cli_env: Settings, capsys: Capsys, tmp_path: Path, go_tiles_verifier: GoTilesVerifier
) -> None:
    record(cli_env, 300)
    directory = tmp_path / "tiles"
    first = tiles(capsys, directory)
    key = vkey(capsys)
    kept = tmp_path / "kept"  # what a monitor mirrored of the first export
    shutil.copytree(directory, kept)
    old = monitor(kept, key)
    assert old.checkpoint.tree_size == first["tree_size"]
    assert old.checkpoint.tree_size > 256
    assert published(kept) == {"checkpoint", *(t.path for t in tiles_of(old.checkpoint.tree_size))}

    record(cli_env, 240, start=300)
    second = tiles(capsys, directory)
    assert second["previous_tree_size"] == first["tree_size"]
    new = monitor(directory, key)
    size, old_size = new.checkpoint.tree_size, old.checkpoint.tree_size
    assert size > 512
    # Every file of the first export is the same, but the partial tile now full; the partial
    # level-1 tile of the first export's size is kept beside the new one, still partial.
    assert published(directory) == {
        "checkpoint",
        *(t.path for t in tiles_of(size)),
        "tile/1/000.p/1",
    }
    assert {
        name for name in published(kept) - {"checkpoint"} if name not in published(directory)
    } == {"tile/0/001.p/" + str(old_size - 256)}
    for name in published(kept) & published(directory) - {"checkpoint"}:
        assert (kept / name).read_bytes() == (directory / name).read_bytes(), name

    leaves = [leaf for _, leaf in stored_leaves(cli_env)]
    assert len(leaves) == size
    for index in random.Random(7).sample(range(size), 12):
        proof = inclusion_proof_from_nodes(index, size, new.node)
        assert verify_inclusion(leaves[index], index, size, proof, new.checkpoint.root)
    proof = consistency_proof_from_nodes(old_size, size, new.node)
    assert verify_consistency(old_size, size, old.checkpoint.root, new.checkpoint.root, proof)
    # Go's checksum-database code, which tlog-tiles comes from, gives the same verdicts.
    records = [f"{index}:{leaves[index].hex()}" for index in (0, 255, 256, old_size, size - 1)]
    old_tree = f"{old_size}:{base64.b64encode(old.checkpoint.root).decode()}"
    assert go_tiles_verifier.verify(key, directory, *records, "--old", old_tree) == (
        0,
        f"verified: {size}\n",
    )
    assert go_tiles_verifier.verify(key, directory, f"3:{leaves[4].hex()}")[0] == 1
    # Run again on the same tree: the same files.
    before = {name: (directory / name).read_bytes() for name in published(directory)}
    assert tiles(capsys, directory)["previous_tree_size"] == size
    assert {name: (directory / name).read_bytes() for name in published(directory)} == before


def test_a_tampered_tile_is_found_and_never_overwritten(
    cli_env: Settings, capsys: Capsys, tmp_path: Path, go_tiles_verifier: GoTilesVerifier
) -> None:
    record(cli_env, 270)
    directory = tmp_path / "tiles"
    tiles(capsys, directory)
    key = vkey(capsys)
    body = monitor(directory, key).checkpoint
    partial = next(t for t in tiles_of(body.tree_size) if t.level == 0 and not t.full)
    first_leaf = f"0:{stored_leaves(cli_env)[0][1].hex()}"
    assert go_tiles_verifier.verify(key, directory, first_leaf)[0] == 0
    for tampered in ("tile/0/000", partial.path):
        copy = tmp_path / tampered.replace("/", "_")
        shutil.copytree(directory, copy)
        data = bytearray((copy / tampered).read_bytes())
        data[40] ^= 1
        (copy / tampered).write_bytes(bytes(data))
        with pytest.raises(AssertionError, match=r"does not hash to|another root"):
            monitor(copy, key)
        assert go_tiles_verifier.verify(key, copy, first_leaf)[0] == 1
    # A published full tile the store's tree does not hold is never replaced.
    data = bytearray((directory / "tile/0/000").read_bytes())
    data[0] ^= 1
    (directory / "tile/0/000").write_bytes(bytes(data))
    code, out, err = run(capsys, "checkpoint", "tiles", "-o", str(directory))
    assert (code, out) == (1, "")
    refused(err, "INTEGRITY_FAILURE", "published tiles never change")
    assert (directory / "tile/0/000").read_bytes() == bytes(data)


def test_tiles_of_a_tree_the_store_does_not_extend_are_never_replaced(
    cli_env: Settings, capsys: Capsys, tmp_path: Path
) -> None:
    """What a store rolled back (a larger published tree) or rewritten (another root at the
    published size) finds in DIR: notes the log's key signed, as it did before the rollback."""
    record(cli_env, 10)
    directory = tmp_path / "tiles"
    tiles(capsys, directory)
    key = parse_vkey(vkey(capsys))
    body = monitor(directory, vkey(capsys)).checkpoint
    signer = read_checkpoint_key(TEST_CHECKPOINT_KEY)
    claims = {
        "the store was rolled back or truncated": CheckpointBody(
            body.origin, body.tree_size + 5, body.root
        ),
        "does not extend": CheckpointBody(body.origin, body.tree_size, bytes(32)),
    }
    for reason, claimed in claims.items():
        text = claimed.text()
        line = NoteSignature(key.name, key.key_id, signer.sign(text.encode()))
        note = SignedNote(text, (line,)).encoded()
        (directory / "checkpoint").write_bytes(note)
        code, out, err = run(capsys, "checkpoint", "tiles", "-o", str(directory))
        assert (code, out) == (1, "")
        refused(err, "INTEGRITY_FAILURE", reason)
        assert (directory / "checkpoint").read_bytes() == note


def test_an_edited_log_node_is_refused_not_published(
    cli_env: Settings, capsys: Capsys, tmp_path: Path
) -> None:
    record(cli_env, 20)
    RawTable(cli_env).execute(
        "UPDATE mace_log_nodes SET hash = %s WHERE level = 0 AND idx = 5", (b"\x07" * 32,)
    )
    (outputs := tmp_path / "outputs").mkdir()  # beside the SQLite store: only what -o writes
    code, out, err = run(capsys, "checkpoint", "tiles", "-o", str(outputs / "tiles"))
    assert (code, out) == (1, "")
    refused(err, "INTEGRITY_FAILURE", "the stored log nodes do not make its tree")
    assert list(outputs.iterdir()) == []


def test_an_output_that_cannot_be_a_tiles_directory_is_one_line_and_writes_nothing(
    cli_env: Settings, capsys: Capsys, tmp_path: Path
) -> None:
    record(cli_env, 3)
    (outputs := tmp_path / "outputs").mkdir()  # beside the SQLite store: only what -o writes
    file = outputs / "a-file"
    file.write_text("x")
    foreign = outputs / "foreign"
    foreign.mkdir()
    (foreign / "index.html").write_text("x")
    refusals = {
        str(file): "it is a file, expected a directory",
        str(outputs / "missing" / "tiles"): "its parent directory does not exist",
        str(foreign): "it is not empty and holds no checkpoint file",
        "/proc/tiles": "cannot write tiles to /proc/tiles",
    }
    for output, reason in refusals.items():
        code, out, err = run(capsys, "checkpoint", "tiles", "-o", output)
        assert (code, out) == (2, ""), output
        refused(err, "INVALID_INPUT", reason)
    assert sorted(p.name for p in outputs.iterdir()) == ["a-file", "foreign"]
    assert published(foreign) == {"index.html"}
