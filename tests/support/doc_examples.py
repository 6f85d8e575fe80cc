"""The command examples of README.md and docs/*.md, read and run.

The convention they follow is stated where it is checked, in tests/docs/test_examples.py: console
blocks of ``$ `` commands, one session per page in a fresh directory on the SQLite default, one
environment per block, ``<field>`` placeholders from earlier JSON output, exit 0 unless a comment
says ``exit N``, shown output found in what was printed. ``mace`` runs in-process, on the page's own
PostgreSQL database where an example points ``MACE_STORE`` at PostgreSQL; ``mace serve ... &`` runs
as a real service that ``curl`` talks to; what cannot run in a test is parsed (`PARSED_ONLY`) or
listed with its reason (`NOT_EXECUTED`).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import orjson

from support.ledger_fixtures import MACE_MAIN
from support.postgres_server import free_port

ROOT: Final = Path(__file__).resolve().parents[2]

PARSED_ONLY: Final[Mapping[str, str]] = {
    "serve": "runs the HTTP service until it is stopped (``mace serve ... &`` runs, in the"
    " background, until ``kill %1`` or the page's end)",
    "loadtest": "starts the service over PostgreSQL and loads it for minutes;"
    " tests/tooling/test_load_test.py runs a tiny load",
    "bench": "measures for minutes; tests/tooling/test_bench.py runs a tiny bench",
    "follow": "PostgreSQL only, and runs until Ctrl-C; tests/application/test_read_models.py"
    " follows on PostgreSQL",
    "demo": "run whole by tests/cli/test_readme_examples.py and tests/tooling/test_demo.py",
}
"""``mace`` commands the docs test parses but does not run, and why."""

NOT_EXECUTED: Final[Mapping[str, str]] = {
    "docker": "needs a Docker engine; compose.yaml is read by Docker Compose's own `config` in"
    " tests/tooling/test_compose.py",
}
"""Programs in examples that the docs test does not run, and why."""

MACE: Final = frozenset({"mace", ".venv/bin/mace"})
PROGRAMS: Final = frozenset({"curl", "openssl"})
"""Programs the docs test runs as they are, in the page's directory and the block's environment."""
ACTIVATE: Final = ".venv/bin/activate"
"""``. .venv/bin/activate``: the reader's shell finds ``mace``; this test runs it in-process."""
STORES: Final = frozenset({"MACE_STORE", "MACE_READ_STORE"})
ADDRESS: Final = re.compile(r"\b(localhost|127\.0\.0\.1):(\d+)\b")
PLACEHOLDER: Final = re.compile(r"<([a-z][a-z0-9_]*)>")
ASSIGNMENT: Final = re.compile(r"[A-Z_][A-Z0-9_]*=")
CAPTURE: Final = re.compile(r"([A-Z_][A-Z0-9_]*)=\$\((.*)\)")
VARIABLE: Final = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
EXPECTED_EXIT: Final = re.compile(r"exit (\d+)\b")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it starts (the fence's line) and what it holds."""

    path: Path
    line: int
    language: str
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def where(self, offset: int = 0) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line + 1 + offset}"


@dataclass(frozen=True, slots=True)
class Example:
    """One ``$ `` command of a console block, the output it shows and its here-document."""

    where: str
    command: str
    output: tuple[str, ...]
    heredoc: str | None


