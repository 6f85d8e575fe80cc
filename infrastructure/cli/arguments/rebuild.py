"""The arguments of ``mace rebuild`` and ``mace follow``; `infrastructure.cli.rebuild` runs them."""

from __future__ import annotations

import argparse


def add_rebuild_arguments(rebuild: argparse.ArgumentParser) -> None:
    rebuild.add_argument("--json", action="store_true", help="print canonical JSON")
    rebuild.set_defaults(handler="infrastructure.cli.rebuild:rebuild_views")


def add_follow_arguments(follow: argparse.ArgumentParser) -> None:
    follow.set_defaults(handler="infrastructure.cli.rebuild:follow_views")
