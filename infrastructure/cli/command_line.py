"""The whole ``mace`` command line: parse, load the settings, run one command, answer errors.

`infrastructure.cli.main` imports this only for a command: ``mace --version`` is answered
without it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import version

from pydantic import ValidationError

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_INTERRUPTED, EXIT_OK, failure_of
from infrastructure.application.interrupts import ctrl_c_stops
from infrastructure.application.settings import Settings, SettingsError
from infrastructure.cli.command_table import ENVIRONMENT, CommandsOnUse, add_commands, overview
from infrastructure.cli.common import Parser


def build_parser() -> Parser:
    """The whole command line; a command's own arguments load only when it is used."""
    parser = Parser(
        prog="mace",
        description=overview("MACE Ledger: signed, replayable records of agent runs."),
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mace {version('mace-ledger')}")
    commands = parser.add_subparsers(
        dest="command",
        required=True,
        parser_class=Parser,
        action=CommandsOnUse,
        metavar="COMMAND",
        help="one of the commands above",
    )
    add_commands(commands)
    return parser


def load_settings() -> Settings:
    try:
        settings = Settings()
        settings.parsed_store()
        settings.parsed_read_store()
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "MACE_" + str(first["loc"][0]).upper() if first["loc"] else "settings"
        raise InvalidInput(f"invalid {field}: {first['msg']}") from None
    except SettingsError as exc:
        raise InvalidInput(str(exc)) from None
    return settings


def run(arguments: Sequence[str]) -> int:
    """``mace`` with these arguments: its exit code."""
    warnings = logging.StreamHandler()
    warnings.setFormatter(OneLineFormatter("mace: warning: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[warnings])
    # Until the command line parses, asking for --json anywhere in it asks for a JSON error.
    as_json = "--json" in arguments
    with ctrl_c_stops() as ctrl_c:
        try:
            args = build_parser().parse_args(arguments)
            as_json = bool(getattr(args, "json", False))
            code = int(args.handler(args, load_settings()))
        except KeyboardInterrupt:
            ctrl_c.requested = True
        except BrokenPipeError:  # the reader (e.g. `head`) has all it wanted
            return EXIT_OK
        except Exception as exc:
            failure = failure_of(exc)
            if failure is None:
                raise
            print(failure.line(as_json), file=sys.stderr)
            return failure.exit_code
        # A Ctrl-C lost where Python ignores exceptions (`interrupts`) and never met by a
        # check before the command ended stops it all the same.
        if ctrl_c.requested:
            print("mace: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return code


class OneLineFormatter(logging.Formatter):
    """Warnings are one line too, though a store's message may run on (PostgreSQL's CONTEXT)."""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).splitlines()[0]
