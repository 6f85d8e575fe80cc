"""``mace demo``: record, replay and catch tampering on real jobs; the first command to run."""

from __future__ import annotations

import argparse
from typing import Any

from infrastructure.application.ledger import Ledger
from infrastructure.cli.common import EXIT_FAILED, EXIT_OK, UsageError
from infrastructure.storage.settings import Settings, SQLiteStore
from infrastructure.tooling.demo import run_demo


def add_parsers(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="record Stage-0 jobs, replay them, and show what replay catches"
    )
    demo.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace, settings: Settings) -> int:
    if not isinstance(settings.parsed_store(), SQLiteStore):
        raise UsageError(
            "mace demo runs on a SQLite store (it tampers with a copy of the file): unset"
            " MACE_STORE or point it at sqlite:///path/to/demo.db"
        )
    with Ledger.open(settings) as ledger:
        ok = run_demo(ledger, print)
    return EXIT_OK if ok else EXIT_FAILED
