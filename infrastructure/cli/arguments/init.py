"""The arguments of ``mace init``; `infrastructure.cli.init` runs them."""

from __future__ import annotations

import argparse


def add_init_arguments(init: argparse.ArgumentParser) -> None:
    init.add_argument("--json", action="store_true", help="print canonical JSON")
    init.set_defaults(handler="infrastructure.cli.init:init_store")
