"""Go's signed-note verifier (``golang.org/x/mod/sumdb/note``), as a test runs it on a file.

`go_note/verify_note.go` is built once per test session, offline, from Debian's
``golang-golang-x-mod-dev`` (``GO111MODULE=off GOPATH=/usr/share/gocode``): no module download,
no code of ours in the verifier. ``.ci/setup-test-machine`` installs Go and the module; without
them the tests that need the verifier skip on a developer's machine and fail in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

GOPATH = Path("/usr/share/gocode")
NOTE_PACKAGE = GOPATH / "src/golang.org/x/mod/sumdb/note"
SOURCE = Path(__file__).with_name("go_note") / "verify_note.go"
MISSING = (
    "no Go or no golang.org/x/mod under /usr/share/gocode: run .ci/setup-test-machine (it installs"
    " Debian's golang-go and golang-golang-x-mod-dev)"
)


@dataclass(frozen=True)
class GoNoteVerifier:
    """The built verifier: ``verify(vkey, file)`` is its exit code and standard output."""

    binary: Path

    def verify(self, vkey: str, note: Path) -> tuple[int, str]:
        done = subprocess.run(
            [str(self.binary), vkey, str(note)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.stderr == "" or done.returncode == 2, done.stderr
        return done.returncode, done.stdout


@pytest.fixture(scope="session")
def go_note_verifier(tmp_path_factory: pytest.TempPathFactory) -> GoNoteVerifier:
    go = shutil.which("go")
    if go is None or not NOTE_PACKAGE.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    directory = tmp_path_factory.mktemp("go-note")
    binary = directory / "verify_note"
    env = os.environ | {
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(directory / "cache"),
        "GOFLAGS": "",
        "GOPROXY": "off",
    }
    subprocess.run(
        [go, "build", "-o", str(binary), str(SOURCE)],
        env=env,
        check=True,
        capture_output=True,
        cwd=directory,
    )
    return GoNoteVerifier(binary)
