"""``mace`` before any command runs: it starts without the heavy parts, and its help is complete.

Start-up is checked in fresh interpreters (``sys.modules`` after ``main``), never timed: how long
``mace --version`` takes belongs in a measurement, not in a pass/fail test.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version

import pytest

from infrastructure.cli import main
from infrastructure.cli.command_line import build_parser
from infrastructure.cli.command_table import COMMANDS, ENVIRONMENT, Group, load
from infrastructure.storage.settings import Settings

# What only `mace serve`, `mace loadtest` or a store being opened may load.
HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "jinja2",
    "httpx",
    "psycopg",
    "eventsourcing.postgres",
    "infrastructure.application",
    "infrastructure.api.app",
)
# The application layer's own entry, which every command answers through: the error table, the
# settings and the Ctrl-C handling every command runs under (no use case among them).
ENTRY = (
    "infrastructure.application",
    "infrastructure.application.errors",
    "infrastructure.application.interrupts",
    "infrastructure.application.settings",
)
# Runs main() with each argument list in turn, in one fresh interpreter; prints what it loaded.
PROBE = """
import sys
from infrastructure.cli import main
for argv in sys.argv[1:]:
    try:
        main(argv.split())
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
print("\\n".join(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_after(*argvs: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argvs], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return set(result.stderr.split())


def heavy(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules - set(ENTRY) if any(m == h or m.startswith(h + ".") for h in HEAVY)
    )


@pytest.mark.parametrize(
    "argvs",
    [("--version",), ("--help",), tuple(f"{command.name} --help" for command in COMMANDS)],
    ids=["version", "help", "every-command-help"],
)
def test_version_and_help_load_no_web_stack_no_driver_and_no_use_case(
    argvs: tuple[str, ...],
) -> None:
    modules = loaded_after(*argvs)
    assert "infrastructure.cli" in modules  # the probe ran mace
    assert heavy(modules) == []


def test_version_alone_is_answered_before_the_command_line_is_built(
    capsys: pytest.CaptureFixture[str],
) -> None:
    modules = loaded_after("--version")
    assert {"infrastructure.cli.command_line", "pydantic", "domain"}.isdisjoint(modules)
    assert main(["--version"]) == 0
    fast = capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse's own action, where --version comes with more
        main(["--version", "--help"])
    assert fast == capsys.readouterr().out == f"mace {version('mace-ledger')}\n"


def test_a_command_loads_its_handler_only_when_it_runs() -> None:
    modules = loaded_after("schema --help")
    assert "infrastructure.cli.arguments.ingest" in modules
    assert "infrastructure.cli.ingest" not in modules
    assert "infrastructure.cli.ingest" in loaded_after("schema")


def test_every_command_in_the_table_parses_and_has_its_own_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in COMMANDS:
        with pytest.raises(SystemExit) as exited:
            main([command.name, "--help"])
        assert exited.value.code == 0, command.name
        out = capsys.readouterr().out
        assert out.startswith(f"usage: mace {command.name} "), command.name
        assert command.help in " ".join(out.split()), command.name


def full_parser() -> argparse.ArgumentParser:
    """``mace``'s parser with every command's arguments loaded (as if each had been used)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in COMMANDS:
        command.add_arguments(commands.choices[command.name])
    return parser


def parsers_below(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser of the tree under ``parser`` (itself excluded), depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield child
                yield from parsers_below(child)


def test_every_command_subcommand_and_argument_has_help() -> None:
    """The commands' own one-line help is the table's (listed by group); below them, argparse's."""
    assert all(command.help for command in COMMANDS)
    root = full_parser()
    missing = []
    for parser in [root, *parsers_below(root)]:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                if parser is not root:
                    described = {c.dest for c in action._choices_actions if c.help}
                    missing += [f"{parser.prog} {n}" for n in action.choices if n not in described]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{parser.prog} {action.option_strings or action.dest}")
    assert missing == []


def test_every_command_runs_a_handler_that_exists() -> None:
    leaves = [
        parser
        for parser in parsers_below(full_parser())
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)
    ]
    assert len(leaves) > len(COMMANDS)
    for parser in leaves:
        handler = parser.get_default("handler")
        assert isinstance(handler, str), parser.prog
        assert callable(load(handler)), parser.prog


def test_help_lists_the_commands_by_group(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    listed: dict[str, list[str]] = {}
    heading = ""
    for line in out.split("\n\n")[2:6]:  # after the usage and the tagline: one per group
        heading, *rows = line.splitlines()
        listed[heading] = [row.split()[0] for row in rows]
    assert listed == {
        "recording:": ["run", "ingest", "schema", "sem", "snapshot", "runs", "events", "jobs"],
        "replay and governance:": [
            "replay",
            "fork",
            "reexecute",
            "verify",
            "audit",
            "governance",
            "export",
            "proof",
            "import",
            "export-test",
            "rebuild",
            "follow",
        ],
        "receipts and memories:": ["memories", "policy", "context", "handoff", "receipts"],
        "store and service:": ["init", "checkpoint", "serve", "token", "bench", "demo", "loadtest"],
    }
    assert [f"{group}:" for group in Group] == list(listed)


def test_the_epilog_names_every_variable_mace_reads_and_no_other() -> None:
    assert Settings.model_config["env_prefix"] == "MACE_"
    read = {f"MACE_{field.upper()}" for field in Settings.model_fields}
    named = set(re.findall(r"MACE_[A-Z_]*[A-Z]", ENVIRONMENT))
    assert named == read
    assert ENVIRONMENT in build_parser().format_help()
