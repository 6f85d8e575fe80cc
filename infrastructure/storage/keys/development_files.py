"""Key files made for development: beside the SQLite store, private, announced once per store.

With no key configured, development use gets a file next to the SQLite store (the keyring, the
checkpoint key). Both are made the same way, here: mode 0600 from the first byte, whole or not at
all, and announced by a warning from the one process that made it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path


def create_development_file(path: Path, content: bytes, what: str, remedy: str) -> None:
    """Make ``path`` hold ``content`` (mode 0600) unless it exists; warn if this call made it.

    The file is written aside and linked into place, so that a process racing to make it finds
    either no file or the whole of the one that won, never a half-written key; the loser's
    content is dropped. The warning is said once, by the process that made the file: one on
    every command would be noise that teaches people to skip the lines that matter.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp makes the file 0600 before anything is written to it.
    fd, draft = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
            logging.getLogger("mace.keys").warning("created %s %s; %s", what, path, remedy)
    finally:
        os.unlink(draft)