def documents() -> list[Path]:
    """README.md and every page under docs/, in that order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def fenced_blocks(path: Path) -> list[Block]:
    """Every fenced block of a Markdown file, with its language (the info string's first word)."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = re.match(r"(`{3,})(.*)$", lines[index])
        if opening is None:
            index += 1
            continue
        fence, info = opening.group(1), opening.group(2).strip()
        end = index + 1
        while end < len(lines) and not lines[end].startswith(fence):
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{index + 1}: unclosed code block")
        language = info.split()[0] if info else ""
        blocks.append(Block(path, index + 1, language, tuple(lines[index + 1 : end])))
        index = end + 1
    return blocks


def console_examples(block: Block) -> list[Example]:
    """The commands of a console block, each with the output lines shown under it."""
    examples: list[Example] = []
    lines = block.lines
    index = 0
    while index < len(lines):
        if not lines[index].startswith("$ "):
            if lines[index].strip():
                raise AssertionError(f"{block.where(index)}: output before any command")
            index += 1
            continue
        start = index
        command = lines[index][2:]
        while command.endswith("\\"):
            index += 1
            command = command[:-1] + " " + lines[index].strip()
        index += 1
        heredoc = None
        marker = re.search(r"<<\s*'?([A-Za-z_]+)'?\s*$", command)
        if marker is not None:
            body: list[str] = []
            while index < len(lines) and lines[index] != marker.group(1):
                body.append(lines[index])
                index += 1
            if index == len(lines):
                raise AssertionError(f"{block.where(start)}: here-document without its end")
            index += 1
            heredoc = "".join(line + "\n" for line in body)
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            if lines[index].strip():
                output.append(lines[index])
            index += 1
        examples.append(Example(block.where(start), command, tuple(output), heredoc))
    return examples


def split_comment(command: str) -> tuple[str, str]:
    """The command without its ``# comment``, and the comment (quotes respected)."""
    quote = ""
    for position, char in enumerate(command):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (position == 0 or command[position - 1].isspace()):
            return command[:position].rstrip(), command[position + 1 :].strip()
    return command.rstrip(), ""


def expand_variables(command: str, environment: Mapping[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced from the session's environment, outside single quotes."""
    parts = re.split(r"('[^']*')", command)
    for index, part in enumerate(parts):
        if part.startswith("'"):
            continue

        def value(match: re.Match[str]) -> str:
            name = match.group(1) or match.group(2)
            if name not in environment:
                raise AssertionError(f"${name} is not set in this block")
            return environment[name]

        parts[index] = VARIABLE.sub(value, part)
    return "".join(parts)


def json_fields(text: str) -> dict[str, str]:
    """Every field of every JSON object in ``text`` (one document, or one per line), by name;
    a later field of the same name wins."""
    found: dict[str, str] = {}
    try:
        documents = [orjson.loads(text)]
    except orjson.JSONDecodeError:
        documents = []
        for line in text.splitlines():
            with contextlib.suppress(orjson.JSONDecodeError):
                documents.append(orjson.loads(line))

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, str | int) and not isinstance(item, bool):
                    found[key] = str(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for document in documents:
        walk(document)
    return found


def shows(expected: tuple[str, ...], printed: list[str]) -> bool:
    """Whether every expected line matches a printed line, in order (``...``: any text)."""
    lines = iter(printed)
    for shown in expected:
        pattern = re.compile(".*".join(re.escape(piece) for piece in shown.strip().split("...")))
        if not any(pattern.fullmatch(line.strip()) for line in lines):
            return False
    return True


@dataclass
class Outcome:
    code: int
    out: str
    err: str


@dataclass
class Service:
    """A ``mace serve ... &`` of the page, and where its output goes."""

    where: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> int:
        """SIGTERM, as ``kill`` sends it; the exit code (a service that hangs is killed)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=60)
        self.log.close()
        return self.process.returncode


@dataclass
class Session:
    """One document's examples, run in order in ``directory``.

    ``database`` makes an empty PostgreSQL database: the page's examples that point a store at
    PostgreSQL use the one it makes first, whatever URL they show (close the session after).
    """

    directory: Path
    database: Callable[[], str] | None = None
    values: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    ports: dict[str, str] = field(default_factory=dict)  # a port shown -> the one used
    store: str | None = None

    def close(self) -> None:
        """Stop the services the page left running."""
        for service in self.services:
            service.stop()

    def base_environment(self) -> dict[str, str]:
        clean = {name: value for name, value in os.environ.items() if not name.startswith("MACE_")}
        return {**clean, "PWD": str(self.directory)}

    def run_block(self, block: Block) -> None:
        environment = self.base_environment()
        for example in console_examples(block):
            self.run(example, environment)

    def run(self, example: Example, environment: dict[str, str]) -> None:
        code, comment = split_comment(example.command)
        expected_exit = EXPECTED_EXIT.match(comment)
        expected = int(expected_exit.group(1)) if expected_exit else 0
        capture = CAPTURE.fullmatch(code)
        target = None
        if capture is not None:
            target, code = capture.group(1), capture.group(2)
        code = ADDRESS.sub(self.address, self.fill(expand_variables(code, environment), example))
        words = shlex.split(code)
        outcome = self.execute(words, example, environment)
        if outcome is None:
            assert not example.output, f"{example.where}: output shown for a command not run here"
            return
        context = f"{example.where}: $ {example.command}\n{outcome.out}{outcome.err}"
        for service in self.services:  # what a service that a command talks to said
            context += f"\n{service.where}: mace serve printed:\n{service.output()}"
        assert outcome.code == expected, f"exit {outcome.code}, not {expected}: {context}"
        assert shows(example.output, (outcome.out + outcome.err).splitlines()), (
            f"the output shown is not what it printed: {context}"
        )
        self.values.update(json_fields(outcome.out))
        if target is not None:
            environment[target] = outcome.out.strip()

    def address(self, match: re.Match[str]) -> str:
        """A service's address as shown, with the port the page's service really listens on."""
        return f"{match.group(1)}:{self.ports.get(match.group(2), match.group(2))}"

    def postgres(self, name: str, url: str) -> str:
        """The page's database, for a store setting shown as a PostgreSQL URL."""
        if not url.startswith("postgresql://") or name not in STORES:
            return url
        if self.store is None:
            assert self.database is not None, "a page with a PostgreSQL store needs a database"
            self.store = self.database()
        return self.store

    def fill(self, code: str, example: Example) -> str:
        """The placeholders replaced by the values earlier commands printed."""

        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            assert name in self.values, f"{example.where}: no earlier JSON printed {name}"
            return self.values[name]

        return PLACEHOLDER.sub(value, code)

    def execute(
        self, words: list[str], example: Example, environment: dict[str, str]
    ) -> Outcome | None:
        """Run (or check) one command; None when it is not run here."""
        for operator in ("|", "||", "&&", ";"):
            assert operator not in words, f"{example.where}: one command per line, no {operator}"
        background = bool(words) and words[-1] == "&"
        if background:
            words = words[:-1]
        scoped = dict(environment)
        while words and ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            scoped[name] = self.postgres(name, value)
        assert words, f"{example.where}: no command"
        words, output = redirection(words)
        program = words[0]
        if program == "export":
            for assignment in words[1:]:
                name, equals, value = assignment.partition("=")
                assert equals, f"{example.where}: export NAME=VALUE, not {assignment}"
                environment[name] = self.postgres(name, value)
            return None
        if program == "set":
            # set -a / set +a around ". FILE": every variable set here is exported anyway.
            assert words[1:] in (["-a"], ["+a"]), f"{example.where}: set -a or set +a only"
            return None
        if program == ".":
            if words[1:] == [ACTIVATE]:
                self.skipped.append(f"{example.where}: . {ACTIVATE}: mace runs in-process")
            else:
                environment.update(dotenv(self.directory / words[1], example))
            return None
        if program == "kill":
            assert words[1:] == ["%1"], f"{example.where}: kill %1 stops the page's service"
            assert self.services, f"{example.where}: no service runs in the background"
            service = self.services.pop(0)
            code = service.stop()
            assert code == 0, f"{example.where}: the service exited {code}: {service.output()}"
            return None
        if program == "cat" and example.heredoc is not None:
            assert output is not None, f"{example.where}: cat <<EOF needs > FILE"
            (self.directory / output).write_text(example.heredoc)
            return None
        if program in MACE:
            if background:
                assert words[1:2] == ["serve"], (
                    f"{example.where}: only a service runs in the background"
                )
                check_parses(words[1:], example)
                self.start_service(words[2:], example, scoped)
                return None
            reason = parse_only(words[1:])
            if reason is not None:
                check_parses(words[1:], example)
                self.skipped.append(f"{example.where}: mace {words[1]}: {reason}")
                return None
            outcome = self.mace(words[1:], scoped)
        elif program == "python3" and words[1:2] == ["-c"]:
            outcome = self.run_program([sys.executable, *words[1:]], scoped)
        elif program in PROGRAMS:
            outcome = self.run_program(words, scoped)
        elif program in NOT_EXECUTED:
            self.skipped.append(f"{example.where}: {program}: {NOT_EXECUTED[program]}")
            return None
        else:
            raise AssertionError(
                f"{example.where}: the docs test does not know how to run {program!r}: run it in"
                " tests/support/doc_examples.py, or list it in NOT_EXECUTED with the reason"
            )
        if output is not None:
            (self.directory / output).write_text(outcome.out)
            self.values.update(json_fields(outcome.out))
            outcome = Outcome(outcome.code, "", outcome.err)
        return outcome

    def run_program(self, words: list[str], environment: dict[str, str]) -> Outcome:
        """A program other than ``mace``, run as a shell would run it here."""
        done = subprocess.run(
            words,
            cwd=self.directory,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,  # a guard against a hang, never reached by a passing run
        )
        return Outcome(done.returncode, done.stdout, done.stderr)

    def start_service(
        self, arguments: list[str], example: Example, environment: dict[str, str]
    ) -> None:
        """``mace serve ARGUMENTS &``, on a free port in place of the one shown (tests run in
        parallel): later commands' ``localhost:PORT`` reach it."""
        port = str(free_port())
        if "--port" in arguments:
            at = arguments.index("--port") + 1
            self.ports[arguments[at]] = port
            arguments = [*arguments[:at], port, *arguments[at + 1 :]]
        else:
            self.ports["8000"] = port  # mace serve's default
            arguments = [*arguments, "--port", port]
        # Open as long as the service runs; Service.stop closes it.
        log = tempfile.TemporaryFile()  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-c", MACE_MAIN, "serve", *arguments],
            cwd=self.directory,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.services.append(Service(example.where, process, log))

    def mace(self, arguments: list[str], environment: dict[str, str]) -> Outcome:
        """``mace`` in this process, in the session's directory and environment."""
        from infrastructure.cli import main  # noqa: PLC0415

        out, err = io.StringIO(), io.StringIO()
        with session_process(self.directory, environment), redirected(out, err):
            try:
                code = main(arguments)
            except SystemExit as stop:  # --help and --version, as argparse ends them
                code = stop.code if isinstance(stop.code, int) else 0
        return Outcome(code, out.getvalue(), err.getvalue())


def redirection(words: list[str]) -> tuple[list[str], str | None]:
    """The words without ``> FILE`` and a here-document marker, and FILE."""
    kept: list[str] = []
    output = None
    index = 0
    while index < len(words):
        word = words[index]
        if word == ">":
            output = words[index + 1]
            index += 2
            continue
        if word.startswith(">"):
            output = word[1:]
        elif not word.startswith("<<"):
            kept.append(word)
        index += 1
    return kept, output


def parse_only(arguments: list[str]) -> str | None:
    """Why this ``mace`` command is parsed, not run, here; None when it runs."""
    if arguments and arguments[0] in PARSED_ONLY:
        return PARSED_ONLY[arguments[0]]
    return None


def dotenv(path: Path, example: Example) -> dict[str, str]:
    """The ``NAME=value`` lines of a file that ``. FILE`` reads (values quoted as in a shell)."""
    assert path.is_file(), f"{example.where}: no file {path.name}"
    assigned: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, equals, value = line.partition("=")
        assert equals and ASSIGNMENT.match(f"{name}="), f"{example.where}: {path.name}: {line!r}"
        (assigned[name],) = shlex.split(value) or [""]
    return assigned


def check_parses(arguments: list[str], example: Example) -> None:
    """mace's own parser takes these arguments (an unknown command or flag fails)."""
    from domain.errors import InvalidInput  # noqa: PLC0415
    from infrastructure.cli.command_line import build_parser  # noqa: PLC0415

    try:
        build_parser().parse_args(arguments)
    except InvalidInput as refused:
        raise AssertionError(f"{example.where}: mace {shlex.join(arguments)}: {refused}") from None


@contextlib.contextmanager
def session_process(directory: Path, environment: Mapping[str, str]) -> Iterator[None]:
    """This process in ``directory`` with exactly ``environment``, restored afterwards."""
    saved_environment, saved_directory = dict(os.environ), Path.cwd()
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(saved_directory)
        os.environ.clear()
        os.environ.update(saved_environment)


@contextlib.contextmanager
def redirected(out: io.StringIO, err: io.StringIO) -> Iterator[None]:
    """sys.stdout and sys.stderr into ``out`` and ``err`` (stdout's binary side too)."""
    raw_out, raw_err = io.BytesIO(), io.BytesIO()
    text_out = io.TextIOWrapper(raw_out, encoding="utf-8", write_through=True)
    text_err = io.TextIOWrapper(raw_err, encoding="utf-8", write_through=True)
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = text_out, text_err
    try:
        yield
    finally:
        text_out.flush()
        text_err.flush()
        sys.stdout, sys.stderr = saved
        out.write(raw_out.getvalue().decode())
        err.write(raw_err.getvalue().decode())
