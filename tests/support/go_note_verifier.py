"""Go's signed-note verifier (``golang.org/x/mod/sumdb/note``), as a test runs it on a file, Go's
tiled-log verifier (``golang.org/x/mod/sumdb/tlog``), as a test runs it on a tiles directory, and
a tlog-proof checker made of both (``tlog.CheckRecord`` and ``note.Open``), run on a proof file.

`go_note/verify_note.go`, `go_tiles/verify_tiles.go` and `go_proof/verify_proof.go` are built once
per test session,
offline, from Debian's ``golang-golang-x-mod-dev`` (``GO111MODULE=off
GOPATH=/usr/share/gocode``): no module download, no code of ours in the verifiers.
``.ci/setup-test-machine`` installs Go and the module; without them the tests that need a
verifier skip on a developer's machine and fail in CI.
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
TILES_SOURCE = Path(__file__).with_name("go_tiles") / "verify_tiles.go"
PROOF_SOURCE = Path(__file__).with_name("go_proof") / "verify_proof.go"
MISSING = (
    "no Go or no golang.org/x/mod under /usr/share/gocode: run .ci/setup-test-machine (it installs"
    " Debian's golang-go and golang-golang-x-mod-dev)"
)


@dataclass(frozen=True)
class GoNoteVerifier:
    """The built verifier: ``verify(vkey, file)`` is its exit code and standard output (of the
    note verifier, or of the tlog-proof checker, which is run the same way)."""

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


@dataclass(frozen=True)
class GoTilesVerifier:
    """The built tiles verifier: ``verify(vkey, directory, *args)`` is its exit code and output
    (``args``: ``INDEX:HEXLEAFHASH`` records to prove, ``--old SIZE:BASE64ROOT``)."""

    binary: Path

    def verify(self, vkey: str, directory: Path, *args: str) -> tuple[int, str]:
        done = subprocess.run(
            [str(self.binary), vkey, str(directory), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.returncode, done.stdout + done.stderr


def built(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``source`` built offline against Debian's golang.org/x/mod; the test skips (fails in CI)
    without them."""
    go = shutil.which("go")
    if go is None or not NOTE_PACKAGE.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    directory = tmp_path_factory.mktemp(source.stem)
    binary = directory / source.stem
    env = os.environ | {
        "GO111MODULE": "off",
        "GOPATH": str(GOPATH),
        "GOCACHE": str(directory / "cache"),
        "GOFLAGS": "",
        "GOPROXY": "off",
    }
    subprocess.run(
        [go, "build", "-o", str(binary), str(source)],
        env=env,
        check=True,
        capture_output=True,
        cwd=directory,
    )
    return binary


@pytest.fixture(scope="session")
def go_note_verifier(tmp_path_factory: pytest.TempPathFactory) -> GoNoteVerifier:
    return GoNoteVerifier(built(SOURCE, tmp_path_factory))


@pytest.fixture(scope="session")
def go_tiles_verifier(tmp_path_factory: pytest.TempPathFactory) -> GoTilesVerifier:
    return GoTilesVerifier(built(TILES_SOURCE, tmp_path_factory))


@pytest.fixture(scope="session")
def go_proof_verifier(tmp_path_factory: pytest.TempPathFactory) -> GoNoteVerifier:
    return GoNoteVerifier(built(PROOF_SOURCE, tmp_path_factory))
