"""``mace``: the command line. Thin: parse, validate, call one ledger use case, print.

Exit codes: 0 success; 1 the operation ran and failed (integrity failure, unreachable store);
2 bad usage, input or configuration (a signing key the store contradicts), in which case nothing
has been written. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import version

from eventsourcing.persistence import PersistenceError
from pydantic import ValidationError

from domain.errors import MaceError
from infrastructure.cli.command_table import ENVIRONMENT, CommandsOnUse, add_commands, overview
from infrastructure.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, UsageError
from infrastructure.storage.errors import (
    ConflictError,
    NotFoundError,
    SnapshotError,
    StoreBusyError,
)
from infrastructure.storage.key_checks import KeyMismatch
from infrastructure.storage.keyring import KeyringError
from infrastructure.storage.settings import Settings, SettingsError


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
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "MACE_" + str(first["loc"][0]).upper() if first["loc"] else "settings"
        raise UsageError(f"invalid {field}: {first['msg']}") from None
    except SettingsError as exc:
        raise UsageError(str(exc)) from None
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    warnings = logging.StreamHandler()
    warnings.setFormatter(OneLineFormatter("mace: warning: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[warnings])
    try:
        args = build_parser().parse_args(argv)
        return int(args.handler(args, load_settings()))
    except (
        UsageError,
        KeyringError,
        KeyMismatch,
        NotFoundError,
        ConflictError,
        SnapshotError,
    ) as exc:
        fail(f"error: {exc}")
        return EXIT_USAGE
    except MaceError as exc:
        fail(str(exc))
        return EXIT_FAILED
    except BrokenPipeError:  # the reader (e.g. `head`) has all it wanted
        return EXIT_OK
    except StoreBusyError as exc:
        fail(f"error: {exc}")
        return EXIT_FAILED
    except (PersistenceError, OSError) as exc:
        fail(f"error: store unavailable: {exc}")
        return EXIT_FAILED


class OneLineFormatter(logging.Formatter):
    """Warnings are one line too, though a store's message may run on (PostgreSQL's CONTEXT)."""

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).splitlines()[0]


def fail(message: str) -> None:
    """Errors are one line: the first line of the message says what was wrong."""
    print(f"mace: {message}".splitlines()[0], file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
