"""``mace init``: set up the store ``MACE_STORE`` names (its tables), once, before it is used."""

from __future__ import annotations

import argparse

from infrastructure.application.errors import EXIT_OK
from infrastructure.application.ledger import Ledger
from infrastructure.application.settings import Settings
from infrastructure.cli.common import emit_json


def init_store(args: argparse.Namespace, settings: Settings) -> int:
    # Opening as a writer sets up whatever tables are missing, one process at a time.
    with Ledger.open(settings) as ledger:
        tables = ledger.status.tables()
    where = ledger.status.where
    if args.json:
        emit_json({"store": where, "tables": tables})
    else:
        print(f"ledger ready at {where}: tables {', '.join(tables)}")
    return EXIT_OK
