"""The log published as static files (``c2sp.org/tlog-tiles``): ``DIR/checkpoint`` (the newest
checkpoint's signed note) and ``DIR/tile/<L>/<N>[.p/<W>]``, for a monitor to mirror from object
storage or a CDN and verify with the verifier key alone, no database access.

A directory is written whole or not at all: everything is staged in a temporary directory beside
``DIR`` and renamed over it, so a reader never sees a mix of two exports. Replacing an earlier
export takes two renames (the old one aside, the new one in): a reader between them finds no
``DIR``, and a crash between them leaves both beside it as ``.DIR.old-*`` and ``.DIR.new-*``.

Run again on a larger tree it replaces the directory, once the new tree extends the one
published there (its checkpoint verifies under the same key, its root is the root the new tiles
give at its size) and every tile it held is byte for byte the start of the new one: published
tiles never change. Partial tiles of older, smaller exports are kept while their tile is still
partial, as tlog-tiles asks. Entry bundles (``tile/entries``) are not written: a leaf's entry is
the event's stored bytes, its content; the leaf hashes in the level-0 tiles are what the tree
commits to, and whoever holds an event (a bundle, the store) hashes it to check its inclusion.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from domain.checkpoint_note import CheckpointBody, SignedNote, VerifierKey
from domain.errors import ErrorCode, InvalidInput, MaceError
from domain.merkle import HASH_SIZE, root_from_nodes
from domain.merkle_tiles import TILE_WIDTH, Tile, tile_nodes
from infrastructure.application.checkpoints import checked_note
from infrastructure.bundles.exported_checkpoints import read_checkpoint_file

CHECKPOINT_FILE: Final = "checkpoint"


class StagedTiles:
    """A tiles directory being written: the staging directory beside it, then `publish`."""

    def __init__(self, directory: Path, staging: Path) -> None:
        self.directory = directory
        self.staging = staging

    def publish(
        self, note: SignedNote, vkey: VerifierKey, size: int, tiles: Mapping[Tile, bytes]
    ) -> CheckpointBody | None:
        """Write ``tiles`` and ``note`` (of the tree of ``size`` leaves) and swap them in for the
        directory; the checkpoint published there before, if any, which the new tree extends."""
        previous = self._previous(vkey)
        files = {tile.path: data for tile, data in tiles.items()}
        try:
            if previous is not None:
                self._check_extends(previous, size, tiles)
                for tile, data in tiles.items():
                    files.update(self._published(tile, data))
            for name, data in files.items():
                path = self.staging / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            # Written last: a mirror copying files in order has every tile the note needs.
            (self.staging / CHECKPOINT_FILE).write_bytes(note.encoded())
            self._swap()
        except OSError as exc:
            raise InvalidInput(_cannot_write(self.directory, exc)) from None
        return previous

    def _previous(self, vkey: VerifierKey) -> CheckpointBody | None:
        """The checkpoint of the export in the directory, checked under ``vkey`` (None: the
        directory is absent or empty)."""
        directory = self.directory
        if not directory.exists() or not any(directory.iterdir()):
            return None
        file = directory / CHECKPOINT_FILE
        if not file.is_file():
            msg = (
                f"cannot write tiles to {directory}: it is not empty and holds no {CHECKPOINT_FILE}"
                " file (expected a new or empty directory, or one mace checkpoint tiles wrote)"
            )
            raise InvalidInput(msg)
        held = read_checkpoint_file(file)
        if not isinstance(held, SignedNote) or not any(s.by(vkey) for s in held.signatures):
            msg = (
                f"cannot write tiles to {directory}: its {CHECKPOINT_FILE} is not a note of"
                f" {vkey.name} (expected a new or empty directory, or this log's tiles)"
            )
            raise InvalidInput(msg)
        return checked_note(held, vkey, f"tiles checkpoint {file}")

    def _check_extends(
        self, previous: CheckpointBody, size: int, tiles: Mapping[Tile, bytes]
    ) -> None:
        """Refuse to replace an export the new tree does not extend: what a monitor mirrored
        must stay true."""
        source = f"the tiles published in {self.directory}"
        if previous.tree_size > size:
            reason = (
                f"{source} are of tree size {previous.tree_size}, larger than the store's newest"
                f" checkpoint ({size}): the store was rolled back or truncated"
            )
            raise _integrity(reason)
        if root_from_nodes(previous.tree_size, tile_nodes(size, tiles.__getitem__)) != (
            previous.root
        ):
            reason = (
                f"the store's tree (size {size}) does not extend {source} (size"
                f" {previous.tree_size}): its root at that size is another"
            )
            raise _integrity(reason)

    def _published(self, tile: Tile, data: bytes) -> dict[str, bytes]:
        """The files of ``tile`` the directory holds (the full tile, or partial ones of any
        width up to its own), each checked to be the start of ``data``: a published tile never
        changes. The older partial ones are kept, as tlog-tiles asks while a client may hold a
        checkpoint of their size; those of a tile now full are dropped, as it allows."""
        path = self.directory / tile.path
        if tile.full:
            held = {tile.path: TILE_WIDTH} if path.is_file() else {}
        else:
            partials = path.parent  # tile/<L>/<N>.p
            held = {
                f"{tile.path.rsplit('/', 1)[0]}/{name.name}": int(name.name)
                for name in (partials.iterdir() if partials.is_dir() else ())
                if name.name.isdecimal() and 0 < int(name.name) <= tile.width and name.is_file()
            }
        kept: dict[str, bytes] = {}
        for name, width in held.items():
            published = (self.directory / name).read_bytes()
            if published != data[: width * HASH_SIZE]:
                reason = (
                    f"{self.directory / name} is not the tile the store's tree holds: published"
                    " tiles never change (remove the file if it was damaged, to write it again)"
                )
                raise _integrity(reason)
            kept[name] = published
        return kept

    def _swap(self) -> None:
        directory = self.directory
        if not directory.exists() or not any(directory.iterdir()):
            self.staging.replace(directory)  # onto nothing, or onto an empty directory
            return
        # The old export moves aside onto an empty directory of its own, then the new one in.
        old = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.old-"))
        directory.replace(old)
        self.staging.replace(directory)
        shutil.rmtree(old)


@contextmanager
def staged_tiles(directory: Path) -> Iterator[StagedTiles]:
    """A staging directory beside ``directory`` (which must be a directory or absent, its parent
    one that exists and can be written), removed on leaving unless it was published."""
    directory = directory.absolute()  # `-o .` too has a parent to stage beside
    if directory.exists() and not directory.is_dir():
        msg = f"cannot write tiles to {directory}: it is a file, expected a directory"
        raise InvalidInput(msg)
    if not directory.parent.is_dir():
        msg = f"cannot write tiles to {directory}: its parent directory does not exist"
        raise InvalidInput(msg)
    try:
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.new-"))
    except OSError as exc:
        raise InvalidInput(_cannot_write(directory, exc)) from None
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the published tiles from a web server
    try:
        yield StagedTiles(directory, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _integrity(reason: str) -> MaceError:
    return MaceError(ErrorCode.INTEGRITY_FAILURE, reason, reason=reason)


def _cannot_write(directory: Path, exc: OSError) -> str:
    return f"cannot write tiles to {directory}: {exc.strerror or type(exc).__name__}"
