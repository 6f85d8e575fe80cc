"""The arguments of ``mace checkpoint``; `infrastructure.cli.checkpoint` runs them."""

from __future__ import annotations

import argparse


def add_checkpoint_arguments(checkpoint: argparse.ArgumentParser) -> None:
    checkpoint.add_argument(
        "--json",
        action="store_true",
        help="print canonical JSON: number, tree_size, root, last_notification_id, written",
    )
    checkpoint.set_defaults(handler="infrastructure.cli.checkpoint:write_checkpoint")
    actions = checkpoint.add_subparsers(dest="checkpoint_command", metavar="ACTION")
    public_key = actions.add_parser(
        "public-key", help="print the public key that checks checkpoints (PEM)"
    )
    public_key.add_argument(
        "--json", action="store_true", help="print canonical JSON: key_id, public_key"
    )
    public_key.set_defaults(handler="infrastructure.cli.checkpoint:print_public_key")
