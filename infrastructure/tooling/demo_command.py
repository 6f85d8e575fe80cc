"""``mace demo``: record, replay and catch tampering on real jobs; the first command to run.

Defined beside the demo it runs (its arguments are in `infrastructure.tooling.command_arguments`);
``mace`` loads this module only when the command runs.
"""

from __future__ import annotations

import argparse

from domain.errors import InvalidInput
from infrastructure.application.errors import EXIT_FAILED, EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings, SQLiteStore
from infrastructure.tooling.demo import run_demo


def demo_command(args: argparse.Namespace, settings: Settings) -> int:
    if not isinstance(settings.parsed_store(), SQLiteStore):
        raise InvalidInput(
            "mace demo runs on a SQLite store (it tampers with a copy of the file): unset"
            " MACE_STORE or point it at sqlite:///path/to/demo.db"
        )
    with Ledger.open(settings) as ledger:
        ok = run_demo(ledger, print)
    return EXIT_OK if ok else EXIT_FAILED
