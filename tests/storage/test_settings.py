"""What the settings keep to themselves and what they refuse: no database password in any dump,
repr or string of them; a MACE_STORE that cannot be parsed, or whose ``?schema=`` is not a plain
identifier, is refused in one line naming MACE_STORE, before anything connects."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from infrastructure.storage.keys.checkpoint_key import DEVELOPMENT_SUFFIX
from infrastructure.storage.settings import SQLiteStore

PASSWORD = "pa55-w0rd-not-to-show"
REPOSITORY = Path(__file__).resolve().parents[2]


def ignored(name: str) -> bool:
    patterns = (REPOSITORY / ".gitignore").read_text().split()
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def test_development_key_files_are_git_ignored() -> None:
    # The demo and first use make private keys beside the store: `git add .` must not stage them.
    store = SQLiteStore(Path("mace.db"))
    for suffix in (DEVELOPMENT_SUFFIX, ".keys.json"):
        made = store.development_file(suffix)
        assert ignored(made.name), made.name
