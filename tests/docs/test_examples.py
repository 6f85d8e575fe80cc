"""Every command example in README.md and docs/*.md runs, so that none goes stale.

How to write an example (the convention this test holds the docs to):

- Put shell examples in a fenced ``console`` block. A line starting with ``$ `` is a command
  (a trailing `` \\`` continues it); the other lines are its output, or a here-document's body.
- The blocks of one page run in order, in one fresh directory on the SQLite default store
  (``./mace.db``), with no ``MACE_*`` variable set: a later example may use what an earlier one
  on the same page recorded. Each block starts from that clean environment (``export`` lasts to
  the end of the block, ``NAME=value command`` for that command only; ``set -a`` then
  ``. FILE`` sets the ``NAME=value`` lines of FILE, as a shell does).
- A ``MACE_STORE`` (or ``MACE_READ_STORE``) set to a ``postgresql://`` URL, whatever its host and
  password, is the page's own fresh database on the test PostgreSQL (one per page): such
  examples run for real, so show a URL a reader can use (``$POSTGRES_PASSWORD@localhost``).
- Name ids where you can (``mace run ... --job-id tour-1``). Where the ledger makes an id (a
  receipt's), write ``<field>``: the value of that field in the most recent JSON an earlier
  command on the page printed or wrote to a file (``--json``).
- A command must exit 0, unless its comment says otherwise (``$ mace events nope  # exit 2``).
  Output shown under a command must appear in what it printed, in order; leave lines out
  freely, and write ``...`` within a line for text that changes from run to run.
- ``mace`` runs in-process. ``mace serve ... &`` starts the real service in the background (on
  a free port: ``localhost:PORT`` in later commands reaches it) until ``kill %1`` or the page's
  end; a command right after it must wait for it as a reader would (``curl --retry``). Commands
  that cannot run in a test (``mace serve`` in the foreground, ``bench``, ``loadtest``,
  ``follow``, ``demo``) are parsed by mace's own parser: an unknown command or flag still fails.
  Other programs are run if the session knows them (``export``, ``set -a``, ``. FILE``,
  ``cat > FILE <<'EOF'``, ``python3 -c``, ``curl``, ``openssl``, ``kill %1``); the rest must be in
  ``NOT_EXECUTED`` (tests/support/doc_examples.py) with the reason they are not run, and show no
  output. One command per line: no pipes, ``&&`` or ``;``.
- ``bash`` blocks are the README's two commands for a fresh machine only (copied as they are;
  tests/tooling/test_project_layout.py holds CI to the second, tests/cli/test_readme_examples.py
  runs the first). ``python`` blocks are run whole.

Besides the examples: every ``mace ...`` in inline code names a real command and real flags,
every ``MACE_*`` variable is a setting, every path under the project's folders exists, and every
link between the pages leads somewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from support.doc_examples import (
    ROOT,
    Block,
    Session,
    check_parses,
    console_examples,
    documents,
    fenced_blocks,
    session_process,
)

from infrastructure.cli.command_table import BY_NAME
from infrastructure.cli.common import Parser
from infrastructure.storage.settings import Settings

LANGUAGES = {"console", "python", "json", "yaml", ""}
FOLDERS = ("domain/", "projections/", "infrastructure/", "tests/", "docs/", ".ci/")
ROOMS = ("api/", "application/", "bundles/", "cli/", "storage/", "tooling/")  # of infrastructure/
LAYERS = ("domain", "projections", "infrastructure", "tests")
HARNESS_SETTINGS = {"MACE_TEST_DATABASE_URL"}  # read by the test harness, not by mace


def blocks(language: str) -> list[Block]:
    return [b for path in documents() for b in fenced_blocks(path) if b.language == language]


def prose(path: Path) -> str:
    """A page without its fenced blocks."""
    text = path.read_text()
    return re.sub(r"^(`{3,}).*?^\1\s*$", "", text, flags=re.S | re.M)


def inline_code(path: Path) -> list[str]:
    return [span.replace("\\|", "|") for span in re.findall(r"`([^`\n]+)`", prose(path))]


def pages_with_examples() -> list[Path]:
    return [
        path for path in documents() if any(b.language == "console" for b in fenced_blocks(path))
    ]


@pytest.mark.parametrize(
    "page", pages_with_examples(), ids=lambda path: str(path.relative_to(ROOT))
)
def test_every_command_example_runs(
    page: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    def database() -> str:
        # Asked for only by a page whose examples use PostgreSQL: the others never start it.
        make: Callable[[], str] = request.getfixturevalue("make_postgres_database")
        return make()

    session = Session(tmp_path, database)
    try:
        for block in fenced_blocks(page):
            if block.language == "console":
                session.run_block(block)
    finally:
        session.close()


def test_code_blocks_follow_the_convention() -> None:
    for path in documents():
        for block in fenced_blocks(path):
            if block.language == "bash":
                assert path.name == "README.md", f"{block.where()}: use a console block"
                continue
            assert block.language in LANGUAGES, f"{block.where()}: a {block.language!r} block"
            if block.language == "console":
                assert console_examples(block), f"{block.where()}: a console block with no $ line"


def test_the_fresh_machine_commands_are_the_readmes_only_bash_blocks() -> None:
    """The two commands stay copyable as they are; their mace steps still parse."""
    fresh = blocks("bash")
    assert [block.path.name for block in fresh] == ["README.md", "README.md"]
    assert "mace demo" in fresh[0].text and "pytest" in fresh[1].text
    for block in fresh:
        for step in block.text.split(" && "):
            words = step.split()
            if words[0].endswith("/mace"):
                example = console_examples(Block(block.path, block.line, "console", (f"$ {step}",)))
                check_parses(words[1:], example[0])


@pytest.mark.parametrize(
    "block", blocks("python"), ids=lambda block: block.where().replace("/", ".")
)
def test_every_python_example_runs(block: Block, tmp_path: Path) -> None:
    clean = Session(tmp_path).base_environment()
    printed = io.StringIO()
    with session_process(tmp_path, clean), contextlib.redirect_stdout(printed):
        exec(compile(block.text, block.where(), "exec"), {})
    if "RunRecorder(" not in block.text or "replay_harness(" in block.text:
        return  # the harness guide's example asserts what it shows itself
    # The run the example records, read back through the command line.
    job_id, replayable = printed.getvalue().split()
    assert re.fullmatch(r"[0-9a-f]{64}", job_id)
    assert replayable == "False"
    session = Session(tmp_path)
    outcome = session.mace(["events", job_id, "--type", "ToolResult", "--json"], clean)
    assert outcome.code == 0, outcome.err
    (line,) = outcome.out.splitlines()
    assert orjson.loads(line)["payload"]["result"] == {"hits": 3}


def command_parsers(words: list[str], where: str) -> tuple[list[argparse.ArgumentParser], str]:
    """The parsers of the (sub)command the words name (alternatives ``a|b`` give several), and
    the words after it."""
    command = BY_NAME.get(words[0])
    assert command is not None, f"{where}: mace has no command {words[0]!r}"
    parser = Parser(prog=f"mace {command.name}")
    command.add_arguments(parser)
    parsers: list[argparse.ArgumentParser] = [parser]
    rest = words[1:]
    while rest:
        choices = [
            action.choices
            for action in parsers[0]._actions
            if isinstance(action, argparse._SubParsersAction)
        ]
        if not choices:
            break
        names = rest[0].split("|")
        if not all(name in choices[0] for name in names):
            break
        parsers = [choices[0][name] for name in names]
        rest = rest[1:]
    return parsers, " ".join(rest)


def test_every_command_named_in_the_text_exists_with_its_flags() -> None:
    checked = 0
    for path in documents():
        for span in inline_code(path):
            if not span.startswith("mace ") or span.startswith("mace: "):
                continue
            where = f"{path.relative_to(ROOT)}: `{span}`"
            words = re.sub(r"\$\([^)]*\)", "", span).split()[1:]
            if words[0].startswith("-") or words[0].isupper():  # mace --help, mace COMMAND --help
                allowed = {"-h", "--help", "--version"}
                rest = " ".join(words)
            else:
                parsers, rest = command_parsers(words, where)
                allowed = {
                    option
                    for parser in parsers
                    for action in parser._actions
                    for option in action.option_strings
                }
            for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z0-9-]*)", rest):
                assert flag in allowed, f"{where}: no flag {flag} (it takes {sorted(allowed)})"
            checked += 1
    assert checked > 50  # the CLI reference names every command


def test_every_setting_named_is_one_mace_reads() -> None:
    settings = {"MACE_" + name.upper() for name in Settings.model_fields} | HARNESS_SETTINGS
    for path in documents():
        for name in set(re.findall(r"\bMACE_[A-Z_]+\b", path.read_text())):
            assert name in settings, f"{path.relative_to(ROOT)}: {name} is no setting"


def test_every_path_named_exists() -> None:
    """Paths from the project's root, or from ``infrastructure/`` (``application/jobs.py``), and
    bare module names (``chain.py``: somewhere in the project)."""
    modules = {module.name for folder in LAYERS for module in (ROOT / folder).rglob("*.py")}
    for path in documents():
        for span in inline_code(path):
            if " " in span or "<" in span:
                continue
            where = f"{path.relative_to(ROOT)}: no {span}"
            if span.startswith(FOLDERS):
                assert list(ROOT.glob(span.rstrip("/"))), where
            elif span.startswith(ROOMS):
                assert (ROOT / "infrastructure" / span).exists(), where
            elif re.fullmatch(r"\w+\.py", span):
                assert span in modules, where


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", prose(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_link_between_pages_leads_somewhere() -> None:
    for path in documents():
        for target in re.findall(r"\]\(([^)\s]+)\)", prose(path)):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            assert linked.exists(), f"{path.relative_to(ROOT)}: link to {target}: no such file"
            if anchor:
                assert anchor in anchors(linked), f"{path.relative_to(ROOT)}: no #{anchor}"
